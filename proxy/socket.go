package proxy

import (
	"crypto/tls"
	"net"

	"github.com/inorder-proxy/inorder/internal/sockio"
)

// The proxy's sockets as internal/sockio acts on them: the TCP socket a
// connection is, or the one under its TLS.

// tcpConn returns the TCP socket nc is, for the system calls the net
// package does not make (sendmsg with MSG_MORE, a read that gives its
// buffer back before waiting), or nil when nc is not one (TLS, a pipe in
// tests).
func tcpConn(nc net.Conn) *net.TCPConn {
	if sc, ok := nc.(*sniConn); ok {
		return sc.TCPConn
	}
	tc, _ := nc.(*net.TCPConn)
	return tc
}

// tcpUnder returns the TCP socket under nc, a TLS connection's included,
// for what the kernel knows of it; nil when there is none.
func tcpUnder(nc net.Conn) *net.TCPConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	return tcpConn(nc)
}

// peekClosed reports whether the peer of nc has closed or reset it,
// without reading it: an idle upstream connection is not reused then.
func peekClosed(nc net.Conn) bool { return sockio.PeekClosed(tcpUnder(nc)) }

// peerReset reports whether nc's peer has reset it. Where the platform
// cannot tell, a failed splice is taken for the upstream's failure, as the
// slower and safer guess.
func peerReset(nc net.Conn) bool {
	reset, _ := sockio.PeerGone(tcpUnder(nc))
	return reset
}

// peerGone reports whether nc's peer has reset it or closed its side;
// where the platform cannot tell, a paused reader notices its client's
// going when it reads again.
func peerGone(nc net.Conn) (reset, closed bool) { return sockio.PeerGone(tcpUnder(nc)) }

// sendQueue reports the bytes nc's peer has acknowledged and whether some
// wait for it (sockio.SendQueue); known is false where the platform
// cannot say, and a client write is then bounded as a whole.
func sendQueue(nc net.Conn) (acked uint64, waiting, known bool) {
	return sockio.SendQueue(tcpUnder(nc))
}
