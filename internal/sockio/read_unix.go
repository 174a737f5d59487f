//go:build unix

package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Reader reads a TCP socket with one non-blocking read at a time, waiting
// for it to become readable while there is nothing to read, and says how
// many bytes the socket holds. One goroutine uses a Reader at a time.
type Reader struct {
	rc  syscall.RawConn
	tc  *net.TCPConn
	l   Lender
	n   int
	err error
	cb  func(fd uintptr) bool // bound once, so a read allocates nothing
	// q is what the socket has received and not yet given, asked by
	// qcb, bound once as cb is.
	q   int
	qcb func(fd uintptr)
}

// NewReader returns nil when tc is nil.
func NewReader(tc *net.TCPConn) *Reader {
	rc := rawConn(tc)
	if rc == nil {
		return nil
	}
	r := &Reader{rc: rc, tc: tc}
	r.cb = r.read
	r.qcb = r.inq
	return r
}

// Fill reads into the buffer l lends. It returns 0 and io.EOF at the end
// of the stream; the deadline set on the connection applies as it does
// to Read.
func (r *Reader) Fill(l Lender) (int, error) {
	r.l, r.n, r.err = l, 0, nil
	err := r.rc.Read(r.cb)
	r.l = nil
	switch {
	case err != nil:
		// A deadline, or the socket closed: the buffer went back
		// before the wait.
		return 0, err
	case r.err != nil:
		l.Reclaim()
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.tc.LocalAddr(), Addr: r.tc.RemoteAddr(), Err: os.NewSyscallError("read", r.err)}
	case r.n == 0:
		l.Reclaim()
		return 0, io.EOF
	}
	return r.n, nil
}

func (r *Reader) read(fd uintptr) bool {
	buf := r.l.Lend()
	for {
		n, err := syscall.Read(int(fd), buf)
		switch err {
		case nil:
			r.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			// Nothing to read: wait without the buffer.
			r.l.Reclaim()
			return false
		}
		r.err = err
		return true
	}
}

// Queued returns how many bytes the socket has received and not yet
// given; 0 when it cannot tell.
func (r *Reader) Queued() int {
	r.q = 0
	if r.rc.Control(r.qcb) != nil {
		return 0
	}
	return r.q
}
