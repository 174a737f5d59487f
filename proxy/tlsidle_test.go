package proxy_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
)

// idleTLSUpstream accepts one TLS connection, completes the handshake and
// then does what the test asks of it on the returned channel: "notify"
// sends a close_notify and keeps the TCP connection open, "close" closes
// it (close_notify and FIN), "reset" resets it.
func idleTLSUpstream(t *testing.T, k *pki) (addr string, do chan<- string) {
	t.Helper()
	pair, err := k.ca.Issue("upstream", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	cmds := make(chan string, 4)
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		close(cmds)
		<-done
	})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		tc := nc.(*tls.Conn)
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			return
		}
		for cmd := range cmds {
			switch cmd {
			case "notify":
				tc.CloseWrite()
			case "close":
				tc.Close()
				return
			case "reset":
				tc.NetConn().(*net.TCPConn).SetLinger(0)
				tc.NetConn().Close()
				return
			}
		}
	}()
	return ln.Addr().String(), cmds
}

// stillOpen fails the test if the proxy closes c within d.
func stillOpen(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	if _, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client's connection ended while its TLS upstream was open: %v", err)
	}
}

// TestTLSUpstreamIdleCloseNoticed: a TLS upstream that closes or resets
// an idle connection makes the proxy close the client's within seconds,
// as a plain one does; a record the upstream sends while idle (here a
// close_notify with the TCP connection left open) is not taken for a
// close.
func TestTLSUpstreamIdleCloseNoticed(t *testing.T) {
	for _, end := range []string{"close", "reset"} {
		t.Run(end, func(t *testing.T) {
			k := newPKI(t)
			addr, do := idleTLSUpstream(t, k)
			p := startProxy(t, config.OrderingNone, []string{addr}, func(c *config.Config) { c.UpstreamTLSCA = k.caFile })
			c := dial(t, p.Addr())
			do <- "notify"
			// Two looks of the watch, which runs every 2s.
			stillOpen(t, c, 5*time.Second)
			do <- end
			if took := closedWithin(t, c, 10*time.Second); took > 5*time.Second {
				t.Fatalf("noticed the upstream's %s after %s", end, took)
			}
			p.log.waitFor(t, "closed the connection while it was idle")
		})
	}
}
