package sockio

import (
	"io"
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// PeerGone tells an open socket from one whose peer closed its side and
// from one whose peer reset it.
func TestPeerGone(t *testing.T) {
	if reset, closed := PeerGone(nil); reset || closed {
		t.Fatal("no socket reported gone")
	}
	a, b := sockiotest.Pair(t)
	if reset, closed := PeerGone(b); reset || closed {
		t.Fatalf("open socket: reset %v, closed %v", reset, closed)
	}
	a.Close()
	if !eventually(func() bool { _, closed := PeerGone(b); return closed }) {
		t.Fatal("a socket its peer closed not reported closed")
	}
	if reset, _ := PeerGone(b); reset {
		t.Fatal("a socket its peer closed reported reset")
	}

	c, d := sockiotest.Pair(t)
	c.SetLinger(0)
	c.Close()
	if !eventually(func() bool { reset, _ := PeerGone(d); return reset }) {
		t.Fatal("a socket its peer reset not reported reset")
	}
}

// SendQueue counts what the peer acknowledged and sees the bytes it has
// not.
func TestSendQueue(t *testing.T) {
	if _, _, known := SendQueue(nil); known {
		t.Fatal("no socket's send queue known")
	}
	a, b := sockiotest.Pair(t)
	acked0, waiting, known := SendQueue(a)
	if !known || waiting {
		t.Fatalf("idle socket: known %v, waiting %v", known, waiting)
	}
	const size = 100 << 10
	if _, err := a.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(b, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { acked, waiting, _ := SendQueue(a); return !waiting && acked >= acked0+size }) {
		acked, waiting, _ := SendQueue(a)
		t.Fatalf("after the peer read %d bytes: %d acknowledged (from %d), bytes waiting %v", size, acked, acked0, waiting)
	}

	// A peer that reads nothing leaves bytes unacknowledged once its
	// receive buffer is full.
	b.SetReadBuffer(4 << 10)
	a.SetWriteBuffer(64 << 10)
	go a.Write(make([]byte, 8<<20))
	if !eventually(func() bool { _, waiting, _ := SendQueue(a); return waiting }) {
		t.Fatal("bytes the peer does not read not reported waiting")
	}
}
