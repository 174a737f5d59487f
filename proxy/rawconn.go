package proxy

import (
	"net"
	"syscall"
)

// tcpRawConn returns nc's raw socket for the system calls the net package
// does not make (sendmsg with MSG_MORE, a read that gives its buffer back
// before waiting), or nil when nc is not a TCP socket (TLS, a pipe in
// tests).
func tcpRawConn(nc net.Conn) syscall.RawConn {
	if sc, ok := nc.(*sniConn); ok {
		nc = sc.TCPConn
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
