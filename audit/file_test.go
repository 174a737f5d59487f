package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func lines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// TestFileRotation writes past the size bound many times and checks the
// files: each within the bound, at most Keep rotated ones, the newest
// events in the file itself and the older ones in .1, .2, in order.
func TestFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	line := len(rec(0).Value)
	s, err := NewFileSink(FileOptions{Path: path, MaxSize: int64(3 * line), Keep: 2, Sync: -1})
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for i := range 10 {
		recs = append(recs, rec(i))
	}
	// In two writes, so that rotation happens inside a batch and between.
	if n, err := s.Write(context.Background(), recs[:4]); err != nil || n != 4 {
		t.Fatal(n, err)
	}
	if n, err := s.Write(context.Background(), recs[4:]); err != nil || n != 6 {
		t.Fatal(n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// 10 events, 3 a file: 0-2 and 3-5 deleted beyond Keep... the files
	// hold 9 (current), 6-8 (.1), 3-5 (.2); .3 does not exist.
	want := map[string][]string{path: {"event-0009"}, path + ".1": {"event-0006", "event-0007", "event-0008"}, path + ".2": {"event-0003", "event-0004", "event-0005"}}
	for p, w := range want {
		if got := lines(t, p); strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("%s holds %v, want %v", filepath.Base(p), got, w)
		}
		fi, _ := os.Stat(p)
		if fi.Size() > int64(3*line) {
			t.Errorf("%s is %d bytes, above the bound", p, fi.Size())
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", p, fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf(".3 exists: %v", err)
	}
	// Reopened, the sink appends and counts the size already there.
	s, _ = NewFileSink(FileOptions{Path: path, MaxSize: int64(3 * line), Keep: 2, Sync: -1})
	s.Write(context.Background(), []Record{rec(10), rec(11), rec(12)})
	s.Close()
	if got := lines(t, path); len(got) != 1 || got[0] != "event-0012" {
		t.Errorf("after reopening: %v", got)
	}
	if got := lines(t, path+".1"); len(got) != 3 || got[0] != "event-0009" {
		t.Errorf(".1 after reopening: %v", got)
	}
}

// TestFileRotationOversizedEvent checks that an event larger than the
// bound gets a file of its own rather than being refused.
func TestFileRotationOversizedEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	s, _ := NewFileSink(FileOptions{Path: path, MaxSize: 4, Keep: 3, Sync: -1})
	s.Write(context.Background(), []Record{rec(0), rec(1)})
	s.Close()
	if a, b := lines(t, path), lines(t, path+".1"); len(a) != 1 || len(b) != 1 || a[0] != "event-0001" || b[0] != "event-0000" {
		t.Errorf("file %v, .1 %v", a, b)
	}
}

// TestFileSyncInterval checks on a fake clock that a write syncs once the
// interval has passed since the last sync and not before, that a Close
// syncs, and that the interval's own ticker syncs a quiet file.
func TestFileSyncInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// An hour-long ticker never fires in the test: only the fake clock
	// decides.
	s, err := NewFileSink(FileOptions{Path: path, Sync: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	dirty := func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.dirty }
	s.Write(context.Background(), []Record{rec(0)})
	if !dirty() {
		t.Fatal("synced before the interval passed")
	}
	// Written to the kernel already: another reader sees it.
	if got := lines(t, path); len(got) != 1 {
		t.Errorf("not flushed: %v", got)
	}
	advance(59 * time.Minute)
	s.Write(context.Background(), []Record{rec(1)})
	if !dirty() {
		t.Fatal("synced before the interval passed")
	}
	advance(time.Minute)
	s.Write(context.Background(), []Record{rec(2)})
	if dirty() {
		t.Fatal("not synced once the interval passed")
	}
	s.Write(context.Background(), []Record{rec(3)})
	if err := s.Close(); err != nil || dirty() {
		t.Fatalf("Close: %v, dirty %v", err, dirty())
	}

	// The ticker syncs a file nobody writes to.
	path2 := filepath.Join(t.TempDir(), "audit.log")
	s2, _ := NewFileSink(FileOptions{Path: path2, Sync: 10 * time.Millisecond})
	s2.Write(context.Background(), []Record{rec(0)})
	deadline := time.Now().Add(5 * time.Second)
	for {
		s2.mu.Lock()
		d := s2.dirty
		s2.mu.Unlock()
		if !d {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ticker did not sync")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s2.Close()
}

// TestFileThroughQueue is the file sink behind a queue and a trail: every
// event lands, one valid JSON object a line.
func TestFileThroughQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	fs, err := NewFileSink(FileOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Options{DataPath: DataPathRequest}, NewQueue(QueueOptions{}, fs))
	c := tr.Open(ConnInfo{ID: 1, Listener: "bootstrap", ClientAddress: "127.0.0.1:5000"})
	for range 100 {
		if err := tr.Request(context.Background(), c, &Request{APIKey: 0, APIVersion: 9, Resources: []Resource{{Type: "Topic", Name: "t", Operation: "Write"}}}); err != nil {
			t.Fatal(err)
		}
	}
	tr.Close(context.Background(), c)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		n++
	}
	if n != 100 {
		t.Errorf("%d lines", n)
	}
}

// BenchmarkEncodeFileWrite is the cost per event of a per-request trail
// to a file: the trail's encoding (into a record of its own), the queue,
// and the file sink's write, measured end to end by closing the trail.
func BenchmarkEncodeFileWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	fs, err := NewFileSink(FileOptions{Path: path, MaxSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	tr := New(Options{DataPath: DataPathRequest}, NewQueue(QueueOptions{}, fs))
	c := tr.Open(ConnInfo{ID: 7, Listener: "node", ClientAddress: "10.0.0.7:51234", Principal: "User:alice"})
	e := produceEvent()
	r := &Request{APIKey: e.APIKey, APIVersion: e.APIVersion, ClientID: e.ClientID, Resources: e.Resources[:1]}
	r.Resources[0].Partitions = r.Resources[0].Partitions[:1]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Request(ctx, c, r); err != nil {
			b.Fatal(err)
		}
	}
	if err := tr.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}
