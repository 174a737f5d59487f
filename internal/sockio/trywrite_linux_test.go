package sockio

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A TryWriter takes what the socket takes at once and returns the rest
// without waiting; the rest written after it completes the stream in
// order.
func TestTryWriterReturnsWhatWaits(t *testing.T) {
	if NewTryWriter(nil) != nil {
		t.Fatal("a writer made without a socket")
	}
	a, b := sockiotest.Pair(t)
	a.SetWriteBuffer(4 << 10)
	w := NewTryWriter(a)

	small := []byte("small")
	if left, err := w.Write([][]byte{small, nil}); left != nil || err != nil {
		t.Fatalf("a write the socket takes whole: %d buffers left, %v", len(left), err)
	}
	var bufs [][]byte
	var want []byte
	want = append(want, small...)
	for i := range 3 {
		p := bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
		bufs = append(bufs, p, nil)
		want = append(want, p...)
	}
	done := make(chan struct{})
	var left [][]byte
	var err error
	go func() {
		left, err = w.Write(bufs)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write waited for a peer that does not read")
	}
	if err != nil || left == nil {
		t.Fatalf("3 MiB to a peer that does not read: %d buffers left, %v", len(left), err)
	}
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(io.LimitReader(b, int64(len(want))))
		got <- all
	}()
	rest := net.Buffers(left)
	if _, err := rest.WriteTo(a); err != nil {
		t.Fatal(err)
	}
	if all := <-got; !bytes.Equal(all, want) {
		t.Fatalf("the peer received %d bytes that differ from the %d sent", len(all), len(want))
	}
}
