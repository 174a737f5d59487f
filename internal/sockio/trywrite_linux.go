package sockio

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TryWriter writes to one TCP socket what it takes at once, without
// waiting for room: a single writev on the non-blocking socket, for a
// caller that must not block on a peer that may be waiting for it to read.
// One goroutine uses a TryWriter at a time.
type TryWriter struct {
	rc   syscall.RawConn
	bufs [][]byte
	iov  []unix.Iovec
	n    int
	err  error
	send func(fd uintptr) bool // bound once, so a write allocates nothing
}

// NewTryWriter returns nil when tc is nil.
func NewTryWriter(tc *net.TCPConn) *TryWriter {
	rc := rawConn(tc)
	if rc == nil {
		return nil
	}
	w := &TryWriter{rc: rc}
	w.send = w.writevOnce
	return w
}

// maxIovec is the most buffers one writev takes (IOV_MAX); what follows
// them counts as not written yet.
const maxIovec = 1024

func (w *TryWriter) writevOnce(fd uintptr) bool {
	w.iov = w.iov[:0]
	for _, b := range w.bufs {
		if len(w.iov) == maxIovec {
			break
		}
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		w.iov = append(w.iov, v)
	}
	w.n, w.err = 0, nil
	if len(w.iov) > 0 {
		n, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(len(w.iov)))
		if errno != 0 {
			w.err = errno
		} else {
			w.n = int(n)
		}
	}
	clear(w.iov) // holds none of the buffers, which go back to the caller
	// Done whatever happened: the caller, not the poller, waits for room.
	return true
}

// Write writes what the socket takes of bufs now, and returns what it did
// not take (nil: everything), sliced from bufs.
func (w *TryWriter) Write(bufs [][]byte) ([][]byte, error) {
	w.bufs = bufs
	err := w.rc.Write(w.send)
	w.bufs = nil
	if err == nil && w.err != nil && w.err != unix.EAGAIN && w.err != unix.EINTR {
		err = &net.OpError{Op: "write", Net: "tcp", Err: w.err}
	}
	if err != nil {
		return bufs, err
	}
	n := w.n
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) == 0 {
		return nil, nil
	}
	bufs[0] = bufs[0][n:]
	return bufs, nil
}
