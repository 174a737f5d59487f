package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// In the single topology a large Produce from a TCP client is peeked at
// rather than read, so that its parts take their record sets from the
// client socket in the kernel (single/producesplice.go) and the proxy
// copies none of those bytes in or out. The peek copies every field and
// every small record set and passes the large ones uncopied
// (wire.PeekProduce over a sockio.PeekOffset), unless an audit trail
// reads the records, when it copies the whole frame (PeekAll). The
// request is then parsed, authorized and split from the copy as a read
// one is; its parts are written from the copy only once Take has read
// the frame into it.
//
// Only the client reader may take the bytes from the socket, so a
// flusher stops in front of the request and leaves it to the reader
// (flushSingle), which forwards it in its turn (forwardPeeked) and drops
// what its split left in the socket (takePeeked) before it reads
// anything after. The reader peeks at a request's head only after a
// large Produce (unread.go), as in the other topologies, and at a whole
// frame only when the socket can hold it at once; otherwise, or when the
// peek waits too long (singlePeekWait), the frame is read as any other.

// unreadSingle returns the request whose head was peeked at, its frame
// peeked at whole, if it can take its bytes from the socket: a Produce
// of at least spliceMin bytes the socket holds at once. Otherwise it
// takes the length prefix from the socket and returns nil: the caller
// reads the frame. readErr and err are readRequest's.
func (c *conn) unreadSingle(size int32, lenBuf *[4]byte) (r *request, readErr, err error) {
	total := 4 + int(size)
	head := c.uh.buf[:min(c.uh.n, total)]
	c.uh.drop()
	h, herr := wire.ParseRequestHeader(head)
	produce := herr == nil && h.Key == keyProduce
	if produce && size >= spliceMin && (c.peekBelow == 0 || total < c.peekBelow) {
		c.uh.misses = 0
		buf, ch, sparse, err := c.peekFrame(h, total)
		if err != nil {
			return nil, err, nil
		}
		if buf != nil {
			r, readErr, err := c.parseFrame(buf, ch)
			if r == nil || readErr != nil || err != nil {
				return r, readErr, err
			}
			if r.frame == nil {
				// Answered by the proxy itself: nothing goes
				// upstream.
				if _, err := c.peek.Discard(total); err != nil {
					putRequest(r)
					return nil, c.bodyReadError(err), nil
				}
				return r, nil, nil
			}
			c.p.producePeeks.Add(1)
			r.peekedBy = c
			c.mu.Lock()
			c.peekedReq, c.peekedLeft = r, total
			c.peekedSparse = sparse
			c.mu.Unlock()
			return r, nil, nil
		}
	}
	// A producer's small requests come between its large ones: the
	// peeks go on through a few of them.
	if c.uh.misses++; !produce || c.uh.misses > peekMisses {
		c.uh.on, c.uh.misses = false, 0
	}
	return nil, c.rereadPrefix(lenBuf), nil
}

// peekMisses is how many small Produce requests in a row the client
// reader peeks at before it stops peeking until the next large one: a
// peek that finds one costs a system call.
const peekMisses = 8

// peekFrame copies the next total bytes of the client socket, the frame
// of the Produce h begins, into a buffer charged to the budget, leaving
// them in the socket; nil when the socket cannot hold them at once, or
// they do not lay out as a Produce, and the frame is read instead.
// sparse: the record sets of single.SpliceFrom bytes or more were not
// copied (wire.PeekProduce), where the socket keeps a peek offset and no
// audit reads the records; then the frame must be read (Take) unless
// they are spliced.
func (c *conn) peekFrame(h wire.RequestHeader, total int) (_ *wire.Buf, _ charge, sparse bool, _ error) {
	acct := c.account(total)
	if err := acct.Reserve(wire.Cap(total)); err != nil {
		return nil, charge{}, false, c.timedOut(err)
	}
	ch := acct.Charge(wire.Cap(total))
	b := wire.Get(total)
	b.B = b.B[:total]
	// The peek waits at most singlePeekWait, then the frame is read: a
	// window that does not open for the whole frame (a path whose
	// packets cost the kernel more than the peek allowed for) must not
	// hold it until the read timeout.
	stall := time.Now().Add(singlePeekWait)
	byStall := c.frameDeadline.IsZero() || stall.Before(c.frameDeadline)
	if byStall {
		c.client.SetReadDeadline(stall)
	}
	// Where nothing reads the records (no audit trail), the large
	// record sets are passed uncopied.
	err := sockio.ErrNoOffset
	if c.aud.a == nil {
		var po *sockio.PeekOffset
		if po, err = c.peek.PeekFrom(total); err == nil {
			err = wire.PeekProduce(b.B, h.Body, h.Version, single.SpliceFrom, po)
			po.Close()
			sparse = err == nil
		}
	}
	if errors.Is(err, sockio.ErrNoOffset) {
		err = c.peek.PeekAll(b.B)
	}
	if byStall {
		c.client.SetReadDeadline(c.frameDeadline)
	}
	if err == nil {
		return b, ch, sparse, nil
	}
	wire.Put(b)
	ch.Release(c.p.budget)
	if byStall && errors.Is(err, os.ErrDeadlineExceeded) {
		// Its window did not open for it: no frame this large is
		// peeked at again on this connection.
		c.peekBelow = total
		return nil, charge{}, false, nil
	}
	// The socket cannot hold it yet (its buffer grows as TCP tunes it
	// to the connection's rate, so a later frame of the same size may
	// fit), or it does not lay out as a Produce: a read takes what
	// came, and says what is wrong with it.
	if errors.Is(err, sockio.ErrNoRoom) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, wire.ErrCannotScan) {
		return nil, charge{}, false, nil
	}
	return nil, charge{}, false, c.bodyReadError(err)
}

// singlePeekWait bounds a peek at a whole frame: at loopback speed a
// frame of 16 MiB arrives in about 10 ms, on a 1 Gb/s path in 130 ms.
const singlePeekWait = 500 * time.Millisecond

// forwardPeeked forwards r, the request peeked at, once the sequencer
// releases it, when the client reader's flush in submit did not: in None
// mode a write waits for the writes before it that share a partition to
// be answered, with its frame in the socket meanwhile, as a streamed one
// waits (awaitOpen); whatever the client sends after it would wait
// behind it anyway. What it waits for is the upstream's to answer, so
// the wait ends; the frame's read timeout restarts after it. It returns
// once the reader's flush took r (its split consumed the socket's bytes,
// or sent nothing and left them to takePeeked), or the connection stops
// forwarding. Client reader only.
func (c *conn) forwardPeeked(r *request) {
	c.mu.Lock()
	waited := false
	for !c.dead.Load() && c.poisoned == nil && c.writeErr == nil && !c.peekedTaken {
		if !c.flushing && len(c.outq) > 0 && c.outq[0] == r {
			c.flushing = true
			c.mu.Unlock()
			if waited {
				c.startFrame()
			}
			c.flush(true, false)
			c.mu.Lock()
			continue
		}
		if !waited {
			waited = true
			c.pauseRead()
			defer c.resumeRead()
		}
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// takePeeked drops what the client socket still holds of the request
// peeked at, when it went by without being forwarded or its split sent
// nothing of it, and writes what a flusher left waiting behind it.
// Client reader only.
func (c *conn) takePeeked() error {
	left := c.peekedLeft
	if left > 0 {
		if _, err := c.peek.Discard(left); err != nil {
			return c.bodyReadError(err)
		}
	}
	c.mu.Lock()
	c.peekedReq, c.peekedLeft, c.peekedTaken = nil, 0, false
	flush := left > 0 && !c.flushing && len(c.outq) > 0 && !c.dead.Load()
	if flush {
		c.flushing = true
	}
	c.mu.Unlock()
	if flush {
		c.flush(true, false)
	}
	return nil
}

// Unread is r's frame in the client socket, for the client reader's
// flush (single.Request).
func (r *request) Unread() single.Unread {
	c := r.peekedBy
	if c == nil {
		return nil
	}
	c.mu.Lock()
	mine := c.peekedReq == r && c.peekedLeft > 0
	c.mu.Unlock()
	if !mine {
		return nil
	}
	return peekedFrame{c}
}

// peekedFrame is the request frame c's client socket still holds
// (single.Unread).
type peekedFrame struct{ c *conn }

func (p peekedFrame) Len() int { return p.c.peekedLeft }

func (p peekedFrame) Take(frame []byte) error {
	c := p.c
	left := c.peekedLeft
	if !c.peekedSparse {
		return p.Discard(left)
	}
	// The copy lacks the record sets: the rest is read into it.
	_, err := io.ReadFull(c.client, frame[len(frame)-left:])
	p.took(left)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return c.bodyReadError(err)
	}
	return nil
}

func (p peekedFrame) Discard(n int) error {
	if n == 0 {
		return nil
	}
	c := p.c
	k, err := c.peek.Discard(n)
	p.took(k)
	if err != nil {
		return c.bodyReadError(err)
	}
	return nil
}

func (p peekedFrame) SpliceTo(nc net.Conn, n int) error {
	c := p.c
	dst, src := tcpConn(nc), tcpConn(c.client)
	if c.splicer == nil && dst != nil && src != nil {
		c.splicer, _ = sockio.NewSplicer()
	}
	if c.splicer == nil {
		k, err := copyN(nc, c.client, int64(n), &c.body)
		p.took(int(k))
		return p.spliceError(err)
	}
	taken, readErr, writeErr := c.splicer.Move(dst, src, n)
	p.took(taken)
	if writeErr != nil {
		// The broker's socket failed: what the pipe held of the
		// piece is lost with it, the rest of the piece is dropped, and
		// the client's stream goes on.
		c.splicer.Close()
		c.splicer = nil
		if err := p.Discard(n - taken); err != nil {
			return err
		}
		return fmt.Errorf("%w: %v", single.ErrPartWrite, writeErr)
	}
	if readErr != nil {
		return c.bodyReadError(readErr)
	}
	return nil
}

func (p peekedFrame) ParkTo(pipe *sockio.Pipe, n int) (int, error) {
	c := p.c
	src := tcpConn(c.client)
	if src == nil {
		return 0, single.ErrNoPark
	}
	got, err := pipe.From(src, n)
	p.took(got)
	if err != nil {
		return got, c.bodyReadError(err)
	}
	return got, nil
}

// spliceError names what a copy from the client socket, which cannot
// say which socket failed, failed on.
func (p peekedFrame) spliceError(err error) error {
	c := p.c
	switch {
	case err == nil:
		return nil
	case c.draining.Load(), errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), peerReset(c.client):
		return c.bodyReadError(err)
	}
	// The bytes between the two are lost, and the client's stream with
	// them.
	return fmt.Errorf("%w: write: %v", ErrUpstreamFailed, err)
}

// took counts n bytes of the frame taken from the socket.
func (p peekedFrame) took(n int) {
	c := p.c
	c.mu.Lock()
	c.peekedLeft -= n
	c.mu.Unlock()
}
