package sockio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// MoreWriter writes to one TCP socket with MSG_MORE: the kernel holds a
// partial segment back for what the caller sends next. A frame's head
// written this way just before its body is spliced leaves in the same
// segments as the body, as a relay's stream does, instead of in a small
// segment of its own that the peer's stack handles and wakes a reader for.
// The caller always follows with a send without the flag (the splice, or a
// plain write of the frame's end), which pushes what is held; until then
// the peer could not act on the partial frame anyway. One goroutine uses a
// MoreWriter at a time.
type MoreWriter struct {
	rc   syscall.RawConn
	tc   *net.TCPConn
	bufs [][]byte
	n    int
	err  error
	send func(fd uintptr) bool // bound once, so a write allocates nothing
}

// NewMoreWriter returns nil when tc is nil.
func NewMoreWriter(tc *net.TCPConn) *MoreWriter {
	rc := rawConn(tc)
	if rc == nil {
		return nil
	}
	w := &MoreWriter{rc: rc, tc: tc}
	w.send = w.sendOnce
	return w
}

func (w *MoreWriter) sendOnce(fd uintptr) bool {
	const flags = unix.MSG_MORE | unix.MSG_NOSIGNAL
	if len(w.bufs) == 1 {
		w.n, w.err = unix.SendmsgN(int(fd), w.bufs[0], nil, nil, flags)
	} else {
		w.n, w.err = unix.SendmsgBuffers(int(fd), w.bufs, nil, nil, flags)
	}
	return w.err != unix.EAGAIN && w.err != unix.EINTR
}

// Write sends every byte of bufs, waiting for room as a Write does (the
// socket's write deadline applies), and fails as a Write does, with a
// *net.OpError. It consumes bufs.
func (w *MoreWriter) Write(bufs [][]byte) error {
	defer func() { w.bufs = nil }()
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		w.bufs = bufs
		if err := w.rc.Write(w.send); err != nil {
			return w.opError(err)
		}
		if w.err != nil {
			return w.opError(os.NewSyscallError("sendmsg", w.err))
		}
		if w.n == 0 {
			// Never from a TCP socket; a loop that cannot end otherwise.
			return w.opError(io.ErrShortWrite)
		}
		for n := w.n; n > 0; {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return nil
}

func (w *MoreWriter) opError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return err
	}
	return &net.OpError{Op: "write", Net: "tcp", Source: w.tc.LocalAddr(), Addr: w.tc.RemoteAddr(), Err: err}
}
