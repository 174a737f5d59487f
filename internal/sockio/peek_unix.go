//go:build unix

package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// PeekClosed reports whether the peer of tc has closed it (or reset it),
// without consuming any byte and without blocking; false when tc is nil.
// Bytes waiting are not a close by themselves: a TLS peer sends records
// while the connection is idle (a TLS 1.3 session ticket after the
// handshake, a close_notify before it closes), and a peek sees those and
// not the end of the stream behind them; the socket's state does
// (PeerGone: a FIN received, or a reset), where the kernel tells it.
func PeekClosed(tc *net.TCPConn) bool {
	rc := rawConn(tc)
	if rc == nil {
		return false
	}
	closed, waiting := false, false
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed, waiting = n == 0, n > 0
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
		default:
			closed = true
		}
		return true
	})
	if waiting {
		reset, finished := PeerGone(tc)
		closed = reset || finished
	}
	return closed
}

// Peeker copies a TCP socket's next bytes without taking them from it,
// waiting while there are none as a read does (the connection's read
// deadline applies): a caller learns what comes next before it splices
// those bytes, unread. One goroutine uses a Peeker at a time.
type Peeker struct {
	rc  syscall.RawConn
	buf []byte
	n   int
	err error
	cb  func(fd uintptr) bool // bound once, so a peek allocates nothing
}

// NewPeeker returns nil when tc is nil.
func NewPeeker(tc *net.TCPConn) *Peeker {
	rc := rawConn(tc)
	if rc == nil {
		return nil
	}
	p := &Peeker{rc: rc}
	p.cb = p.peekOnce
	return p
}

// Peek copies up to len(buf) of the socket's next bytes into buf and
// reports what a read would have: io.EOF at the end of the stream, the
// deadline's error, or the socket's.
func (p *Peeker) Peek(buf []byte) (int, error) {
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

func (p *Peeker) peekOnce(fd uintptr) bool {
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
