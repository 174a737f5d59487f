//go:build unix

package sockio

import (
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// The calls a caller makes per request allocate nothing: each binds its
// callback for the raw socket once.
func TestCallsAllocateNothing(t *testing.T) {
	a, b := sockiotest.Pair(t)
	p, r := NewPeeker(b), NewReader(b)
	var l lender
	msg := []byte("0123456789")
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf [10]byte
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			if _, err := p.Peek(buf[:]); err != nil {
				t.Fatal(err)
			}
			r.Queued()
			n, err := r.Fill(&l)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		PeekClosed(b)
	})
	if allocs != 0 {
		t.Fatalf("a peek and a read allocate %v times", allocs)
	}
}
