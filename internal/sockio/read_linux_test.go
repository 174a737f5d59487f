package sockio

import (
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// Queued says how many bytes the socket holds, and a Fill takes them.
func TestReaderQueued(t *testing.T) {
	a, b := sockiotest.Pair(t)
	r := NewReader(b)
	if q := r.Queued(); q != 0 {
		t.Fatalf("%d bytes queued before any was sent", q)
	}
	if _, err := a.Write(make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return r.Queued() == 50 }) {
		t.Fatalf("%d bytes queued, want 50", r.Queued())
	}
	var l lender
	if n, err := r.Fill(&l); n != 50 || err != nil {
		t.Fatalf("fill: %d, %v", n, err)
	}
	if q := r.Queued(); q != 0 {
		t.Fatalf("%d bytes queued after all were read", q)
	}
}
