package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestClientHalfClose: a client that pipelines requests and half-closes
// gets every response, in order, and then the end of the stream.
func TestClientHalfClose(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			p := startProxy(t, mode, kc.ListenAddrs(), nil)
			c := dial(t, p.Addr()).(*net.TCPConn)
			const n = 20
			var frames []byte
			for i := range n {
				frames = append(frames, frame(3, 1, int32(i), "c", false, []byte{0, 0, 0, 0})...)
			}
			if _, err := c.Write(frames); err != nil {
				t.Fatal(err)
			}
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for i := range n {
				readResponse(t, c, int32(i))
			}
			if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
				t.Fatalf("after the last response: %d bytes, %v; want the end of the stream", n, err)
			}
		})
	}
}

// TestClientGoneMidWrite: a client that resets its connection while its
// response is being written ends only that connection; whatever it held
// is released (the cleanup checks the memory budget) and the proxy keeps
// serving.
func TestClientGoneMidWrite(t *testing.T) {
	p := startProxy(t, config.OrderingConnection, []string{rawUpstream(t, 16<<20)}, nil, proxy.WithoutSplice())
	c := dial(t, p.Addr()).(*net.TCPConn)
	if _, err := c.Write(frame(35, 0, 9, "c", false, []byte{0, 0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	c.SetLinger(0) // reset, with the rest of the response unread
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Conns > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection whose client reset mid-response is still open")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.log.waitFor(t, "connection closed")
	if used := p.Stats().MemoryUsed; used != 0 {
		t.Fatalf("%d bytes still reserved after the connection ended", used)
	}
}
