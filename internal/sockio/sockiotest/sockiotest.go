// Package sockiotest gives tests the real sockets that internal/sockio acts
// on.
package sockiotest

import (
	"net"
	"testing"
)

// Pair returns the two ends of a loopback TCP connection, closed when the
// test ends.
func Pair(t testing.TB) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a = nc.(*net.TCPConn)
	nb := <-accepted
	if nb == nil {
		a.Close()
		t.Fatal("accept failed")
	}
	b = nb.(*net.TCPConn)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
