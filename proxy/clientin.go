package proxy

import (
	"net"
	"sync"

	"github.com/inorder-proxy/inorder/internal/sockio"
)

// The client reader reads through clientIn, which on a TCP socket reads
// into a small buffer taken from a pool: a small request then comes in one
// read call with its length prefix, and a client that pipelines small
// requests sends several per call. The buffer is taken when a read finds
// bytes and given back when it is drained or a read would block, so an
// idle connection holds none and 10,000 of them cost no more than before.
// A read at least as large as the buffer bypasses it.

// clientBufSize is the read buffer's size.
const clientBufSize = 4 << 10

var clientBufs = sync.Pool{New: func() any { return new([clientBufSize]byte) }}

// clientIn is the client connection's read side. Only the client reader
// uses it. Its zero value reads nc directly; init enables the buffer.
type clientIn struct {
	nc   net.Conn
	raw  *sockio.Reader // nil: nc is read directly (TLS, or not a socket)
	buf  *[clientBufSize]byte
	r, w int // buf[r:w] is read from the socket and not yet consumed
}

// init enables the buffer where nc is a TCP socket: raw fills it with one
// non-blocking read, waiting for the socket to become readable (and giving
// the buffer back first, as a sockio.Lender) while there is nothing to
// read.
func (in *clientIn) init(nc net.Conn) {
	in.nc = nc
	in.raw = sockio.NewReader(tcpConn(nc))
}

// Buffered reports how many bytes are read and not yet consumed.
func (in *clientIn) Buffered() int { return in.w - in.r }

// Queued reports how many bytes a read can return now: those buffered and
// those the socket has received. A frame's buffer grows by it at once
// (wire.Grow), so a large request the client has sent is read in as few
// calls, and copied as few times, as its arrival allows.
func (in *clientIn) Queued() int {
	n := in.Buffered()
	if in.raw != nil {
		n += in.raw.Queued()
	}
	return n
}

func (in *clientIn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if in.r == in.w {
		if in.raw == nil || len(p) >= clientBufSize {
			return in.nc.Read(p)
		}
		n, err := in.raw.Fill(in)
		if n == 0 {
			return 0, err
		}
		in.r, in.w = 0, n
	}
	n := copy(p, in.buf[in.r:in.w])
	in.consume(n)
	return n, nil
}

// ReadOwn is Read into p, a buffer the caller keeps (a window it scans):
// bytes already buffered come first, and otherwise the socket is read
// straight into p, whatever its size, not through the buffer, whose copy
// would leave what p had no room for to a call of its own.
func (in *clientIn) ReadOwn(p []byte) (int, error) {
	if in.r < in.w || len(p) == 0 {
		return in.Read(p)
	}
	return in.nc.Read(p)
}

// Next returns up to n buffered bytes and consumes them; the slice is
// valid until the next call.
func (in *clientIn) Next(n int) []byte {
	n = min(n, in.w-in.r)
	b := in.buf[in.r : in.r+n : in.r+n]
	in.r += n
	return b
}

// Done gives the buffer back once everything in it is consumed; the bytes
// Next returned must be used by then.
func (in *clientIn) Done() {
	if in.r == in.w {
		in.release()
	}
}

func (in *clientIn) consume(n int) {
	in.r += n
	in.Done()
}

// Lend returns the buffer for raw to read into, taking one from the pool
// if none is held.
func (in *clientIn) Lend() []byte {
	if in.buf == nil {
		in.buf = clientBufs.Get().(*[clientBufSize]byte)
	}
	return in.buf[:]
}

// Reclaim is release, for raw.
func (in *clientIn) Reclaim() { in.release() }

// release gives the buffer back to the pool, dropping whatever it holds.
func (in *clientIn) release() {
	if in.buf != nil {
		clientBufs.Put(in.buf)
		in.buf = nil
	}
	in.r, in.w = 0, 0
}
