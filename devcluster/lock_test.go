package devcluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLockIsExclusive takes a data directory twice: the second is refused
// with the holder's process id, and the directory is free again once the
// first lets go.
func TestLockIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.PID != os.Getpid() || le.Dir != dir {
		t.Fatalf("second lock: %v (%+v), want ErrLocked naming pid %d", err, le, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l, err = Lock(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l.Unlock()
}

// TestResetKeepsTheLock resets a directory holding cluster data: the data
// goes, the lock file stays and is still held, so that no other process
// can take the directory in the middle. A directory with only the lock is
// already reset; one without the cluster's metadata is refused untouched.
func TestResetKeepsTheLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Reset(); err != nil {
		t.Fatalf("reset of a directory holding only the lock: %v", err)
	}
	mine := filepath.Join(dir, "notes.txt")
	os.WriteFile(mine, []byte("mine"), 0o600)
	if err := l.Reset(); !errors.Is(err, ErrNotDataDir) {
		t.Fatalf("reset of a foreign directory: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("a refused reset deleted a file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{}"), 0o600)
	os.MkdirAll(filepath.Join(dir, "partitions", "t-0"), 0o700)
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != lockName {
		t.Fatalf("after reset the directory holds %v, want only %s", entries, lockName)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("the lock was lost by the reset: %v", err)
	}
}
