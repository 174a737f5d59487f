package proxy

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// sendQueue reports, for the TCP socket under nc, the bytes its peer has
// acknowledged so far and whether the kernel holds bytes for the peer that
// it has not acknowledged. known is false where the socket cannot say.
func sendQueue(nc net.Conn) (acked uint64, waiting, known bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	rc := tcpRawConn(nc)
	if rc == nil {
		return 0, false, false
	}
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		queued, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		if err != nil {
			return
		}
		acked, waiting, known = info.Bytes_acked, queued > 0, true
	})
	return acked, waiting, known
}
