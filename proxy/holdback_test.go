package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// loopbackBackend listens on a loopback port and runs serve on the
// listener; when the test ends it closes the listener and waits for serve
// to return.
func loopbackBackend(t testing.TB, serve func(ln net.Listener)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		serve(ln)
	}()
	return ln.Addr().String()
}

// heartbeatBackend accepts one connection, reads n requests and hands
// their upstream correlation ids to answer, which writes the responses.
func heartbeatBackend(t *testing.T, n int, answer func(c net.Conn, corrs [][4]byte)) string {
	t.Helper()
	return loopbackBackend(t, func(ln net.Listener) {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		corrs := make([][4]byte, n)
		for i := range corrs {
			var hdr [12]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[:4]))-8); err != nil {
				return
			}
			copy(corrs[i][:], hdr[8:12])
		}
		answer(c, corrs)
		io.Copy(io.Discard, c)
	})
}

// heartbeatResponse is a Heartbeat v0 response frame: no error.
func heartbeatResponse(corr [4]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 6)
	b = append(b, corr[:]...)
	return append(b, 0, 0)
}

// sendHeartbeats writes n Heartbeat v0 requests in one write, with
// correlation ids first, first+1, ...
func sendHeartbeats(t *testing.T, c net.Conn, n int, first int32) {
	t.Helper()
	var b []byte
	f := kmsg.NewRequestFormatter()
	for i := range n {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID = "g", "m"
		// AppendRequest writes the length of all of b: one frame each.
		b = append(b, f.AppendRequest(nil, hb, first+int32(i))...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestHeldBackResponsesInOrder has the upstream answer pipelined requests
// (Connection mode: all in flight at once) in one write, in reverse order: the upstream reader finds each next
// response already buffered and holds the earlier ones back, and the
// client must still get every response, in its own order, with its own ids.
func TestHeldBackResponsesInOrder(t *testing.T) {
	const n = 40
	up := heartbeatBackend(t, n, func(c net.Conn, corrs [][4]byte) {
		var b []byte
		for i := len(corrs) - 1; i >= 0; i-- {
			b = append(b, heartbeatResponse(corrs[i])...)
		}
		c.Write(b)
	})
	p := startProxy(t, config.OrderingConnection, []string{up}, nil)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendHeartbeats(t, c, n, 1000)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		if body := readResponse(t, c, 1000+int32(i)); len(body) != 2 || body[0] != 0 || body[1] != 0 {
			t.Fatalf("response %d: body %v", i, body)
		}
	}
}

// TestHeldBackResponseWaitsForNothing has the upstream send one whole
// response and only part of the next, then wait until the client has the
// first: a response may be held back only while the next one is whole in
// the buffer, never until more arrives from the upstream.
func TestHeldBackResponseWaitsForNothing(t *testing.T) {
	for _, cut := range []int{3, 6} { // inside the length prefix, inside the body
		got := make(chan struct{})
		up := heartbeatBackend(t, 2, func(c net.Conn, corrs [][4]byte) {
			b := append(heartbeatResponse(corrs[0]), heartbeatResponse(corrs[1])...)
			first := len(b)/2 + cut
			c.Write(b[:first])
			select {
			case <-got:
			case <-time.After(10 * time.Second):
			}
			c.Write(b[first:])
		})
		p := startProxy(t, config.OrderingConnection, []string{up}, nil)
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sendHeartbeats(t, c, 2, 7)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		readResponse(t, c, 7)
		close(got)
		readResponse(t, c, 8)
	}
}

// TestHeldBackResponsesUnderMemoryPressure runs with a memory budget that
// the held-back responses fill: the upstream reader, short of memory for
// the next one, must deliver what it holds (which frees the memory) rather
// than wait for memory only that delivery can free.
func TestHeldBackResponsesUnderMemoryPressure(t *testing.T) {
	const n = 12
	up := heartbeatBackend(t, n, func(c net.Conn, corrs [][4]byte) {
		var b []byte
		for _, corr := range corrs {
			b = append(b, heartbeatResponse(corr)...)
		}
		c.Write(b)
	})
	p := startProxy(t, config.OrderingConnection, []string{up}, func(cfg *config.Config) {
		// Four frame buffers of 512 bytes, the smallest there are.
		cfg.MaxRequestSize, cfg.MaxResponseSize, cfg.MaxMemory = 1024, 1024, 2048
	})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendHeartbeats(t, c, n, 50)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		readResponse(t, c, 50+int32(i))
	}
}
