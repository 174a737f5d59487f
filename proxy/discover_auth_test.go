package proxy_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// With SASL passed through, the proxy cannot list the brokers of an
// upstream that requires authentication. Discovery says so, and the proxy
// counts the upstream as answering, so that it turns ready: clients bring
// the credentials. An upstream that does not answer at all stays an error.
func TestDiscoverUpstreamNeedsCredentials(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "client", "pw"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	if err := p.Discover(ctx); !errors.Is(err, proxy.ErrUpstreamNeedsCredentials) {
		t.Fatalf("Discover: %v, want ErrUpstreamNeedsCredentials", err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready after the upstream answered ApiVersions: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	q := startProxy(t, config.OrderingNone, []string{dead}, func(c *config.Config) { c.DialTimeout = time.Second })
	err = q.Discover(ctx)
	if err == nil || errors.Is(err, proxy.ErrUpstreamNeedsCredentials) {
		t.Fatalf("Discover against a closed port: %v, want a dial error", err)
	}
	if err := q.Ready(); err == nil {
		t.Fatal("Ready although the upstream never answered")
	}
}
