package single

import (
	"bytes"
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
	"github.com/inorder-proxy/inorder/wire"
)

// parkedFrame makes a frame of n bytes, its bytes i%251, whose spans are
// parked: their bytes spliced into pipe from a socket, their place in the
// frame zeroed.
func parkedFrame(t *testing.T, n int, pipe *sockio.Pipe, spans ...[2]int) *wire.Buf {
	t.Helper()
	b := &wire.Buf{B: make([]byte, n)}
	for i := range b.B {
		b.B[i] = byte(i % 251)
	}
	h := &parked{pipes: []*sockio.Pipe{pipe}}
	peer, sock := sockiotest.Pair(t)
	for _, sp := range spans {
		peer.Write(b.B[sp[0]:sp[1]]) // small: the socket takes it at once
		if got, err := pipe.From(sock, sp[1]-sp[0]); err != nil || got != sp[1]-sp[0] {
			t.Fatalf("parking %v: %d, %v", sp, got, err)
		}
		clear(b.B[sp[0]:sp[1]])
		h.spans = append(h.spans, parkedSpan{off: sp[0], n: sp[1] - sp[0], pipe: pipe})
	}
	b.Out = h
	return b
}

func newPipe(t *testing.T) *sockio.Pipe {
	p, err := sockio.GetPipe()
	if err != nil {
		t.Skip("no pipes here:", err)
	}
	return p
}

// fill reads parked bytes back where they were, and gives the pipes back
// empty.
func TestFillParked(t *testing.T) {
	pipe := newPipe(t)
	b := parkedFrame(t, 1000, pipe, [2]int{100, 300}, [2]int{500, 900})
	if err := fill(b); err != nil {
		t.Fatal(err)
	}
	for i, c := range b.B {
		if c != byte(i%251) {
			t.Fatalf("byte %d not filled", i)
		}
	}
	if b.Out != nil || pipe.Held() != 0 {
		t.Fatalf("filled frame still parked (%v), pipe holds %d", b.Out, pipe.Held())
	}
}

// pipedPieces takes each parked span from its pipe where the pieces hold
// it, in order, and refuses pieces that skip a span, take spans out of
// order, or cut one.
func TestPipedPieces(t *testing.T) {
	pipe := newPipe(t)
	f := parkedFrame(t, 1000, pipe, [2]int{100, 300}, [2]int{500, 900})
	defer wire.Put(f)
	head, mid := []byte("head"), []byte("mid")
	pieces := [][]byte{head, f.B[90:300], mid, f.B[500:900], f.B[950:1000]}
	out, from, ok := pipedPieces([]*wire.Buf{nil, f}, pieces)
	if !ok {
		t.Fatal("pieces in order refused")
	}
	want := [][]byte{head, f.B[90:100], f.B[100:300], mid, f.B[500:900], f.B[950:1000]}
	wantFrom := []*sockio.Pipe{nil, nil, pipe, nil, pipe, nil}
	if len(out) != len(want) {
		t.Fatalf("%d pieces, want %d", len(out), len(want))
	}
	for i := range want {
		if !bytes.Equal(out[i], want[i]) || &out[i][0] != &want[i][0] || from[i] != wantFrom[i] {
			t.Fatalf("piece %d: %d bytes from %p, want %d from %p", i, len(out[i]), from[i], len(want[i]), wantFrom[i])
		}
	}
	for _, bad := range [][][]byte{
		{head, f.B[500:900]},                       // the first span skipped
		{f.B[500:900], f.B[100:300]},               // out of order
		{f.B[100:200], f.B[200:300], f.B[500:900]}, // a span cut
		{f.B[100:300]},                             // the last span left out
	} {
		if _, from, ok := pipedPieces([]*wire.Buf{f}, bad); ok || from != nil {
			t.Fatalf("pieces %d long taken", len(bad))
		}
	}
	// No parked frame: the pieces as they are.
	plain := &wire.Buf{B: make([]byte, 10)}
	if out, from, ok := pipedPieces([]*wire.Buf{plain}, [][]byte{plain.B}); !ok || from != nil || len(out) != 1 {
		t.Fatal("pieces of whole frames changed")
	}
}
