//go:build unix

package sockio

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// lender lends one buffer and records whether it is held.
type lender struct {
	buf  [64]byte
	held bool
}

func (l *lender) Lend() []byte { l.held = true; return l.buf[:] }
func (l *lender) Reclaim()     { l.held = false }

// A Fill reads what has arrived into the lent buffer, and gives the
// buffer back when it waits, at the deadline, and at the end of the
// stream.
func TestReaderLendsOnlyWhileReading(t *testing.T) {
	if NewReader(nil) != nil {
		t.Fatal("a reader made without a socket")
	}
	a, b := sockiotest.Pair(t)
	r := NewReader(b)
	var l lender
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	// Wait until all three bytes have arrived, so that one read takes
	// them.
	if !eventually(func() bool { n, _ := NewPeeker(b).Peek(make([]byte, 3)); return n == 3 }) {
		t.Fatal("the bytes did not arrive")
	}
	n, err := r.Fill(&l)
	if err != nil || string(l.buf[:n]) != "abc" {
		t.Fatalf("fill: %q, %v", l.buf[:n], err)
	}
	if !l.held {
		t.Fatal("the buffer that holds the bytes read was given back")
	}
	l.held = false

	// Nothing to read: the buffer goes back before the wait, which
	// ends at the deadline.
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Fill(&l); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("fill with nothing to read: %v, want the deadline's error", err)
	}
	if l.held {
		t.Fatal("buffer held through the wait")
	}

	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	a.Close()
	if n, err := r.Fill(&l); n != 0 || err != io.EOF || l.held {
		t.Fatalf("fill at the end of the stream: %d, %v, buffer held %v", n, err, l.held)
	}
}
