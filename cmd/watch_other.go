//go:build !linux

package cmd

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// watchFile watches the directory holding path, not the file itself:
// editors and Kubernetes ConfigMap mounts replace the file by renaming
// another into place (a ConfigMap swaps a "..data" symlink), which a watch
// on the old file would never see. Once events naming the file settle, a
// signal is sent on the channel; the caller compares contents.
//
// Only events naming the file, or a link its path resolves through inside
// the directory (a ConfigMap's "..data" and the versioned directory it
// points to), are handled; any other is dropped as it arrives, with no
// timer reset and no read, since a log or an audit trail written beside the
// file brings tens of thousands of events a second. The directory watch
// cannot be narrowed at the source here: fsnotify exports no way to pick
// the events of a watch, so the filter is the first thing that sees each
// event; each still costs fsnotify's read and a channel hand-off (on Linux
// the kernel is asked for fewer, watch_linux.go). A queue overflow may
// have lost an event that named the file, so it is handled as one.
func watchFile(path string, log *slog.Logger, counts *watchCounts) (<-chan struct{}, func(), error) {
	if counts == nil {
		counts = new(watchCounts)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, err
	}
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, nil, err
	}
	names := pathNames(dir, name)
	filter := func(kick chan<- struct{}, done <-chan struct{}) {
		for {
			select {
			case <-done:
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				counts.seen.Add(1)
				if !names[filepath.Base(ev.Name)] {
					continue
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				if !errors.Is(err, fsnotify.ErrEventOverflow) {
					log.Warn("config file watch", "err", err)
					continue
				}
			}
			counts.handled.Add(1)
			// A link on the way may now point elsewhere.
			names = pathNames(dir, name)
			kickOnce(kick)
		}
	}
	out, stop := runWatch(filter, w.Close, counts)
	return out, stop, nil
}
