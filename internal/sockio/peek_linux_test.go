package sockio

import (
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A peer that sent bytes and then closed is seen gone by its socket's
// state, behind the bytes a peek finds first.
func TestPeekClosedBehindBytes(t *testing.T) {
	a, b := sockiotest.Pair(t)
	if _, err := a.Write([]byte("close_notify")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if !eventually(func() bool { return PeekClosed(b) }) {
		t.Fatal("a socket closed behind bytes not reported closed")
	}
	if n, err := NewPeeker(b).Peek(make([]byte, 64)); n != len("close_notify") || err != nil {
		t.Fatalf("the bytes behind the close: %d, %v", n, err)
	}
}
