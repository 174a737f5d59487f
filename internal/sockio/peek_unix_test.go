//go:build unix

package sockio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A peek copies the socket's next bytes and leaves them there for the
// next read; with nothing there it waits until the read deadline, and at
// the end of the stream it says io.EOF.
func TestPeekLeavesBytes(t *testing.T) {
	a, b := sockiotest.Pair(t)
	p := NewPeeker(b)
	if p == nil {
		t.Fatal("no peeker for a TCP socket")
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	var buf [3]byte
	n, err := p.Peek(buf[:])
	if err != nil || n == 0 || !bytes.HasPrefix([]byte("hello"), buf[:n]) {
		t.Fatalf("peek: %q, %v", buf[:n], err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "hello" {
		t.Fatalf("read after the peek: %q, %v", got, err)
	}

	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := p.Peek(buf[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peek with nothing there: %v, want the deadline's error", err)
	}

	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	a.Close()
	if n, err := p.Peek(buf[:]); n != 0 || err != io.EOF {
		t.Fatalf("peek after the peer closed: %d, %v, want io.EOF", n, err)
	}
	if NewPeeker(nil) != nil {
		t.Fatal("a peeker made without a socket")
	}
}

// eventually polls cond every 10ms for up to 5s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// PeekClosed tells an open socket, with or without bytes waiting, from one
// its peer has closed or reset, and takes no byte from it.
func TestPeekClosed(t *testing.T) {
	if PeekClosed(nil) {
		t.Fatal("no socket reported closed")
	}
	a, b := sockiotest.Pair(t)
	if PeekClosed(b) {
		t.Fatal("an idle open socket reported closed")
	}
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := NewPeeker(b).Peek(make([]byte, 1)); n != 1 {
		t.Fatalf("the byte did not arrive: %v", err)
	}
	if PeekClosed(b) {
		t.Fatal("an open socket with a byte waiting reported closed")
	}
	var one [1]byte
	if _, err := io.ReadFull(b, one[:]); err != nil || one[0] != 'x' {
		t.Fatalf("the byte was taken by the peek: %q, %v", one[:], err)
	}
	a.Close()
	if !eventually(func() bool { return PeekClosed(b) }) {
		t.Fatal("a socket its peer closed not reported closed")
	}

	c, d := sockiotest.Pair(t)
	c.SetLinger(0)
	c.Close()
	if !eventually(func() bool { return PeekClosed(d) }) {
		t.Fatal("a socket its peer reset not reported closed")
	}
}
