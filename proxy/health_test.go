package proxy_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

func wantNotReady(t *testing.T, p *testProxy, substr string) {
	t.Helper()
	err := p.Ready()
	if !errors.Is(err, proxy.ErrNotReady) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("Ready() = %v, want not ready with %q", err, substr)
	}
}

func TestReadyAfterDiscoveryUntilDrain(t *testing.T) {
	c := newCluster(t)
	p := startProxy(t, config.OrderingConnection, c.ListenAddrs(), nil)
	wantNotReady(t, p, "discovery has not completed")
	if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready() after discovery = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantNotReady(t, p, "draining")
}

func TestNotReadyWhenUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := startProxy(t, config.OrderingNone, []string{dead}, func(c *config.Config) { c.DialTimeout = 200 * time.Millisecond })
	if err := p.Discover(testContext(t, 3*time.Second)); err == nil {
		t.Fatal("discovery of a closed port succeeded")
	}
	wantNotReady(t, p, "discovery has not succeeded")
}

func TestNotReadyWhenNodeListenerCannotOpen(t *testing.T) {
	c := newCluster(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// Node 0 would listen on the taken port.
	port := taken.Addr().(*net.TCPAddr).Port
	p := startProxy(t, config.OrderingConnection, c.ListenAddrs(), func(cfg *config.Config) { cfg.NodePortBase = port })
	if err := p.Discover(testContext(t, 10*time.Second)); !errors.Is(err, proxy.ErrNodePort) {
		t.Fatalf("Discover = %v, want ErrNodePort", err)
	}
	wantNotReady(t, p, "node 0")
}

// TestNotReadyUntilAccepting: an upstream that answered is not enough; the
// proxy is ready once it accepts clients, and says "proxy ready" then,
// once. Serve, like Start, ends with ErrClosed.
func TestNotReadyUntilAccepting(t *testing.T) {
	c := newCluster(t)
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = c.ListenAddrs()
	lb := &logBuffer{}
	p, err := proxy.New(cfg, slog.New(slog.NewTextHandler(lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); !errors.Is(err, proxy.ErrNotReady) || !strings.Contains(err.Error(), "not accepting") {
		t.Fatalf("Ready() before Serve = %v, want not ready: not accepting", err)
	}
	if strings.Contains(lb.String(), "proxy ready") {
		t.Fatalf("\"proxy ready\" logged before the proxy accepts:\n%s", lb)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve() }()
	lb.waitFor(t, "proxy ready")
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready() while serving = %v", err)
	}
	if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := <-served; err != proxy.ErrClosed {
		t.Errorf("Serve returned %v, want ErrClosed", err)
	}
	if n := strings.Count(lb.String(), "proxy ready"); n != 1 {
		t.Errorf("\"proxy ready\" logged %d times, want once", n)
	}
}
