package proxy_test

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// TestResetWhileReaderPaused: a client that fills its connection's
// in-flight limit in front of an upstream that never answers, then resets,
// is not read by the proxy, which waits for room; the reset must still end
// the connection and its upstream connection, within seconds, not when the
// upstream answers.
func TestResetWhileReaderPaused(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			got := make(chan struct{}, 16)
			backend := startBackend(t, func(c net.Conn, _ uint64) {
				var lb [4]byte
				for {
					frame, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
					if err != nil {
						return
					}
					wire.Put(frame)
					got <- struct{}{} // and no answer, ever
				}
			})
			p := startProxy(t, mode, []string{backend}, func(c *config.Config) { c.MaxInFlight = 2 })
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			local := c.LocalAddr().String()
			fmtr := kmsg.NewRequestFormatter()
			for i := range int32(6) {
				req := kmsg.NewPtrMetadataRequest()
				req.Version = 1
				if _, err := c.Write(fmtr.AppendRequest(nil, req, i)); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("no request reached the upstream")
			}
			time.Sleep(100 * time.Millisecond) // the reader waits for room
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			deadline := time.Now().Add(5 * time.Second)
			for p.Stats().Conns > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the connection outlived its client's reset by 5s; log:\n%s", p.log)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if line := closeLine(p, local); !strings.Contains(line, "reset while the proxy waited") {
				t.Fatalf("close logged as %q", line)
			}
		})
	}
}

// TestCloseWhileReaderPaused: a client that fills its in-flight limit in
// front of an upstream that answers slowly and then half-closes still gets
// every response, although the proxy sees the close while it waits for
// room and the answers take longer in all than the EOF drain bound (the
// bound counts from the last response, not from the close); in front of
// one that stops answering, the connection ends once no response has come
// for the bound.
func TestCloseWhileReaderPaused(t *testing.T) {
	// The requests: answered, they take 3 s, three of the watch's looks.
	const drain, requests = 600 * time.Millisecond, 30
	restore := proxy.SetEOFDrain(drain)
	defer restore()
	for _, tc := range []struct {
		name   string
		answer int // requests answered, one each 100 ms
	}{
		{"answered", requests},
		{"hung", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := startBackend(t, func(c net.Conn, _ uint64) {
				var lb [4]byte
				for i := 0; ; i++ {
					frame, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
					if err != nil {
						return
					}
					resp, ok := answer(frame.B)
					wire.Put(frame)
					if !ok || i >= tc.answer {
						continue // no answer, ever
					}
					time.Sleep(100 * time.Millisecond)
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			})
			p := startProxy(t, config.OrderingConnection, []string{backend}, func(c *config.Config) { c.MaxInFlight = 2 })
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			local := c.LocalAddr().String()
			fmtr := kmsg.NewRequestFormatter()
			for i := range int32(requests) {
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = 3
				if _, err := c.Write(fmtr.AppendRequest(nil, req, i)); err != nil {
					t.Fatal(err)
				}
			}
			c.(*net.TCPConn).CloseWrite()
			start := time.Now()
			for i := range int32(tc.answer) {
				resp, err := readFrame(c)
				if err != nil {
					t.Fatalf("response %d of %d: %v", i, tc.answer, err)
				}
				if got := int32(binary.BigEndian.Uint32(resp)); got != i {
					t.Fatalf("response %d has id %d", i, got)
				}
			}
			if _, err := readFrame(c); err == nil {
				t.Fatal("a response to a request the upstream never answered")
			}
			if tc.answer == requests {
				return
			}
			// The watch looks once a second: the bound, then up to two
			// looks.
			if took := time.Since(start); took < drain || took > drain+4*time.Second {
				t.Fatalf("the connection ended %v after the client's close, want about %v after the last response", took, drain)
			}
			if line := closeLine(p, local); !strings.Contains(line, "did not complete in time") {
				t.Fatalf("close logged as %q", line)
			}
		})
	}
}
