//go:build unix

package proxy

import (
	"io"
	"net"
	"os"
	"syscall"
)

type socketReader struct {
	rc  syscall.RawConn
	in  *clientIn
	n   int
	err error
	cb  func(fd uintptr) bool // bound once, so a read allocates nothing
	// q is what the socket has received and not yet given, asked by
	// qcb, bound once as cb is.
	q   int
	qcb func(fd uintptr)
}

func newRawReader(nc net.Conn) rawReader {
	rc := tcpRawConn(nc)
	if rc == nil {
		return nil
	}
	s := &socketReader{rc: rc}
	s.cb = s.read
	s.qcb = s.inq
	return s
}

// fill reads into in's buffer, taking one from the pool if it has none. A
// read that finds nothing gives the buffer back before waiting. It returns
// 0 and io.EOF at the end of the stream; the deadline set on the
// connection applies as it does to Read.
func (s *socketReader) fill(in *clientIn) (int, error) {
	s.in, s.n, s.err = in, 0, nil
	err := s.rc.Read(s.cb)
	s.in = nil
	switch {
	case err != nil:
		// A deadline, or the socket closed: the buffer went back
		// before the wait.
		return 0, err
	case s.err != nil:
		in.release()
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: in.nc.LocalAddr(), Addr: in.nc.RemoteAddr(), Err: os.NewSyscallError("read", s.err)}
	case s.n == 0:
		in.release()
		return 0, io.EOF
	}
	return s.n, nil
}

func (s *socketReader) read(fd uintptr) bool {
	in := s.in
	if in.buf == nil {
		in.buf = clientBufs.Get().(*[clientBufSize]byte)
	}
	for {
		n, err := syscall.Read(int(fd), in.buf[:])
		switch err {
		case nil:
			s.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			// Nothing to read: wait without the buffer.
			in.release()
			return false
		}
		s.err = err
		return true
	}
}

// queued returns how many bytes the socket has received and not yet
// given; 0 when it cannot tell.
func (s *socketReader) queued() int {
	s.q = 0
	if s.rc.Control(s.qcb) != nil {
		return 0
	}
	return s.q
}
