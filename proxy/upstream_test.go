package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

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
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MinDelay:  200 * time.Millisecond,
		MaxDelay:  400 * time.Millisecond,
		KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "t")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MinDelay:  20 * time.Second,
		MaxDelay:  20 * time.Second,
		KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "t")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
