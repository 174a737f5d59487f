package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// FileOptions configure a FileSink. The zero value of each field is
// described beside it.
type FileOptions struct {
	// Path is the file events are appended to, as JSON lines. Required.
	Path string
	// MaxSize is the size past which the file is rotated: Path becomes
	// Path.1, Path.1 becomes Path.2, and so on. Zero means 100MiB.
	MaxSize int64
	// Keep is how many rotated files are kept; the oldest beyond it is
	// deleted. Zero means 5; at least 1.
	Keep int
	// Sync is how often written events are synced to the disk; a Close
	// and a rotation always sync. Zero means 1s; negative syncs after
	// every write.
	Sync time.Duration
	// Now is the clock for Sync; nil means time.Now.
	Now func() time.Time
}

// FileSink writes events to a file as JSON lines, rotated by size and
// synced on an interval, so that a crash loses at most the last interval
// of events the queue believed written.
type FileSink struct {
	o FileOptions

	mu         sync.Mutex
	f          *os.File
	w          *bufio.Writer
	size       int64
	lastSync   time.Time
	dirty      bool // written since the last sync
	syncFailed bool
	stop       chan struct{}
	done       chan struct{}
}

// NewFileSink opens (or creates, mode 0600: the trail names principals and
// resources) the file and starts the sync of every interval.
func NewFileSink(o FileOptions) (*FileSink, error) {
	if o.Path == "" {
		return nil, errors.New("audit file: no path")
	}
	if o.MaxSize <= 0 {
		o.MaxSize = 100 << 20
	}
	if o.Keep <= 0 {
		o.Keep = 5
	}
	if o.Sync == 0 {
		o.Sync = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &FileSink{o: o, stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.open(); err != nil {
		return nil, err
	}
	s.lastSync = o.Now()
	if o.Sync > 0 {
		go s.syncEvery(o.Sync)
	} else {
		close(s.done)
	}
	return s, nil
}

// Name is SinkFile.
func (s *FileSink) Name() SinkName { return SinkFile }

func (s *FileSink) open() error {
	f, err := os.OpenFile(s.o.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit file: %w", err)
	}
	s.f, s.size = f, fi.Size()
	if s.w == nil {
		s.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		s.w.Reset(f)
	}
	return nil
}

// Write appends recs, rotating the file before a record that would take it
// past MaxSize (a file holds at least one record whatever its size), and
// syncs if the interval has passed.
func (s *FileSink) Write(_ context.Context, recs []Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		if err := s.open(); err != nil {
			return 0, err
		}
	}
	for i := range recs {
		v := recs[i].Value
		if s.size > 0 && s.size+int64(len(v)) > s.o.MaxSize {
			if err := s.w.Flush(); err != nil {
				return 0, s.fail(err)
			}
			if err := s.rotate(); err != nil {
				return i, err
			}
		}
		if _, err := s.w.Write(v); err != nil {
			return 0, s.fail(err)
		}
		s.size += int64(len(v))
		s.dirty = true
	}
	// What the queue counts as written has reached the kernel: a crash of
	// the process loses nothing, one of the machine at most an interval.
	if err := s.w.Flush(); err != nil {
		return 0, s.fail(err)
	}
	if s.o.Sync < 0 || s.syncFailed || s.o.Now().Sub(s.lastSync) >= s.o.Sync {
		// The records are written; a failed sync is reported, and the
		// queue's retry (of nothing) syncs again.
		if err := s.syncLocked(); err != nil {
			return len(recs), err
		}
	}
	return len(recs), nil
}

// fail closes the file after a write error, so that the retry reopens it
// (a disk that was full, a file removed); what the buffer held is lost
// with the error, and the queue writes the whole batch again: a line may
// be written twice, or cut short and followed by its whole copy.
func (s *FileSink) fail(err error) error {
	s.w.Reset(io.Discard)
	s.f.Close()
	s.f = nil
	return fmt.Errorf("audit file: %w", err)
}

// rotate syncs and closes the file, shifts Path.N to Path.N+1 (deleting
// the one beyond Keep), renames Path to Path.1 and opens a new Path.
func (s *FileSink) rotate() error {
	if err := s.f.Sync(); err != nil {
		return s.fail(err)
	}
	s.f.Close()
	s.f = nil
	s.dirty = false
	name := func(n int) string { return s.o.Path + "." + strconv.Itoa(n) }
	if err := os.Remove(name(s.o.Keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit file: %w", err)
	}
	for n := s.o.Keep - 1; n >= 1; n-- {
		if err := os.Rename(name(n), name(n+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit file: %w", err)
		}
	}
	if err := os.Rename(s.o.Path, name(1)); err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	return s.open()
}

func (s *FileSink) syncLocked() error {
	s.lastSync = s.o.Now()
	if !s.dirty || s.f == nil {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		s.syncFailed = true
		return fmt.Errorf("audit file: sync: %w", err)
	}
	s.dirty, s.syncFailed = false, false
	return nil
}

// Sync syncs the events written so far to the disk.
func (s *FileSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLocked()
}

// syncEvery syncs on the interval, so that events written just before a
// quiet spell do not wait for the next write to reach the disk.
func (s *FileSink) syncEvery(d time.Duration) {
	defer close(s.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sync()
		}
	}
}

// Close syncs and closes the file.
func (s *FileSink) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.w.Flush()
	if e := s.syncLocked(); err == nil {
		err = e
	}
	if e := s.f.Close(); err == nil {
		err = e
	}
	s.f = nil
	return err
}
