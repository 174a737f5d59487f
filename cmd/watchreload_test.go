package cmd

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchReloadOnlyOnChange: files written beside the watched one (logs,
// an audit trail) cost no work: their events are dropped as they arrive,
// with no read of the file and no reload; a change to the file reloads it
// once.
func TestWatchReloadOnlyOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acls.yaml")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int32
	var counts watchCounts
	stop := watchReloadCounted(context.Background(), path, "test file", func() error { reloads.Add(1); return nil }, slog.New(slog.DiscardHandler), &counts)
	defer stop()
	waitReloads := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for reloads.Load() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := reloads.Load(); n != want {
			t.Fatalf("%d reloads, want %d", n, want)
		}
	}

	log, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for range 10000 {
		if _, err := log.WriteString("a line of the audit trail\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Events arrive in order: once the change to the file is seen, every
	// event of the writes before it has been.
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitReloads(1)
	time.Sleep(2 * settleTime)
	if n := reloads.Load(); n != 1 {
		t.Fatalf("%d reloads after one change to the file, want 1", n)
	}
	// The one write to the file: a truncate and a write, at most an event
	// each (the kernel merges identical ones).
	if n := counts.handled.Load(); n < 1 || n > 2 {
		t.Errorf("%d events handled, want the file's own 1 or 2 (%d seen)", n, counts.seen.Load())
	}
	if n := counts.reads.Load(); n != 1 {
		t.Errorf("the file was read %d times, want 1", n)
	}

	// A rewrite of the same bytes is read, and not reloaded.
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for counts.reads.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := counts.reads.Load(); n != 2 {
		t.Fatalf("the file was read %d times after a rewrite, want 2", n)
	}
	if n := reloads.Load(); n != 1 {
		t.Errorf("%d reloads after a rewrite of the same bytes, want 1", n)
	}
}

// TestWatchFollowsConfigMapSwaps: the names of a ConfigMap mount's symlink
// chain are watched, and follow each swap of "..data".
func TestWatchFollowsConfigMapSwaps(t *testing.T) {
	m := &configMap{dir: t.TempDir(), name: "acls.yaml"}
	m.write(t, "one")
	if got, want := pathNames(m.dir, m.name), map[string]bool{"acls.yaml": true, "..data": true, "..v1": true}; !maps.Equal(got, want) {
		t.Errorf("names watched = %v, want %v", got, want)
	}
	var reloads atomic.Int32
	var counts watchCounts
	stop := watchReloadCounted(context.Background(), m.path(), "test file", func() error { reloads.Add(1); return nil }, slog.New(slog.DiscardHandler), &counts)
	defer stop()
	for i, content := range []string{"two", "three"} {
		m.write(t, content)
		deadline := time.Now().Add(10 * time.Second)
		for reloads.Load() < int32(i+1) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := reloads.Load(); n != int32(i+1) {
			t.Fatalf("%d reloads after %d swaps, want %d", n, i+1, i+1)
		}
	}
}
