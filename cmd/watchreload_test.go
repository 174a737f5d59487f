package cmd

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// waitCount waits up to 10 seconds for n to reach want, and fails unless
// it is want then.
func waitCount(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.Load(); got != want {
		t.Fatalf("%d reloads, want %d", got, want)
	}
}

// countedWatch runs watchReload on path until the test ends, and returns
// its count of reloads and of its work.
func countedWatch(t *testing.T, path string) (*atomic.Int32, *watchCounts) {
	var reloads atomic.Int32
	counts := new(watchCounts)
	stop := watchReloadCounted(context.Background(), path, "test file", func() error { reloads.Add(1); return nil }, slog.New(slog.DiscardHandler), counts)
	t.Cleanup(stop)
	return &reloads, counts
}

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
	reloads, counts := countedWatch(t, path)

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
	waitCount(t, reloads, 1)
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
	// On Linux the kernel is not even asked for the writes beside the
	// file: of the log, only its creation is seen.
	if n := counts.seen.Load(); runtime.GOOS == "linux" && n > counts.handled.Load()+1 {
		t.Errorf("%d events seen, %d handled: the kernel queued other files' writes", n, counts.handled.Load())
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
	reloads, _ := countedWatch(t, m.path())
	for i, content := range []string{"two", "three"} {
		m.write(t, content)
		waitCount(t, reloads, int32(i+1))
	}
}

// TestWatchFollowsTheFile: each way the file is changed reloads it: a
// write in place, a rename into place, a remove and a new file; and the
// file renamed away is no longer watched.
func TestWatchFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acls.yaml")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloads, counts := countedWatch(t, path)
	want := int32(0)
	step := func(what string, more int32, change func() error) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		want += more
		waitCount(t, reloads, want)
		time.Sleep(2 * settleTime)
		if n := reloads.Load(); n != want {
			t.Fatalf("after %s: %d reloads, want %d", what, n, want)
		}
	}
	step("a write in place", 1, func() error { return os.WriteFile(path, []byte("two"), 0o600) })
	old := filepath.Join(dir, "acls.yaml.old")
	step("a rename into place", 1, func() error {
		if err := os.Link(path, old); err != nil {
			return err
		}
		replaceFile(t, path, "three")
		return nil
	})
	// The file gone is a reload too, which its reader refuses.
	step("a remove and a new file", 2, func() error {
		if err := os.Remove(path); err != nil {
			return err
		}
		time.Sleep(2 * settleTime)
		return os.WriteFile(path, []byte("four"), 0o600)
	})
	handled, seen := counts.handled.Load(), counts.seen.Load()
	if err := os.WriteFile(old, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * settleTime)
	if n := counts.handled.Load(); n != handled {
		t.Errorf("a write to the file renamed away was handled (%d events, then %d)", handled, n)
	}
	// On Linux its watch is gone: the kernel queues nothing for it.
	if n := counts.seen.Load(); runtime.GOOS == "linux" && n != seen {
		t.Errorf("a write to the file renamed away was seen (%d events, then %d)", seen, n)
	}
}
