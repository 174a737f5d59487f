package sockio

import (
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Pipe holds bytes spliced from a socket until they are moved on to
// another socket (To) or read back (Read), in the order they came: a
// reader that must go on past a large field of a stream (a record set of
// an answer not yet owed) parks it in the kernel instead of copying it in
// and, later, out. The bytes are the socket's own pages, referenced, not
// copied. One goroutine uses a Pipe at a time; Put gives it back.
type Pipe struct {
	r, w int // the pipe's ends
	held int // bytes in it
}

// pipeSize is what a Pipe is grown to: the most the kernel lets an
// unprivileged process set (fs.pipe-max-size, 1 MiB by default), read
// once, and no more than 1 MiB. A pipe that cannot grow (the user's pipe pages spent) keeps the
// kernel's default; it just fills sooner.
var pipeSize = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		return 1 << 20
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 1 << 20
	}
	return min(n, 1<<20)
})

// idlePipes keeps empty pipes for the next answer: making one costs
// three system calls and closing it two. maxIdlePipes bounds the
// descriptors it holds.
var idlePipes struct {
	sync.Mutex
	p []*Pipe
}

const maxIdlePipes = 64

// pipesOut counts the pipes GetPipe gave and Put has not had back.
var pipesOut atomic.Int64

// PipesOut is how many pipes are given out and not yet put back: what
// answers in flight hold, and what a leak would leave.
func PipesOut() int64 { return pipesOut.Load() }

// GetPipe returns an empty Pipe, or fails where no pipe can be made (the
// descriptors spent).
func GetPipe() (*Pipe, error) {
	idlePipes.Lock()
	if n := len(idlePipes.p); n > 0 {
		p := idlePipes.p[n-1]
		idlePipes.p[n-1] = nil
		idlePipes.p = idlePipes.p[:n-1]
		idlePipes.Unlock()
		pipesOut.Add(1)
		return p, nil
	}
	idlePipes.Unlock()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, os.NewSyscallError("pipe2", err)
	}
	unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, pipeSize())
	pipesOut.Add(1)
	return &Pipe{r: fds[0], w: fds[1]}, nil
}

// Put gives p back: kept for the next GetPipe when empty, else closed
// with what it holds.
func (p *Pipe) Put() {
	if p == nil || p.r < 0 {
		return
	}
	pipesOut.Add(-1)
	if p.held == 0 {
		idlePipes.Lock()
		if len(idlePipes.p) < maxIdlePipes {
			idlePipes.p = append(idlePipes.p, p)
			idlePipes.Unlock()
			return
		}
		idlePipes.Unlock()
	}
	unix.Close(p.r)
	unix.Close(p.w)
	p.r, p.w, p.held = -1, -1, 0
}

// Held is how many bytes p holds.
func (p *Pipe) Held() int { return p.held }

// From splices up to n bytes from src into p, waiting for them as a read
// does (src's read deadline applies), until n are in or p is full: got
// is how many it took, less than n (with a nil error) when p filled.
// io.EOF: src ended first.
func (p *Pipe) From(src *net.TCPConn, n int) (got int, err error) {
	rc := rawConn(src)
	if rc == nil {
		return 0, ErrSpliceClosed
	}
	full := false
	for got < n && !full {
		var k int
		var serr error
		if rerr := rc.Read(func(fd uintptr) bool {
			for tries := 0; ; tries++ {
				k, serr = splice(int(fd), p.w, n-got)
				if serr != syscall.EAGAIN {
					return true
				}
				// Nothing moved: either the socket holds nothing
				// (wait for it: bytes that came since the splice
				// wake the wait at once) or the pipe has no room
				// (stop; a wait would last for ever, nobody
				// draining it). Bytes that came between the splice
				// and the count are told from a full pipe by a
				// second splice.
				if q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err != nil || q == 0 {
					return false
				}
				if tries > 0 {
					k, full = 0, true
					return true
				}
			}
		}); rerr != nil {
			return got, rerr
		}
		switch {
		case full:
		case serr != nil && serr != syscall.EAGAIN:
			return got, os.NewSyscallError("splice", serr)
		case k == 0:
			return got, io.EOF
		}
		got += k
		p.held += k
	}
	return got, nil
}

// To splices p's next n bytes to dst, waiting as a write does (dst's
// write deadline applies); with more, flagged as followed by more bytes
// (SPLICE_F_MORE), which the caller then sends. On an error p holds an
// unknown part of them and is closed by Put rather than used again.
func (p *Pipe) To(dst *net.TCPConn, n int, more bool) error {
	rc := rawConn(dst)
	if rc == nil {
		return ErrSpliceClosed
	}
	flags := unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
	if more {
		flags |= unix.SPLICE_F_MORE
	}
	for n > 0 {
		var k int
		var serr error
		if werr := rc.Write(func(fd uintptr) bool {
			k, serr = spliceFlags(p.r, int(fd), n, flags)
			return serr != syscall.EAGAIN
		}); werr != nil {
			return werr
		}
		switch {
		case serr != nil:
			return os.NewSyscallError("splice", serr)
		case k == 0:
			return io.ErrShortWrite
		}
		n -= k
		p.held -= k
	}
	return nil
}

// Read reads p's next len(b) bytes into b, which p must hold.
func (p *Pipe) Read(b []byte) error {
	for len(b) > 0 {
		k, err := unix.Read(p.r, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("read", err)
		}
		if k == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[k:]
		p.held -= k
	}
	return nil
}

// WritePiped writes bufs to dst in order, a buffer whose from entry is
// set moved out of that pipe (To) rather than written, of its length;
// the buffers between pipes go as one vector. All but the last send are
// flagged as followed by more (MSG_MORE, SPLICE_F_MORE), so that a small
// run between two pipes (a partition's fields between two record sets)
// leaves in the segments of the bytes around it, as a relay's stream
// does, not in a segment of its own.
func WritePiped(dst *net.TCPConn, bufs [][]byte, from []*Pipe) error {
	last := len(bufs) - 1
	for last >= 0 && len(bufs[last]) == 0 {
		last--
	}
	start := 0
	var vec net.Buffers
	var mw *MoreWriter
	for i, p := range from {
		if p == nil {
			continue
		}
		if start < i {
			if mw == nil {
				mw = NewMoreWriter(dst)
			}
			vec = append(vec[:0], bufs[start:i]...)
			if err := mw.Write(vec); err != nil {
				return err
			}
		}
		if err := p.To(dst, len(bufs[i]), i < last); err != nil {
			return err
		}
		start = i + 1
	}
	if start < len(bufs) {
		vec = append(vec[:0], bufs[start:]...)
		_, err := vec.WriteTo(dst)
		return err
	}
	return nil
}
