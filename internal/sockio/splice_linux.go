package sockio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Splicer moves bytes from one TCP socket to another in the kernel,
// through a pipe of its own, as io.Copy between two *net.TCPConn does,
// but says which socket failed and how much it took from the source: a
// caller that must keep its place in the source stream (the rest of a
// client's frame still to be read) goes on after the destination fails.
// One goroutine uses a Splicer at a time.
type Splicer struct {
	r, w int // the pipe's ends; -1 once closed
}

// spliceChunk is how much moves through the pipe at a time: its size
// when the kernel lets it grow, as Go's own splice sets it.
const spliceChunk = 1 << 20

// NewSplicer makes a Splicer, or fails where no pipe can be made.
func NewSplicer() (*Splicer, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, os.NewSyscallError("pipe2", err)
	}
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, spliceChunk)
	return &Splicer{r: p[0], w: p[1]}, nil
}

// Close closes the pipe; a Splicer whose move failed on its destination
// may hold bytes there, and is closed rather than used again.
func (s *Splicer) Close() {
	if s.r >= 0 {
		unix.Close(s.r)
		unix.Close(s.w)
		s.r, s.w = -1, -1
	}
}

// ErrSpliceClosed: the Splicer was closed.
var ErrSpliceClosed = errors.New("sockio: splicer closed")

// Move moves n bytes from src to dst, waiting for each as a read and a
// write do (their deadlines apply). taken is how many it took from src.
// readErr: src failed or ended (io.EOF) before n; writeErr: dst failed,
// and the bytes taken and not written are lost with the Splicer, which
// must be closed.
func (s *Splicer) Move(dst, src *net.TCPConn, n int) (taken int, readErr, writeErr error) {
	if s.r < 0 {
		return 0, nil, ErrSpliceClosed
	}
	in, out := rawConn(src), rawConn(dst)
	if in == nil || out == nil {
		return 0, nil, ErrSpliceClosed
	}
	for taken < n {
		var got int
		var err error
		if rerr := in.Read(func(fd uintptr) bool {
			got, err = splice(int(fd), s.w, min(n-taken, spliceChunk))
			return err != syscall.EAGAIN
		}); rerr != nil {
			return taken, rerr, nil
		}
		switch {
		case err != nil:
			return taken, os.NewSyscallError("splice", err), nil
		case got == 0:
			return taken, io.EOF, nil
		}
		taken += got
		for left := got; left > 0; {
			var put int
			if werr := out.Write(func(fd uintptr) bool {
				put, err = splice(s.r, int(fd), left)
				return err != syscall.EAGAIN
			}); werr != nil {
				return taken, nil, werr
			}
			switch {
			case err != nil:
				return taken, nil, os.NewSyscallError("splice", err)
			case put == 0:
				return taken, nil, io.ErrShortWrite
			}
			left -= put
		}
	}
	return taken, nil, nil
}

// splice moves up to n bytes from fd in to fd out without waiting.
func splice(in, out, n int) (int, error) {
	return spliceFlags(in, out, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
}

// spliceFlags is splice with flags of the caller's.
func spliceFlags(in, out, n, flags int) (int, error) {
	for {
		k, err := unix.Splice(in, nil, out, nil, n, flags)
		if err == syscall.EINTR {
			continue
		}
		return int(k), err
	}
}
