package proxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpClose is TCP_CLOSE, the state of a socket its peer has reset; one
// whose peer only half-closed is in CLOSE_WAIT and still takes writes.
const tcpClose = 7

// peerReset reports whether nc is a TCP socket its peer has reset. A
// splice between two sockets fails without saying which one failed, and
// the read side's error is consumed by then: the socket's state still
// tells.
func peerReset(nc net.Conn) bool {
	rc := tcpRawConn(nc)
	if rc == nil {
		return false
	}
	reset := false
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		reset = err == nil && info.State == tcpClose
	})
	return reset
}
