package sockio

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// frameOf is n bytes that say where each lies.
func frameOf(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

// PeekAll waits for a frame sent in pieces, larger than the socket's
// first receive buffer, copies all of it and leaves it for the read;
// a peer that closes before the whole frame says io.ErrUnexpectedEOF; a
// frame past what the kernel lets the buffer grow to is refused at
// once.
func TestPeekAll(t *testing.T) {
	a, b := sockiotest.Pair(t)
	p := NewPeeker(b)
	want := frameOf(3 << 20)
	go func() {
		for off := 0; off < len(want); off += 256 << 10 {
			a.Write(want[off:min(off+256<<10, len(want))])
			time.Sleep(2 * time.Millisecond)
		}
		a.Write([]byte("next"))
	}()
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if err := p.PeekAll(got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("peek of 3 MiB: %v, equal %t", err, bytes.Equal(got, want))
	}
	read := make([]byte, len(want)+4)
	if _, err := io.ReadFull(b, read); err != nil || !bytes.Equal(read[:len(want)], want) || string(read[len(want):]) != "next" {
		t.Fatalf("read after the peek: %v", err)
	}

	a.Write(want[:1000])
	a.Close()
	if err := p.PeekAll(make([]byte, 2000)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("peek of a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	// Past half tcp_rmem's largest (6 MiB by default, 32 MiB here).
	if err := p.PeekAll(make([]byte, 64<<20)); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("peek of 64 MiB: %v, want ErrNoRoom", err)
	}
}

// A PeekOffset copies and passes a frame's pieces in order as they
// arrive, takes nothing from the socket, and once closed leaves the next
// read at the frame's start; Discard then drops bytes unread; a peek
// with nothing coming waits for the read deadline.
func TestPeekOffsetAndDiscard(t *testing.T) {
	a, b := sockiotest.Pair(t)
	p := NewPeeker(b)
	want := frameOf(2 << 20)
	go func() {
		for off := 0; off < len(want); off += 100 << 10 {
			a.Write(want[off:min(off+100<<10, len(want))])
			time.Sleep(time.Millisecond)
		}
	}()
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	o, err := p.PeekFrom(len(want))
	if errors.Is(err, ErrNoRoom) {
		t.Skip("the kernel keeps no peek offset for TCP")
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	steps := [][2]int{{0, 10}, {10, 300 << 10}, {300 << 10, 301 << 10}, {301 << 10, 1 << 20}, {1 << 20, len(want)}}
	for i, s := range steps {
		if i%2 == 1 {
			err = o.Skip(s[1] - s[0])
		} else {
			err = o.Fill(got[s[0]:s[1]])
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	o.Close()
	for i, s := range steps {
		if i%2 == 0 && !bytes.Equal(got[s[0]:s[1]], want[s[0]:s[1]]) {
			t.Fatalf("step %d copied other bytes", i)
		}
	}
	head := make([]byte, 10)
	if _, err := io.ReadFull(b, head); err != nil || !bytes.Equal(head, want[:10]) {
		t.Fatalf("the read after the peek does not start the frame: %v", err)
	}
	if n, err := p.Discard(1 << 20); n != 1<<20 || err != nil {
		t.Fatalf("discard: %d, %v", n, err)
	}
	rest := make([]byte, len(want)-10-1<<20)
	if _, err := io.ReadFull(b, rest); err != nil || !bytes.Equal(rest, want[10+1<<20:]) {
		t.Fatalf("the read after the discard: %v", err)
	}

	o, err = p.PeekFrom(100)
	if err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := o.Fill(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("fill with nothing coming: %v, want the deadline's error", err)
	}
	o.Close()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	a.Close()
	if _, err := p.Discard(10); !errors.Is(err, io.EOF) {
		t.Fatalf("discard at the end of the stream: %v, want io.EOF", err)
	}
}

// A frame too large for the socket's first receive buffer, sent at once
// behind one the receiver reads, is peeked at whole: the peek grows the
// buffer, and the window opens for the rest without a read.
func TestPeekAllGrowsBuffer(t *testing.T) {
	a, b := sockiotest.Pair(t)
	p := NewPeeker(b)
	const first, second = 100 << 10, 99 << 10
	frames := frameOf(first + second + 100)
	go a.Write(frames)
	if _, err := io.ReadFull(b, make([]byte, first)); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, second)
	if err := p.PeekAll(got); err != nil || !bytes.Equal(got, frames[first:first+second]) {
		t.Fatalf("peek of %d bytes behind a read of %d: %v", second, first, err)
	}
}
