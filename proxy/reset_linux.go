package proxy

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// tcpClose is TCP_CLOSE, the state of a socket its peer has reset; one
// whose peer only half-closed is in CLOSE_WAIT (tcpCloseWait) and still
// takes writes.
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// peerReset reports whether nc is a TCP socket its peer has reset. A
// splice between two sockets fails without saying which one failed, and
// the read side's error is consumed by then: the socket's state still
// tells.
func peerReset(nc net.Conn) bool {
	reset, _ := peerGone(nc)
	return reset
}

// peerGone reports whether the peer of the TCP socket under nc (a TLS
// connection's included) has reset it, or has closed its side (a FIN
// received, whether it still reads or not).
func peerGone(nc net.Conn) (reset, closed bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	rc := tcpRawConn(nc)
	if rc == nil {
		return false, false
	}
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			reset, closed = info.State == tcpClose, info.State == tcpCloseWait
		}
	})
	return reset, closed
}
