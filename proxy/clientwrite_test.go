package proxy

import (
	"testing"
	"time"
)

// BenchmarkWriteMarks is what the write timeout adds to each client write:
// the marks the watch reads.
func BenchmarkWriteMarks(b *testing.B) {
	for _, write := range []time.Duration{0, 30 * time.Second} {
		b.Run(write.String(), func(b *testing.B) {
			c := &conn{lim: connLimits{write: write}}
			for b.Loop() {
				c.beginWrite()
				c.endWrite()
			}
		})
	}
}

// TestWriteStalled runs the watch's decision over a scripted socket: a
// write is stalled once the client has acknowledged nothing for the
// timeout while bytes wait for it, and not while bytes move or none wait.
func TestWriteStalled(t *testing.T) {
	const d = 100 * time.Millisecond
	c := &conn{lim: connLimits{write: d}}
	start := monoNow()
	c.ww.since.Store(start)
	at := func(t time.Duration) int64 { return start + int64(t) }
	type probe struct {
		acked   uint64
		waiting bool
	}
	var next probe
	stalled := func(when time.Duration, p probe) bool {
		next = p
		return c.writeStalledWith(at(when), func() (uint64, bool, bool) { return next.acked, next.waiting, true })
	}
	if stalled(10*time.Millisecond, probe{0, true}) {
		t.Fatal("stalled a tenth into the timeout")
	}
	if stalled(60*time.Millisecond, probe{100, true}) {
		t.Fatal("stalled with bytes acknowledged")
	}
	if stalled(150*time.Millisecond, probe{100, true}) {
		t.Fatal("stalled 90ms after the last progress")
	}
	if !stalled(170*time.Millisecond, probe{100, true}) {
		t.Fatal("not stalled 110ms after the last progress, bytes waiting")
	}
	c.ww.since.Store(at(200 * time.Millisecond))
	if stalled(260*time.Millisecond, probe{100, true}) {
		t.Fatal("a new write stalled 60ms after it began")
	}
	if stalled(400*time.Millisecond, probe{100, false}) {
		t.Fatal("stalled with nothing waiting for the client")
	}
	if stalled(480*time.Millisecond, probe{100, true}) {
		t.Fatal("stalled 80ms after nothing waited")
	}
	if !stalled(510*time.Millisecond, probe{100, true}) {
		t.Fatal("not stalled 110ms after nothing waited, bytes waiting since")
	}
	c.ww.since.Store(0)
	if stalled(900*time.Millisecond, probe{100, true}) {
		t.Fatal("stalled with no write under way")
	}
}
