package proxy

import (
	"crypto/tls"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A request head or the bytes between partitions go upstream once per
// spliced request or partition: that write allocates nothing.
func TestWriteUpBeforeAllocatesNothing(t *testing.T) {
	a, b := sockiotest.Pair(t)
	go io.Copy(io.Discard, b)
	c := &conn{up: a}
	head := []byte("head")
	one := [1][]byte{head}
	if err := c.writeUpBefore(one[:]); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.writeUpBefore(one[:]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("writeUpBefore allocates %v times per call", allocs)
	}
}

// The kernel's state of a client socket is read through its TLS and the
// SNI listener's sniConn under it: a reset client is seen as one.
func TestPeerResetSeenThroughTLSAndSNI(t *testing.T) {
	a, b := sockiotest.Pair(t)
	nc := tls.Server(&sniConn{TCPConn: b}, &tls.Config{})
	if tcpUnder(nc) != b || tcpConn(nc) != nil || tcpConn(&sniConn{TCPConn: b}) != b {
		t.Fatal("the TCP socket is not found under TLS and sniConn, or is found in TLS's place")
	}
	if runtime.GOOS != "linux" {
		t.Skip("no TCP state of a socket on this platform")
	}
	if peerReset(nc) {
		t.Fatal("an open socket reported reset")
	}
	a.SetLinger(0)
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); !peerReset(nc); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a client reset under TLS and sniConn not reported reset")
		}
	}
}
