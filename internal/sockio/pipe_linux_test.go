package sockio

import (
	"bytes"
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A Pipe takes a socket's bytes in pieces and gives them out in the same
// order, to another socket or read back, the source stream right behind
// them; one that fills says so with what it took, and the rest is still
// in the socket; an emptied pipe is kept for the next GetPipe, one that
// holds bytes is closed.
func TestPipe(t *testing.T) {
	srcPeer, src := sockiotest.Pair(t)
	dst, dstPeer := sockiotest.Pair(t)
	want := frameOf(3<<20 + 5)
	go srcPeer.Write(want)
	src.SetReadDeadline(time.Now().Add(10 * time.Second))

	out0 := PipesOut()
	p, err := GetPipe()
	if err != nil {
		t.Fatal(err)
	}
	if PipesOut() != out0+1 {
		t.Fatalf("%d pipes out after one was given, from %d", PipesOut(), out0)
	}
	// A pipe of two slots, which fills at once.
	if _, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, 8192); err != nil {
		t.Fatal(err)
	}
	got, err := p.From(src, 1000)
	if err != nil || got != 1000 || p.Held() != 1000 {
		t.Fatalf("from: %d, %v, holding %d", got, err, p.Held())
	}
	// More than the pipe holds: it stops when full, without waiting.
	got, err = p.From(src, len(want)-1000)
	if err != nil || got == 0 || got >= len(want)-1000 || p.Held() != 1000+got {
		t.Fatalf("from into a filling pipe: %d, %v, holding %d", got, err, p.Held())
	}
	taken := 1000 + got

	out := make(chan []byte, 1)
	go func() {
		b := make([]byte, taken-10)
		io.ReadFull(dstPeer, b)
		out <- b
	}()
	if err := p.To(dst, taken-10, false); err != nil {
		t.Fatal(err)
	}
	if b := <-out; !bytes.Equal(b, want[:taken-10]) {
		t.Fatal("the destination read other bytes")
	}
	last := make([]byte, 10)
	if err := p.Read(last); err != nil || !bytes.Equal(last, want[taken-10:taken]) || p.Held() != 0 {
		t.Fatalf("read back: %v, holding %d", err, p.Held())
	}
	next := make([]byte, 100)
	if _, err := io.ReadFull(src, next); err != nil || !bytes.Equal(next, want[taken:taken+100]) {
		t.Fatalf("the source does not go on behind the pipe: %v", err)
	}

	unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pipeSize())
	p.Put()
	q, err := GetPipe()
	if err != nil || q != p {
		t.Fatalf("an emptied pipe is not kept: %v", err)
	}
	if _, err := q.From(src, 10); err != nil {
		t.Fatal(err)
	}
	q.Put()
	if q.r >= 0 {
		t.Fatal("a pipe put back holding bytes is kept")
	}
	if PipesOut() != out0 {
		t.Fatalf("%d pipes out after every one was put back, from %d", PipesOut(), out0)
	}

	// The source ended: io.EOF with what came before it.
	r, _ := GetPipe()
	defer r.Put()
	a, b := sockiotest.Pair(t)
	a.Write([]byte("abc"))
	a.Close()
	if got, err := r.From(b, 10); got != 3 || err != io.EOF {
		t.Fatalf("from an ended socket: %d, %v", got, err)
	}
}

// WritePiped writes memory and pipes in order.
func TestWritePiped(t *testing.T) {
	srcPeer, src := sockiotest.Pair(t)
	dst, dstPeer := sockiotest.Pair(t)
	body := frameOf(200 << 10)
	go srcPeer.Write(body)
	p1, _ := GetPipe()
	p2, _ := GetPipe()
	defer p1.Put()
	defer p2.Put()
	if got, err := p1.From(src, 100<<10); got != 100<<10 || err != nil {
		t.Fatal(got, err)
	}
	if got, err := p2.From(src, 100<<10); got != 100<<10 || err != nil {
		t.Fatal(got, err)
	}
	bufs := [][]byte{[]byte("head"), body[:100<<10], []byte("mid"), []byte("dle"), body[100<<10:], []byte("tail")}
	from := []*Pipe{nil, p1, nil, nil, p2, nil}
	var want []byte
	for _, b := range bufs {
		want = append(want, b...)
	}
	out := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		io.ReadFull(dstPeer, b)
		out <- b
	}()
	if err := WritePiped(dst, bufs, from); err != nil {
		t.Fatal(err)
	}
	if b := <-out; !bytes.Equal(b, want) {
		t.Fatal("the destination read other bytes")
	}
}
