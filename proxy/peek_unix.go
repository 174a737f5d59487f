//go:build unix

package proxy

import (
	"io"
	"net"
	"os"
	"syscall"
)

// peekClosed reports whether the peer of nc has closed it (or reset it),
// without consuming any byte and without blocking.
func peekClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
		default:
			closed = true
		}
		return true
	})
	return closed
}

// peeker copies a TCP socket's next bytes without taking them from it,
// waiting while there are none as a read does (the connection's read
// deadline applies). The client reader uses it to learn what comes next
// in a streaming request before it splices those bytes, unread.
type peeker struct {
	rc  syscall.RawConn
	buf []byte
	n   int
	err error
	cb  func(fd uintptr) bool // bound once, so a peek allocates nothing
}

// newPeeker returns nil when nc is not a TCP socket.
func newPeeker(nc net.Conn) *peeker {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.cb = p.peekOnce
	return p
}

// peek copies up to len(buf) of the socket's next bytes into buf and
// reports what a read would have: io.EOF at the end of the stream, the
// deadline's error, or the socket's.
func (p *peeker) peek(buf []byte) (int, error) {
	p.buf, p.n, p.err = buf, 0, nil
	err := p.rc.Read(p.cb)
	p.buf = nil
	switch {
	case err != nil:
		return 0, err
	case p.err != nil:
		return 0, os.NewSyscallError("recvfrom", p.err)
	case p.n == 0:
		return 0, io.EOF
	}
	return p.n, nil
}

func (p *peeker) peekOnce(fd uintptr) bool {
	for {
		n, _, err := syscall.Recvfrom(int(fd), p.buf, syscall.MSG_PEEK)
		switch err {
		case nil:
			p.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		p.err = err
		return true
	}
}
