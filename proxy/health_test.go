package proxy_test

import (
	"context"
	"errors"
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
