package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// The upstream reader writes released requests without waiting for room:
// when the upstream socket does not take them whole, it returns at once
// and a goroutine finishes the write, every byte in order, and then the
// flush.
func TestReleasedWriteFinishedByGoroutine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	up, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	up.(*net.TCPConn).SetWriteBuffer(4 << 10)
	if sockio.NewTryWriter(tcpConn(up)) == nil {
		t.Skip("no non-blocking writes on this platform")
	}

	c := &conn{p: &Proxy{}, mode: ordering.None, up: up}
	c.cond.L = &c.mu
	c.seq = ordering.New[*request](ordering.None, 8, 64<<20)
	var want []byte
	for i := range 3 {
		b := wire.Get(1 << 20)
		for j := range b.B {
			b.B[j] = byte(i + j)
		}
		r := &request{frame: b, upCorr: int32(i)}
		wire.SetRequestCorrelation(b.B, r.upCorr)
		want = append(want, b.B...)
		c.outq = append(c.outq, r)
	}
	c.flushing = true

	returned := make(chan struct{})
	go func() {
		c.flushReleased()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream reader waited for an upstream that does not read")
	}
	if n := c.p.flushHandOffs.Load(); n != 1 {
		t.Fatalf("%d goroutines started to finish the write, want 1", n)
	}
	got, err := io.ReadAll(io.LimitReader(peer, int64(len(want))))
	if err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatalf("upstream received %d bytes that differ from the %d written", len(got), len(want))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushing || len(c.outq) != 0 {
		t.Fatalf("after the flush: flushing %v, %d requests queued", c.flushing, len(c.outq))
	}
}
