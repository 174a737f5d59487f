package proxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestUpstreamFailure makes the upstream fail after answering five
// requests of a pipelined run of twenty: a clean close, a reset, a
// response cut in half, and a wrong correlation id. The client must get
// exactly the five responses, in order, and then a closed connection,
// never a hang; and the proxy must keep serving new connections.
func TestUpstreamFailure(t *testing.T) {
	const answered = 5
	faults := []struct {
		name string
		new  func(n int, opts ...kfake.Opt) (*hostile.Fault, error)
		log  string
	}{
		{"close", hostile.CloseAfter, "upstream failed"},
		{"reset", hostile.ResetAfter, "upstream failed"},
		{"truncate", hostile.TruncateAfter, "upstream failed"},
		{"wrong correlation", hostile.WrongCorrelation, "unexpected correlation id"},
	}
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%s", mode, f.name), func(t *testing.T) {
				b, err := f.new(answered, kfake.SeedTopics(1, "t"))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				p := startProxy(t, mode, []string{b.Addr()}, nil)
				ctx := testContext(t, 20*time.Second)
				res, err := pipeprobe.ProducePipelined(ctx, p.Addr(), "t", 0, 20, pipeprobe.Options{})
				if err == nil {
					t.Fatal("the probe finished although the upstream failed")
				}
				if ctx.Err() != nil {
					t.Fatalf("the client hung until its deadline: %v", err)
				}
				if len(res.Responses) != answered {
					t.Fatalf("client got %d responses, want the %d answered before the failure", len(res.Responses), answered)
				}
				for i, r := range res.Responses {
					if r.Seq != i || r.ErrorCode != 0 {
						t.Fatalf("response %d: request %d, error %d", i, r.Seq, r.ErrorCode)
					}
				}
				p.log.waitFor(t, f.log)

				// A new connection gets a new upstream connection,
				// which answers the first five again.
				res, err = pipeprobe.ProducePipelined(ctx, p.Addr(), "t", 0, 3, pipeprobe.Options{})
				if err != nil {
					t.Fatalf("a new connection after the failure: %v", err)
				}
				if err := res.Check(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestUpstreamRefused checks that a client whose upstream refuses the
// connection is closed at once with a log line, and that nothing else is
// affected.
func TestUpstreamRefused(t *testing.T) {
	addr, err := hostile.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, config.OrderingNone, []string{addr}, nil)
	ctx := testContext(t, 20*time.Second)
	_, err = pipeprobe.ProducePipelined(ctx, p.Addr(), "t", 0, 3, pipeprobe.Options{})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("probe through a refused upstream: %v (ctx %v)", err, ctx.Err())
	}
	p.log.waitFor(t, "connection refused")
}

// TestShutdownDrains starts a graceful shutdown while twenty requests are
// in flight upstream: every response still reaches the client, in order,
// new connections are refused, and Shutdown returns within the grace.
func TestShutdownDrains(t *testing.T) {
	b := newReorderer(t, 200*time.Millisecond, 400*time.Millisecond, "t", 1)
	p := startProxy(t, config.OrderingConnection, []string{b.Addr()}, nil)
	ctx := testContext(t, 30*time.Second)

	type result struct {
		res pipeprobe.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := pipeprobe.ProducePipelined(ctx, p.Addr(), "t", 0, 20, pipeprobe.Options{})
		done <- result{res, err}
	}()
	for b.Requests() < 20 {
		if ctx.Err() != nil {
			t.Fatal("requests never reached the backend")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("client lost in-flight responses on shutdown: %v (%d received)", r.err, len(r.res.Responses))
	}
	if err := r.res.Check(); err != nil && !errors.Is(err, pipeprobe.ErrOffsetOrder) {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the bootstrap listener accepts after Shutdown")
	}
	t.Logf("drained in %v", time.Since(start))
}

// TestShutdownGraceExpires checks that Shutdown cuts connections whose
// responses do not arrive within the grace period.
func TestShutdownGraceExpires(t *testing.T) {
	b := newReorderer(t, 20*time.Second, 20*time.Second, "t", 1)
	p := startProxy(t, config.OrderingConnection, []string{b.Addr()}, nil)
	ctx := testContext(t, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := pipeprobe.ProducePipelined(ctx, p.Addr(), "t", 0, 2, pipeprobe.Options{})
		done <- err
	}()
	for b.Requests() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown returned %v, want the grace to expire", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("client got responses the backend never sent")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client still connected after the grace expired")
	}
}

// TestUpstreamUnsolicitedBytes runs a backend that answers a request and
// then sends a frame nobody asked for: the client gets its answer, then the
// proxy closes the connection as the upstream broke the protocol.
func TestUpstreamUnsolicitedBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var hdr [12]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		rest := make([]byte, binary.BigEndian.Uint32(hdr[:4])-8)
		io.ReadFull(c, rest)
		// A Heartbeat v0 answer (error code 0), then a stray frame.
		resp := binary.BigEndian.AppendUint32(nil, 6)
		resp = append(resp, hdr[8:12]...)
		resp = append(resp, 0, 0)
		resp = append(resp, 0, 0, 0, 4, 0, 0, 0, 99)
		c.Write(resp)
		io.Copy(io.Discard, c)
	}()
	p := startProxy(t, config.OrderingConnection, []string{ln.Addr().String()}, nil)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "m"
	c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, hb, 77))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	body := readResponse(t, c, 77)
	if len(body) != 2 || body[0] != 0 || body[1] != 0 {
		t.Fatalf("heartbeat body %v", body)
	}
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("after the answer: %d bytes, %v; want the connection closed", n, err)
	}
	c.Close()
	p.log.waitFor(t, "upstream protocol violation")
}
