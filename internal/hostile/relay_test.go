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
	r, err := NewRelay("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if got, err := echoOnce(t, c, br, "one"); err != nil || got != "one" {
		t.Fatalf("echo through the relay: %q, %v", got, err)
	}
	if n := r.Cut(); n != 1 {
		t.Fatalf("Cut cut %d connections, want 1", n)
	}
	_, err = echoOnce(t, c, br, "two")
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("after Cut the connection answered (err %v), want a reset", err)
	}
	c2, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := echoOnce(t, c2, bufio.NewReader(c2), "three"); err != nil || got != "three" {
		t.Fatalf("a new connection after Cut: %q, %v", got, err)
	}
	if st := r.Stats(); st.Accepted != 2 || st.Cut != 1 {
		t.Fatalf("stats %+v, want 2 accepted and 1 cut", st)
	}
}

func TestRelayHoldStallsUntilReleased(t *testing.T) {
	r, err := NewRelay("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
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
	r, err := NewRelay("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := echoOnce(t, c, bufio.NewReader(c), "x"); err != nil || got != "x" {
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
