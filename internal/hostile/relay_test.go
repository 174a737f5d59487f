package hostile

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with itself until Close.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echoRelay starts a relay in front of a fresh echo server, closed at the
// end of the test.
func echoRelay(t *testing.T) *Relay {
	t.Helper()
	r, err := NewRelay("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func dialLines(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func echoOnce(t *testing.T, c net.Conn, r *bufio.Reader, line string) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func TestRelayCutResetsAndKeepsServing(t *testing.T) {
	r := echoRelay(t)
	c, br := dialLines(t, r.Addr())
	if got, err := echoOnce(t, c, br, "one"); err != nil || got != "one" {
		t.Fatalf("echo through the relay: %q, %v", got, err)
	}
	if n := r.Cut(); n != 1 {
		t.Fatalf("Cut cut %d connections, want 1", n)
	}
	_, err := echoOnce(t, c, br, "two")
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("after Cut the connection answered (err %v), want a reset", err)
	}
	c2, br2 := dialLines(t, r.Addr())
	if got, err := echoOnce(t, c2, br2, "three"); err != nil || got != "three" {
		t.Fatalf("a new connection after Cut: %q, %v", got, err)
	}
	if st := r.Stats(); st.Accepted != 2 || st.Cut != 1 {
		t.Fatalf("stats %+v, want 2 accepted and 1 cut", st)
	}
}

func TestRelayHoldStallsUntilReleased(t *testing.T) {
	r := echoRelay(t)
	c, br := dialLines(t, r.Addr())
	release := r.Hold()
	c.Write([]byte("held\n"))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := br.ReadString('\n'); err == nil {
		t.Fatal("a held relay forwarded a line")
	}
	release()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := br.ReadString('\n')
	if err != nil || got != "held\n" {
		t.Fatalf("after release: %q, %v", got, err)
	}
}

func TestRelayCloseEndsEveryConnection(t *testing.T) {
	r := echoRelay(t)
	c, br := dialLines(t, r.Addr())
	if got, err := echoOnce(t, c, br, "x"); err != nil || got != "x" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	r.Hold()
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close of a held relay did not return")
	}
	if st := r.Stats(); st.Open != 0 {
		t.Fatalf("%d connections open after Close", st.Open)
	}
}

// TestRelayBlackhole: a relay made a black hole resets the connections it
// carried, and a dial to it neither connects nor is refused but times
// out; restored, it relays again at the same address.
func TestRelayBlackhole(t *testing.T) {
	r := echoRelay(t)
	c, rd := dialLines(t, r.Addr())
	if got, err := echoOnce(t, c, rd, "before"); err != nil || got != "before" {
		t.Fatalf("before: %q, %v", got, err)
	}
	restore, err := r.Blackhole()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echoOnce(t, c, rd, "during"); err == nil {
		t.Fatal("a connection the relay carried still echoes in a black hole")
	}
	for range 3 {
		start := time.Now()
		d, err := net.DialTimeout("tcp", r.Addr(), 300*time.Millisecond)
		if err == nil {
			d.Close()
			t.Fatal("a dial to a black hole connected")
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < 250*time.Millisecond {
			t.Fatalf("a dial to a black hole ended after %v with %v, want a timeout", time.Since(start), err)
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	c2, rd2 := dialLines(t, r.Addr())
	if got, err := echoOnce(t, c2, rd2, "after"); err != nil || got != "after" {
		t.Fatalf("after: %q, %v", got, err)
	}
}
