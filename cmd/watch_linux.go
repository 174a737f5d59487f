package cmd

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvents are what the directory watch asks the kernel for: names
// appearing, going and renamed, not writes. A log or an audit trail written
// beside the file (tens of thousands of writes a second) then puts nothing
// in the queue: no wakeup, no read, no CPU.
const dirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// fileEvents are what the watch on the file itself asks for: its writes
// and mode changes. inotify follows the path's symlinks, so this watches
// the file a ConfigMap's links lead to.
const fileEvents = unix.IN_MODIFY | unix.IN_ATTRIB

// watchFile watches the directory holding path for the names path
// resolves through, and the file it resolves to for writes: editors and
// Kubernetes ConfigMap mounts replace the file by renaming another into
// place (a ConfigMap swaps a "..data" symlink), which a watch on the old
// file alone would never see, and a directory watch that also took writes
// would wake for every write to every file beside it. fsnotify cannot
// narrow a watch's events (it exports no way to pick them), hence inotify
// directly. Once events settle, a signal is sent on the channel; the
// caller compares contents.
//
// Of the directory's events only those naming the file or a link on its
// way (pathNames) are handled: each recomputes those names and moves the
// file watch to what the path now resolves to. A queue overflow may have
// lost one, so it is handled as one.
func watchFile(path string, log *slog.Logger, counts *watchCounts) (<-chan struct{}, func(), error) {
	if counts == nil {
		counts = new(watchCounts)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, nil, os.NewSyscallError("inotify_init1", err)
	}
	// Non-blocking, so reads wait in the runtime's poller and Close ends
	// one under way.
	f := os.NewFile(uintptr(fd), "inotify")
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	dirWd, err := unix.InotifyAddWatch(fd, dir, dirEvents)
	if err != nil {
		f.Close()
		return nil, nil, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	names := pathNames(dir, name)
	fileWd := -1
	// watchTarget moves the file watch to what path resolves to now. A
	// path that is not there is left unwatched: its return is a directory
	// event.
	watchTarget := func() {
		wd, err := unix.InotifyAddWatch(fd, path, fileEvents)
		if err != nil {
			wd = -1
		}
		if fileWd != -1 && fileWd != wd && fileWd != dirWd {
			// The old file, renamed away or deleted, is no
			// longer ours; gone already if deleted.
			_, _ = unix.InotifyRmWatch(fd, uint32(fileWd))
		}
		fileWd = wd
	}
	watchTarget()

	// Closing the file ends the read under way, so done is not needed.
	filter := func(kick chan<- struct{}, _ <-chan struct{}) {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					log.Warn("config file watch", "err", err)
				}
				return
			}
			relevant := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+unix.SizeofInotifyEvent : min(n, off+unix.SizeofInotifyEvent+int(ev.Len))]
				off += unix.SizeofInotifyEvent + int(ev.Len)
				counts.seen.Add(1)
				switch {
				case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				case ev.Mask&unix.IN_IGNORED != 0:
					continue
				case int(ev.Wd) == dirWd:
					evName := string(bytes.TrimRight(nameBytes, "\x00"))
					if !names[evName] {
						continue
					}
				case int(ev.Wd) != fileWd:
					// A file the path no longer leads to.
					continue
				}
				counts.handled.Add(1)
				relevant = true
			}
			if !relevant {
				continue
			}
			// A link on the way may now point elsewhere.
			names = pathNames(dir, name)
			watchTarget()
			kickOnce(kick)
		}
	}
	out, stop := runWatch(filter, f.Close, counts)
	return out, stop, nil
}
