package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inorder-proxy/inorder/internal/budget"
)

// memSink records what it is given. While gate is not nil, each Write
// waits for a value on it; fail makes the next writes fail.
type memSink struct {
	name SinkName
	gate chan struct{}

	mu     sync.Mutex
	got    []string
	fails  int // writes left to fail
	calls  int
	closed bool
}

func (s *memSink) Name() SinkName { return s.name }

func (s *memSink) Write(ctx context.Context, recs []Record) (int, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fails > 0 {
		s.fails--
		// Half the batch written, then a failure: the queue resumes
		// after that half.
		n := len(recs) / 2
		for _, r := range recs[:n] {
			s.got = append(s.got, string(r.Value))
		}
		return n, errors.New("disk on fire")
	}
	for _, r := range recs {
		s.got = append(s.got, string(r.Value))
	}
	return len(recs), nil
}

func (s *memSink) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *memSink) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func rec(i int) Record { return Record{Value: []byte(fmt.Sprintf("event-%04d\n", i)), Key: "User:a"} }

// recSize is what one rec(i) is charged.
var recSize = func() int64 { r := rec(0); return r.size() }()

func TestQueueBlockHoldsBackThenFlushesOnClose(t *testing.T) {
	sink := &memSink{name: SinkFile, gate: make(chan struct{})}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	q := NewQueue(QueueOptions{MaxBytes: 4 * recSize, Metrics: m, Batch: 2}, sink)
	ctx := context.Background()
	// The sink takes its first batch (2 events) and waits on its gate;
	// the queue still holds them, and 2 more fit.
	for i := range 4 {
		if err := q.Enqueue(ctx, rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	blocked := make(chan error, 1)
	go func() { blocked <- q.Enqueue(ctx, rec(4)) }()
	select {
	case err := <-blocked:
		t.Fatalf("Enqueue on a full queue returned %v; want it to wait", err)
	case <-time.After(100 * time.Millisecond):
	}
	// A waiting Enqueue gives up with its context.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := q.Enqueue(short, rec(99)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue with an ending context: %v", err)
	}
	sink.gate <- struct{}{} // the first batch is written: room for 2
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	close(sink.gate)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := sink.values()
	if len(got) != 5 {
		t.Fatalf("written %d events: %v", len(got), got)
	}
	for i, v := range got {
		if v != string(rec(i).Value) {
			t.Fatalf("event %d is %q", i, v)
		}
	}
	if !sink.closed {
		t.Error("sink not closed")
	}
	if n := testutil.ToFloat64(m.written[SinkFile]); n != 5 {
		t.Errorf("written_total %v", n)
	}
	if n := testutil.ToFloat64(m.waitSeconds); n <= 0 {
		t.Errorf("enqueue_wait_seconds_total %v", n)
	}
	if err := q.Enqueue(ctx, rec(5)); !errors.Is(err, ErrClosed) {
		t.Errorf("Enqueue after Close: %v", err)
	}
	if n := testutil.ToFloat64(m.dropped[DropClosed]); n != 1 {
		t.Errorf("dropped_total{reason=closed} %v", n)
	}
}

func TestQueueDropCounts(t *testing.T) {
	sink := &memSink{name: SinkStdout, gate: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	q := NewQueue(QueueOptions{MaxBytes: 3 * recSize, OnFull: Drop, Metrics: m, Batch: 1}, sink)
	ctx := context.Background()
	var dropped int
	for i := range 10 {
		if err := q.Enqueue(ctx, rec(i)); errors.Is(err, ErrDropped) {
			dropped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if dropped != 7 {
		t.Errorf("dropped %d of 10 with room for 3", dropped)
	}
	if n := testutil.ToFloat64(m.dropped[DropFull]); n != 7 {
		t.Errorf("dropped_total{reason=full} %v", n)
	}
	big := Record{Value: make([]byte, 4*recSize)}
	if err := q.Enqueue(ctx, big); !errors.Is(err, ErrDropped) {
		t.Errorf("an event larger than the queue: %v", err)
	}
	if n := testutil.ToFloat64(m.dropped[DropTooLarge]); n != 1 {
		t.Errorf("dropped_total{reason=too_large} %v", n)
	}
	close(sink.gate)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.values(); len(got) != 3 {
		t.Errorf("wrote %v", got)
	}
}

// TestQueueRetriesAndReports checks that a failing sink's events wait and
// are written once it recovers, resuming after what it wrote, that Err
// reports the failure meanwhile, and that another sink is not held back.
func TestQueueRetriesAndReports(t *testing.T) {
	bad := &memSink{name: SinkKafka, fails: 3}
	good := &memSink{name: SinkFile}
	m := NewMetrics(prometheus.NewRegistry())
	q := NewQueue(QueueOptions{Metrics: m, Batch: 8, RetryMin: 50 * time.Millisecond, RetryMax: 50 * time.Millisecond}, bad, good)
	ctx := context.Background()
	for i := range 8 {
		if err := q.Enqueue(ctx, rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := q.Err(); err == nil || !strings.Contains(err.Error(), "kafka") {
		t.Errorf("Err while the sink fails: %v", err)
	}
	for q.Err() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := q.Err(); err != nil {
		t.Errorf("Err once the sink writes: %v", err)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*memSink{bad, good} {
		got := s.values()
		if len(got) != 8 {
			t.Errorf("%s wrote %d: %v", s.name, len(got), got)
			continue
		}
		for i, v := range got {
			if v != string(rec(i).Value) {
				t.Errorf("%s: event %d is %q", s.name, i, v)
			}
		}
	}
	if n := testutil.ToFloat64(m.sinkErrors[SinkKafka]); n != 3 {
		t.Errorf("sink_errors_total{sink=kafka} %v", n)
	}
	if n, b := q.Len(); n != 0 || b != 0 {
		t.Errorf("left %d events, %d bytes", n, b)
	}
}

// TestQueueCloseDeadline checks that a sink that cannot write ends at
// Close's deadline, and that its events are reported and counted.
func TestQueueCloseDeadline(t *testing.T) {
	stuck := &memSink{name: SinkKafka, gate: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	// No Linger: the write begins, and stalls, at once.
	q := NewQueue(QueueOptions{Metrics: m, StallAfter: 20 * time.Millisecond, Linger: -1}, stuck)
	for i := range 3 {
		q.Enqueue(context.Background(), rec(i))
	}
	time.Sleep(50 * time.Millisecond)
	if err := q.Err(); !errors.Is(err, ErrStalled) {
		t.Errorf("Err of a stalled sink: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := q.Close(ctx)
	if !errors.Is(err, ErrUnflushed) || !strings.Contains(err.Error(), "3 of them") {
		t.Errorf("Close: %v", err)
	}
	if n := testutil.ToFloat64(m.dropped[DropUnflushed]); n != 3 {
		t.Errorf("dropped_total{reason=unflushed} %v", n)
	}
}

// TestQueueBudget checks that queued bytes are reserved from the budget
// and released once written.
func TestQueueBudget(t *testing.T) {
	b := budget.New(1 << 20)
	sink := &memSink{name: SinkFile, gate: make(chan struct{})}
	q := NewQueue(QueueOptions{Budget: b}, sink)
	for i := range 4 {
		q.Enqueue(context.Background(), rec(i))
	}
	if used := b.Used(); used != 4*recSize {
		t.Errorf("budget used %d with 4 events queued; want %d", used, 4*recSize)
	}
	close(sink.gate)
	q.Close(context.Background())
	if used := b.Used(); used != 0 {
		t.Errorf("budget used %d after Close", used)
	}
}

// TestQueueLingerBatchesWrites: events recorded one at a time, a little
// apart as a connection's requests are, reach a sink a batch per Linger
// rather than a write each (a system call each, for a file), and all of
// them, in order.
func TestQueueLingerBatchesWrites(t *testing.T) {
	const events, linger = 200, 20 * time.Millisecond
	sink := &memSink{name: SinkFile}
	q := NewQueue(QueueOptions{Linger: linger}, sink)
	start := time.Now()
	for i := range events {
		if err := q.Enqueue(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.values()
	if len(got) != events {
		t.Fatalf("%d of %d events written", len(got), events)
	}
	for i, v := range got {
		if v != string(rec(i).Value) {
			t.Fatalf("event %d is %q", i, v)
		}
	}
	// A write at most per Linger of recording, and the one at Close.
	if most := int(elapsed/linger) + 2; sink.calls > most {
		t.Fatalf("%d events over %v took %d writes, want at most %d (one per %v)", events, elapsed, sink.calls, most, linger)
	}
}

// TestQueueSteadyTrailWakesOnce: while events keep coming, closer than a
// Linger apart, the sink's goroutine goes from one Linger to the next on
// its timer and is woken by an Enqueue only at the start: a write per
// Linger costs one wake, not two. Each gap in the recording long enough
// for a Linger to pass without an event may cost one more.
func TestQueueSteadyTrailWakesOnce(t *testing.T) {
	const events, linger = 300, 10 * time.Millisecond
	sink := &memSink{name: SinkFile}
	q := NewQueue(QueueOptions{Linger: linger}, sink)
	start, gaps := time.Now(), 0
	last := start
	for i := range events {
		if err := q.Enqueue(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if now.Sub(last) >= linger/2 {
			gaps++
		}
		last = now
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	q.mu.Lock()
	woken := q.sinks[0].woken
	q.mu.Unlock()
	sink.mu.Lock()
	writes := sink.calls
	sink.mu.Unlock()
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.values()) != events {
		t.Fatalf("%d of %d events written", len(sink.values()), events)
	}
	if most := uint64(1 + gaps); woken > most {
		t.Fatalf("%d events over %v (%d writes, %d gaps of %v or more) woke the sink's goroutine %d times, want at most %d",
			events, elapsed, writes, gaps, linger/2, woken, most)
	}
}

// TestQueueNoLingerWhileFull: an Enqueue that finds the queue full makes
// the sink write what it has at once rather than wait out its Linger, and
// a Close does too.
func TestQueueNoLingerWhileFull(t *testing.T) {
	sink := &memSink{name: SinkFile}
	q := NewQueue(QueueOptions{MaxBytes: 2 * recSize, Linger: time.Hour}, sink)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 4 {
		if err := q.Enqueue(ctx, rec(i)); err != nil {
			t.Fatalf("enqueue %d, the queue holding two: %v", i, err)
		}
	}
	start := time.Now()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sink.values()) != 4 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d events written, the close took %v", len(sink.values()), time.Since(start))
	}
}
