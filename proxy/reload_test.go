package proxy_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// topicsVia sends a Metadata request for every topic on nc and returns the
// topic names in the answer.
func topicsVia(t *testing.T, nc net.Conn) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	return metadataVia(t, nc, req)
}

// metadataVia sends req on nc and returns the topic names in the answer.
func metadataVia(t *testing.T, nc net.Conn, req *kmsg.MetadataRequest) []string {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("reload")).AppendRequest(nil, req, 7)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	var lb [4]byte
	if _, err := io.ReadFull(nc, lb[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	// Correlation id, then the flexible header's empty tag section.
	if err := resp.ReadFrom(body[5:]); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	return names
}

func dialProxy(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestReloadAppliesToNewConnections: a reload moves new connections to the
// new upstream list while an open connection keeps its upstream; a change
// to the listen address is refused whole, and an invalid configuration
// leaves the running one in place.
func TestReloadAppliesToNewConnections(t *testing.T) {
	a := newCluster(t, kfake.SeedTopics(1, "on-a"))
	b := newCluster(t, kfake.SeedTopics(1, "on-b"))
	var cfg config.Config
	p := startProxy(t, config.OrderingConnection, a.ListenAddrs(), func(c *config.Config) { cfg = *c })

	before := dialProxy(t, p.Addr())
	if got := topicsVia(t, before); !slices.Contains(got, "on-a") {
		t.Fatalf("before reload: topics %v, want on-a", got)
	}

	next := cfg
	next.Upstreams = b.ListenAddrs()
	if err := p.Reload(next); err != nil {
		t.Fatal(err)
	}
	after := dialProxy(t, p.Addr())
	if got := topicsVia(t, after); !slices.Contains(got, "on-b") || slices.Contains(got, "on-a") {
		t.Fatalf("new connection after reload: topics %v, want on-b only", got)
	}
	if got := topicsVia(t, before); !slices.Contains(got, "on-a") {
		t.Fatalf("the connection open before the reload moved: topics %v", got)
	}

	moved := next
	moved.Upstreams = a.ListenAddrs()
	moved.Listen = "127.0.0.1:1"
	if err := p.Reload(moved); !errors.Is(err, proxy.ErrRestartRequired) {
		t.Fatalf("Reload of a new listen address = %v, want ErrRestartRequired", err)
	}
	bad := next
	bad.Upstreams = a.ListenAddrs()
	bad.MaxInFlight = 0
	if err := p.Reload(bad); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Reload of an invalid configuration = %v, want ErrInvalid", err)
	}
	if got := topicsVia(t, dialProxy(t, p.Addr())); !slices.Contains(got, "on-b") {
		t.Fatalf("a refused reload changed the upstream: topics %v", got)
	}
}

// TestReloadLimitsApplyToNewConnections: a lower max-request-size closes a
// new connection that sends a larger frame; an older one still takes it.
func TestReloadLimitsApplyToNewConnections(t *testing.T) {
	c := newCluster(t)
	var cfg config.Config
	p := startProxy(t, config.OrderingConnection, c.ListenAddrs(), func(c *config.Config) { cfg = *c })
	old := dialProxy(t, p.Addr())
	// A dial returns once the kernel has queued the connection; the proxy
	// takes its limits when it accepts it. A round trip makes sure that
	// happened before the reload.
	topicsVia(t, old)
	next := cfg
	next.MaxRequestSize = 64
	if err := p.Reload(next); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	const long = "a-topic-name-long-enough-to-pass-sixty-four-bytes-of-frame"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(long)}}
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("reload")).AppendRequest(nil, req, 1)
	if len(frame) <= 4+64 {
		t.Fatalf("test frame of %d bytes is not over the limit", len(frame))
	}
	if got := metadataVia(t, old, req); !slices.Contains(got, long) {
		t.Fatalf("the connection open before the reload: topics %v, want %s", got, long)
	}
	fresh := dialProxy(t, p.Addr())
	fresh.SetDeadline(time.Now().Add(10 * time.Second))
	fresh.Write(frame)
	if n, err := io.Copy(io.Discard, fresh); err != nil || n != 0 {
		t.Fatalf("new connection answered %d bytes (err %v) to a frame over the reloaded limit; want a close", n, err)
	}
	p.log.waitFor(t, "bad request")
}
