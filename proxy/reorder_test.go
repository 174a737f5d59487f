package proxy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestReorderingBackend pipelines hundreds of single-record produce
// requests to one partition of a backend that handles them concurrently
// and answers in completion order. Directly, the probe must see the
// violation (so this test can fail); through the proxy in None mode every
// response must come back in order and the log must hold the records in
// send order.
func TestReorderingBackend(t *testing.T) {
	const n = 300
	newBackend := func(t *testing.T, topic string) *hostile.Reorderer {
		return newReorderer(t, 0, 2*time.Millisecond, topic, 1)
	}
	readLog := func(t *testing.T, b *hostile.Reorderer, topic string) []string {
		vals, err := pipeprobe.ReadPartition(testContext(t, 30*time.Second), b.KfakeAddr(), topic, 0, pipeprobe.PinTo(b.KfakeAddr()))
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}

	t.Run("direct", func(t *testing.T) {
		// Random delays make a violation overwhelmingly likely, not
		// certain; a few bounded attempts keep the test deterministic
		// in practice without ever accepting a pass as a violation.
		for attempt := 0; attempt < 5; attempt++ {
			b := newBackend(t, "direct")
			res, err := pipeprobe.ProducePipelined(testContext(t, 30*time.Second), b.Addr(), "direct", 0, n, pipeprobe.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkErr := res.Check()
			logErr := pipeprobe.CheckLogOrder(readLog(t, b, "direct"), n)
			if errors.Is(checkErr, pipeprobe.ErrReordered) || errors.Is(logErr, pipeprobe.ErrLogOrder) {
				return
			}
		}
		t.Fatal("the reordering backend never broke order directly: the proxy test below proves nothing")
	})

	for _, acks := range []pipeprobe.Acks{pipeprobe.AcksAll, pipeprobe.AcksNone} {
		name := "through-proxy/acks=all"
		if acks == pipeprobe.AcksNone {
			name = "through-proxy/acks=0"
		}
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, "via")
			p := startProxy(t, config.OrderingNone, []string{b.Addr()}, nil)
			res, err := pipeprobe.ProducePipelined(testContext(t, 60*time.Second), p.Addr(), "via", 0, n, pipeprobe.Options{Acks: acks})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Check(); err != nil {
				t.Fatal(err)
			}
			// acks=0 gives no answer to wait for: poll until the
			// log holds every record or the deadline passes.
			var vals []string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if vals = readLog(t, b, "via"); len(vals) >= n {
					break
				}
			}
			if err := pipeprobe.CheckLogOrder(vals, n); err != nil {
				t.Fatal(err)
			}
			if b.Requests() < n {
				t.Fatalf("backend saw %d requests, want at least %d", b.Requests(), n)
			}
		})
	}
}

// TestBackpressure bounds a connection to 3 requests in flight: a client
// pipelining 200 still gets every response, in order.
func TestBackpressure(t *testing.T) {
	b := newReorderer(t, 0, time.Millisecond, "bp", 1)
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		p := startProxy(t, mode, []string{b.Addr()}, func(c *config.Config) { c.MaxInFlight = 3 })
		res, err := pipeprobe.ProducePipelined(testContext(t, 60*time.Second), p.Addr(), "bp", 0, 200, pipeprobe.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if mode == config.OrderingNone {
			if err := res.Check(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// In connection mode the proxy trusts the backend, which here
		// appends out of order, but the responses still come back in
		// request order.
		if err := res.Check(); err != nil && !errors.Is(err, pipeprobe.ErrOffsetOrder) {
			t.Fatal(err)
		}
	}
}
