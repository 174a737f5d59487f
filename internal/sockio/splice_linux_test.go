package sockio

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A Splicer moves bytes between two sockets in pieces of any size, the
// source stream left right behind them; when the destination is gone it
// says so, with how much it took from the source, which goes on from
// there; a source that ends early says io.EOF.
func TestSplicer(t *testing.T) {
	s, err := NewSplicer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srcPeer, src := sockiotest.Pair(t)
	dst, dstPeer := sockiotest.Pair(t)
	want := frameOf(3<<20 + 7)
	go srcPeer.Write(want)
	src.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 0, len(want))
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, len(want)-100)
		_, err := io.ReadFull(dstPeer, buf)
		got = append(got, buf...)
		done <- err
	}()
	for _, n := range []int{1, 100 << 10, 2 << 20, len(want) - 100 - 1 - 100<<10 - 2<<20} {
		if taken, rerr, werr := s.Move(dst, src, n); taken != n || rerr != nil || werr != nil {
			t.Fatalf("move of %d: took %d, %v, %v", n, taken, rerr, werr)
		}
	}
	if err := <-done; err != nil || !bytes.Equal(got, want[:len(want)-100]) {
		t.Fatalf("the destination read other bytes: %v", err)
	}
	rest := make([]byte, 100)
	if _, err := io.ReadFull(src, rest[:50]); err != nil || !bytes.Equal(rest[:50], want[len(want)-100:len(want)-50]) {
		t.Fatalf("the source does not go on behind the moves: %v", err)
	}

	// The destination gone: a write error, the source's place known.
	dstPeer.Close()
	dst.Write([]byte("x")) // answered with a reset
	time.Sleep(100 * time.Millisecond)
	taken, rerr, werr := s.Move(dst, src, 50)
	if werr == nil || rerr != nil || taken > 50 {
		t.Fatalf("move to a closed socket: took %d, %v, %v", taken, rerr, werr)
	}
	s.Close()
	if _, _, werr := s.Move(dst, src, 1); !errors.Is(werr, ErrSpliceClosed) {
		t.Fatalf("move on a closed Splicer: %v", werr)
	}

	s2, err := NewSplicer()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	d2, d2Peer := sockiotest.Pair(t)
	go io.Copy(io.Discard, d2Peer)
	srcPeer.Close()
	if taken2, rerr, werr := s2.Move(d2, src, 1000); !errors.Is(rerr, io.EOF) || werr != nil || taken2 != 50-taken {
		t.Fatalf("move past the source's end: took %d, %v, %v", taken2, rerr, werr)
	}
}
