package cmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchReloadOnlyOnChange: files written beside the watched one (logs,
// an audit trail) do not make it reloaded again; a change to it does.
func TestWatchReloadOnlyOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acls.yaml")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("acls.yaml", "one")
	var reloads atomic.Int32
	stop := watchReload(context.Background(), path, "test file", func() error { reloads.Add(1); return nil }, slog.New(slog.DiscardHandler))
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
	// The first event reloads: the watch does not know what was loaded.
	write("beside.log", "a")
	waitReloads(1)
	for i := range 3 {
		write("beside.log", string(rune('b'+i)))
		time.Sleep(2 * settleTime)
	}
	write("acls.yaml", "two")
	waitReloads(2)
	time.Sleep(2 * settleTime)
	if n := reloads.Load(); n != 2 {
		t.Fatalf("%d reloads after one change to the file, want 2", n)
	}
}
