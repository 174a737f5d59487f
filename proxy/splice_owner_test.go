package proxy

import (
	"io"
	"net"
	"testing"

	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// A flusher that is not the client reader must never move a body still in
// the client socket: it writes what precedes such a request and leaves the
// request, with everything behind it, for the client reader.
func TestFlusherLeavesStreamedRequestToReader(t *testing.T) {
	up, peer := net.Pipe()
	defer up.Close()
	defer peer.Close()
	got := make(chan int, 1)
	go func() {
		n, _ := io.Copy(io.Discard, peer)
		got <- int(n)
	}()

	c := &conn{p: &Proxy{}, mode: ordering.Connection, up: up}
	c.cond.L = &c.mu
	c.seq = ordering.New[*request](ordering.Connection, 8, 1<<20)
	frame := func(n int) *wire.Buf {
		b := wire.Get(n)
		for i := range b.B {
			b.B[i] = 0
		}
		b.B[3] = byte(n - 4)
		return b
	}
	plain := &request{frame: frame(16), upCorr: 1}
	streamed := &request{frame: frame(32), upCorr: 2, stream: 1 << 20}
	after := &request{frame: frame(16), upCorr: 3}
	c.outq = []*request{plain, streamed, after}
	c.flushing = true

	c.flush(false, false)

	if c.flushing {
		t.Fatal("flusher did not clear the flushing flag")
	}
	if len(c.outq) != 2 || c.outq[0] != streamed || c.outq[1] != after {
		t.Fatalf("flusher left %d requests, want the streamed one and the one behind it", len(c.outq))
	}
	if plain.frame != nil {
		t.Fatal("the request in front of the streamed one was not written")
	}
	if streamed.frame == nil {
		t.Fatal("the flusher took the streamed request's head")
	}
	up.Close()
	if n := <-got; n != 16 {
		t.Fatalf("upstream received %d bytes, want only the 16 of the first request", n)
	}
}
