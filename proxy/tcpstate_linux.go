package proxy

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// What the kernel knows of a client's TCP socket and the net package does
// not say: whether its peer reset or closed it, and how much it has taken.

// tcpClose is TCP_CLOSE, the state of a socket its peer has reset; one
// whose peer only half-closed is in CLOSE_WAIT (tcpCloseWait) and still
// takes writes.
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// withTCPInfo runs fn on the TCP socket under nc (a TLS connection's
// included) with its TCP_INFO; not at all where nc has no TCP socket or
// the kernel does not answer.
func withTCPInfo(nc net.Conn, fn func(fd int, info *unix.TCPInfo)) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	rc := tcpRawConn(nc)
	if rc == nil {
		return
	}
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			fn(int(fd), info)
		}
	})
}

// peerReset reports whether nc is a TCP socket its peer has reset. A
// splice between two sockets fails without saying which one failed, and
// the read side's error is consumed by then: the socket's state still
// tells.
func peerReset(nc net.Conn) bool {
	reset, _ := peerGone(nc)
	return reset
}

// peerGone reports whether the peer of the TCP socket under nc has reset
// it, or has closed its side (a FIN received, whether it still reads or
// not).
func peerGone(nc net.Conn) (reset, closed bool) {
	withTCPInfo(nc, func(_ int, info *unix.TCPInfo) {
		reset, closed = info.State == tcpClose, info.State == tcpCloseWait
	})
	return reset, closed
}

// sendQueue reports, for the TCP socket under nc, the bytes its peer has
// acknowledged so far and whether the kernel holds bytes for the peer that
// it has not acknowledged. known is false where the socket cannot say.
func sendQueue(nc net.Conn) (acked uint64, waiting, known bool) {
	withTCPInfo(nc, func(fd int, info *unix.TCPInfo) {
		if queued, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ); err == nil {
			acked, waiting, known = info.Bytes_acked, queued > 0, true
		}
	})
	return acked, waiting, known
}
