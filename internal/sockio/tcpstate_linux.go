package sockio

import (
	"net"

	"golang.org/x/sys/unix"
)

// What the kernel knows of a TCP socket and the net package does not say:
// whether its peer reset or closed it, and how much it has taken.

// tcpClose is TCP_CLOSE, the state of a socket its peer has reset; one
// whose peer only half-closed is in CLOSE_WAIT (tcpCloseWait) and still
// takes writes.
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// withTCPInfo runs fn on tc's socket with its TCP_INFO; not at all where
// tc is nil or the kernel does not answer.
func withTCPInfo(tc *net.TCPConn, fn func(fd int, info *unix.TCPInfo)) {
	rc := rawConn(tc)
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

// PeerGone reports whether the peer of tc has reset it, or has closed its
// side (a FIN received, whether it still reads or not). A splice between
// two sockets fails without saying which one failed, and the read side's
// error is consumed by then: the socket's state still tells.
func PeerGone(tc *net.TCPConn) (reset, closed bool) {
	withTCPInfo(tc, func(_ int, info *unix.TCPInfo) {
		reset, closed = info.State == tcpClose, info.State == tcpCloseWait
	})
	return reset, closed
}

// SendQueue reports, for tc, the bytes its peer has acknowledged so far
// and whether the kernel holds bytes for the peer that it has not
// acknowledged. known is false where the socket cannot say.
func SendQueue(tc *net.TCPConn) (acked uint64, waiting, known bool) {
	withTCPInfo(tc, func(fd int, info *unix.TCPInfo) {
		if queued, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ); err == nil {
			acked, waiting, known = info.Bytes_acked, queued > 0, true
		}
	})
	return acked, waiting, known
}
