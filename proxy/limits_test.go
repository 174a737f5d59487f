package proxy_test

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
)

var metadataV1 = frame(3, 1, 7, "c", false, []byte{0, 0, 0, 0})

// ask sends a metadata request on c and waits for its answer.
func ask(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(metadataV1); err != nil {
		t.Fatalf("write: %v", err)
	}
	readResponse(t, c, 7)
	return time.Since(start)
}

// closedWithin waits for the proxy to close c and returns how long it took.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %s", d)
	}
	return time.Since(start)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConnectionCap(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) { c.MaxConnections = 3 })
	var open []net.Conn
	for range 3 {
		c := dial(t, p.Addr())
		ask(t, c)
		open = append(open, c)
	}
	for range 2 {
		closedWithin(t, dial(t, p.Addr()), 5*time.Second)
	}
	if got := p.Stats().Refused; got != 2 {
		t.Fatalf("refused %d connections, want 2", got)
	}
	p.log.waitFor(t, "max-connections reached")
	if n := strings.Count(p.log.String(), "max-connections reached"); n != 1 {
		t.Fatalf("%d log lines for two refusals in a burst, want 1 (rate-limited)", n)
	}
	for _, c := range open {
		ask(t, c)
	}
	// A slot freed is a slot taken.
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Conns > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ask(t, dial(t, p.Addr()))
}

func TestIdleTimeout(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	const idle = 300 * time.Millisecond
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) { c.IdleTimeout = idle })
	quiet, busy := dial(t, p.Addr()), dial(t, p.Addr())
	ask(t, quiet)
	done := make(chan time.Duration, 1)
	go func() { done <- closedWithin(t, quiet, 10*time.Second) }()
	// The busy client keeps sending more often than the timeout.
	for range 8 {
		ask(t, busy)
		time.Sleep(idle / 3)
	}
	if took := <-done; took < idle/2 {
		t.Fatalf("idle connection closed after %s, before its timeout %s", took, idle)
	}
	ask(t, busy)
	p.log.waitFor(t, "idle timeout")
}

// TestIdleTimeoutSparesInFlight: a request whose answer takes longer than
// the idle timeout keeps its connection open.
func TestIdleTimeoutSparesInFlight(t *testing.T) {
	const idle = 200 * time.Millisecond
	r := newReorderer(t, 3*idle, 4*idle, "t", 1)
	p := startProxy(t, config.OrderingNone, []string{r.Addr()}, func(c *config.Config) { c.IdleTimeout = idle })
	c := dial(t, p.Addr())
	if took := ask(t, c); took < 2*idle {
		t.Fatalf("the slow upstream answered in %s; the test needs longer than %s", took, 2*idle)
	}
}

func TestReadTimeoutSlowDrip(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	const read = 300 * time.Millisecond
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) { c.ReadTimeout = read })
	for _, name := range []string{"stalled", "drip"} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, p.Addr())
			big := frame(3, 1, 7, "c", false, make([]byte, 2000))
			if _, err := c.Write(big[:6]); err != nil {
				t.Fatal(err)
			}
			done := make(chan time.Duration, 1)
			go func() { done <- closedWithin(t, c, 10*time.Second) }()
			if name == "drip" {
				for i := 6; i < len(big); i++ {
					if _, err := c.Write(big[i : i+1]); err != nil {
						break // closed by the proxy
					}
					time.Sleep(read / 10)
				}
			}
			if took := <-done; took < read/2 {
				t.Fatalf("closed after %s, before the read timeout", took)
			}
		})
	}
	p.log.waitFor(t, "read timeout")
	if n := strings.Count(p.log.String(), "read timeout"); n < 2 {
		t.Fatalf("%d read timeouts logged, want 2:\n%s", n, p.log)
	}
	ask(t, dial(t, p.Addr()))
}

// TestUpstreamIdleCloseNoticed: an upstream that closes a connection with
// nothing in flight (a broker's own idle timeout) makes the proxy close the
// client's connection within seconds, so the client reconnects.
func TestUpstreamIdleCloseNoticed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, err := ln.Accept()
		if err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
		up.Close()
	}()
	p := startProxy(t, config.OrderingNone, []string{ln.Addr().String()}, nil)
	c := dial(t, p.Addr())
	if took := closedWithin(t, c, 10*time.Second); took > 5*time.Second {
		t.Fatalf("noticed the upstream close after %s", took)
	}
	p.log.waitFor(t, "closed the connection while it was idle")
}

// TestMemoryBoundKeepsReserve: connections that send part of a large frame
// and stall hold what the bulk share of the budget allows, and the rest are
// no longer read; the budget is never exceeded, and a well-behaved client
// on another connection keeps being answered from the reserve.
func TestMemoryBoundKeepsReserve(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	const limit = 8 << 20
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.MaxMemory = limit
		c.MaxRequestSize = 1 << 20
		c.MaxResponseSize = 1 << 20
	})
	good := dial(t, p.Addr())
	ask(t, good)
	// Each stalled client declares 1 MiB and sends 20 KiB: the proxy holds
	// one 32 KiB buffer for it, and 300 of them want more than the bound.
	for range 300 {
		c := dial(t, p.Addr())
		if _, err := c.Write(append(lengthPrefix(1<<20-8), make([]byte, 20<<10)...)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if used := p.Stats().MemoryUsed; used > limit {
			t.Fatalf("%d bytes reserved, above the bound of %d", used, limit)
		}
		if took := ask(t, good); took > 2*time.Second {
			t.Fatalf("a small request took %s while large frames held the budget", took)
		}
	}
	st := p.Stats()
	if st.MemoryWaits == 0 {
		t.Fatalf("no read waited for memory: the stalled frames never reached the bound (used %d)", st.MemoryUsed)
	}
	if st.MemoryUsed < limit/2 {
		t.Fatalf("stalled frames hold %d bytes; the test meant them to fill the bulk share", st.MemoryUsed)
	}
}

// TestFramesWaitingForMemoryAreShed: two clients each send enough of a
// large frame to hold a buffer and need a larger one, which neither can
// get while a third, begun after them, holds its whole frame; none of
// them is being read any more. The read timeout still sheds them, so
// their memory returns.
func TestFramesWaitingForMemoryAreShed(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.MaxMemory = 2 << 20
		c.MaxRequestSize = 1 << 20
		c.MaxResponseSize = 1 << 20
		c.ReadTimeout = time.Second
	})
	// The frames are Metadata requests, which the proxy reads whole.
	// The two waiters first hold 32 KiB buffers for the 20 KiB they
	// sent; the holder, begun later so that it times out last, then
	// takes a buffer of its whole 1 MiB frame, all but its last bytes
	// sent; with 300 KiB more each waiter needs a larger buffer (its whole
	// frame where the socket says what it has received, else 256 KiB and
	// then the whole frame), and neither fits beside the holder's in the
	// bulk share (1.5 MiB), until the waiters' read timeout.
	send := func(c net.Conn, b []byte) {
		t.Helper()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	waitUsed := func(n int64) {
		t.Helper()
		for p.Stats().MemoryUsed < n {
			time.Sleep(10 * time.Millisecond)
		}
	}
	start := make([]byte, 20<<10)
	start[1] = 3 // api key 3, Metadata v0
	var waiters []net.Conn
	for range 2 {
		c := dial(t, p.Addr())
		send(c, append(lengthPrefix(1<<20-8), start...))
		waiters = append(waiters, c)
	}
	waitUsed(2 * 32 << 10)
	time.Sleep(300 * time.Millisecond)
	holder := dial(t, p.Addr())
	whole := make([]byte, 1<<20-8-100)
	whole[1] = 3
	send(holder, append(lengthPrefix(1<<20-8), whole...))
	waitUsed(1<<20 + 2*32<<10)
	for _, c := range waiters {
		send(c, make([]byte, 300<<10))
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().MemoryUsed > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held by frames that can neither grow nor time out", p.Stats().MemoryUsed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.log.waitFor(t, "could not get memory")
}
