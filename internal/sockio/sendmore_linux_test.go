package sockio

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A head written with MSG_MORE, larger than the socket takes at once so
// that it goes in several calls, arrives whole and in order before what a
// plain write sends after it.
func TestMoreWriterWholeInOrder(t *testing.T) {
	a, b := sockiotest.Pair(t)
	head := []byte("head0123")
	body := make([]byte, 8<<20)
	rand.Read(body)
	tail := []byte("tail")
	want := bytes.Join([][]byte{head, nil, body, tail}, nil)

	got := make(chan []byte, 1)
	go func() {
		buf, _ := io.ReadAll(io.LimitReader(b, int64(len(want))))
		got <- buf
	}()
	if err := NewMoreWriter(a).Write(net.Buffers{head, nil, body}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(tail); err != nil {
		t.Fatal(err)
	}
	select {
	case buf := <-got:
		if !bytes.Equal(buf, want) {
			t.Fatalf("received %d bytes, differing from the %d sent", len(buf), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bytes did not arrive")
	}
}

// The socket's write deadline holds while the peer reads nothing.
func TestMoreWriterDeadline(t *testing.T) {
	a, _ := sockiotest.Pair(t)
	a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	err := NewMoreWriter(a).Write(net.Buffers{make([]byte, 64<<20)})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("err = %T, want a *net.OpError as a Write gives", err)
	}
}

// A write to a socket the peer has reset fails as a Write does.
func TestMoreWriterPeerGone(t *testing.T) {
	a, b := sockiotest.Pair(t)
	b.SetLinger(0)
	b.Close()
	w := NewMoreWriter(a)
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		err = w.Write(net.Buffers{[]byte("x")})
		time.Sleep(10 * time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("err = %v (%T), want a *net.OpError", err, err)
	}
}
