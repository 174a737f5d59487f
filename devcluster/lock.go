package devcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockName is the file inside a data directory that the process using the
// directory holds an exclusive lock on, and which names that process.
const lockName = "inorder.lock"

// ErrLocked means another process holds a data directory; the error that
// wraps it is a *LockedError naming the process.
var ErrLocked = errors.New("data directory in use")

// LockedError says which process holds a data directory.
type LockedError struct {
	Dir string
	// PID is the holder's process id; zero when the holder had not yet
	// written it.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%s: %v by another process", e.Dir, ErrLocked)
	}
	return fmt.Sprintf("%s: %v by process %d", e.Dir, ErrLocked, e.PID)
}

// Unwrap lets errors.Is(err, ErrLocked) match.
func (e *LockedError) Unwrap() error { return ErrLocked }

// DirLock is an exclusive hold on a data directory. Two clusters on one
// directory would each keep their own view of its files and overwrite the
// other's: offsets given twice, segments cut under a reader.
type DirLock struct {
	dir string
	f   *os.File
}

// Lock takes the data directory dir, creating it if needed, or returns a
// *LockedError when another process (or another Lock in this one) holds
// it. The lock is flock(2) on a file inside dir: the kernel drops it when
// the process ends however it ends, so a crash leaves nothing to clean up.
func Lock(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, PID: holder(path)}
		}
		return nil, fmt.Errorf("%s: lock: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &DirLock{dir: dir, f: f}, nil
}

// holder reads the process id a lock file names, or 0.
func holder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Unlock releases the directory. The lock file stays: deleting it would
// let a process that opened it just before take a lock on a file no one
// else can find.
func (l *DirLock) Unlock() error {
	return l.f.Close()
}

// Reset deletes the cluster data kept in the locked directory, so that the
// next Start begins empty. A directory holding nothing but the lock is
// already reset; one without the cluster's metadata file is refused, so
// that a mistyped path never deletes anything else.
func (l *DirLock) Reset() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var doomed []string
	for _, e := range entries {
		if e.Name() != lockName {
			doomed = append(doomed, e.Name())
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(l.dir, "meta.json")); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w (no meta.json); delete it by hand if that is what you want", l.dir, ErrNotDataDir)
	} else if err != nil {
		return err
	}
	for _, name := range doomed {
		if err := os.RemoveAll(filepath.Join(l.dir, name)); err != nil {
			return err
		}
	}
	return nil
}
