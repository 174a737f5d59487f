package proxy_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
)

// TestUnreachableUpstreamWarnsOnce connects several clients to a proxy
// whose upstream refuses connections: the log has one warning naming the
// upstream, not one per client.
func TestUnreachableUpstreamWarnsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := startProxy(t, config.OrderingNone, []string{dead}, nil)
	for range 5 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client of an unreachable upstream read a byte")
		}
		c.Close()
	}
	p.log.waitFor(t, "upstream unreachable")
	if n := strings.Count(p.log.String(), "upstream unreachable"); n != 1 {
		t.Fatalf("%d warnings for 5 refused dials within the interval; log:\n%s", n, p.log.String())
	}
	if !strings.Contains(p.log.String(), "level=WARN msg=\"upstream unreachable") || !strings.Contains(p.log.String(), "upstream="+dead) {
		t.Fatalf("warning does not name the upstream; log:\n%s", p.log.String())
	}
}
