package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// submit sequences r and writes whatever may now go upstream. It reports
// whether r's body was to follow its head from the client socket and did
// not: the upstream failed, or an acks=0 write failed and nothing more is
// forwarded. The client stream is then mid-frame, and the caller must stop
// reading it.
func (c *conn) submit(r *request) (stranded bool) {
	local := false
	streamed := r.stream > 0
	// A request answered by the proxy itself (its frame dropped) is
	// never forwarded: its bytes are dropped after (takePeeked).
	peeked := r.peekedBy != nil && r.frame != nil
	c.mu.Lock()
	if r.noResp && c.mode == ordering.Connection {
		// A request without a response leaves no state behind: it
		// only has to be written in order.
		r.upCorr = noCorrelation
		c.outq = append(c.outq, r)
	} else {
		r.seq = c.seq.Push(r.ord, r)
		// The sequencer copied the keys; the scratch they came from
		// keeps nothing of a wide write (trimmed under the lock that
		// orders it before any answer to r).
		r.ord.Keys = nil
		c.dec.trim()
		if r.seq == 0 {
			c.corrBase = uint32(r.hdr.Correlation)
		}
		r.upCorr = c.upstreamCorrelation(r.seq)
		if r.frame != nil {
			c.seq.Hold(len(r.frame.B))
		}
		local = c.dispatchLocked()
		c.startReaderLocked()
	}
	if r.stream > 0 || peeked {
		// Only this goroutine may move the body still in the client
		// socket; a flusher stops in front of it and hands it back.
		for c.flushing && !c.dead.Load() {
			c.cond.Wait()
		}
	}
	flush := !c.flushing && len(c.outq) > 0
	if flush {
		c.flushing = true
	}
	c.mu.Unlock()
	spliced := false
	if flush {
		spliced = c.flush(true, false)
	}
	if peeked {
		// r, forwarded already, may be answered and gone: it is
		// compared, never read.
		c.forwardPeeked(r)
	}
	if local {
		if err := c.deliver(); err != nil {
			c.die(err)
		}
	}
	return streamed && !spliced
}

// dispatchLocked moves every request the sequencer releases to the upstream
// queue; requests the proxy answers itself complete at once, and then it
// reports true.
func (c *conn) dispatchLocked() (local bool) {
	if c.poisoned != nil {
		// A failed acks=0 write ends the connection, and Kafka
		// processes nothing after it: what is queued stays queued.
		return false
	}
	for {
		start := len(c.outq)
		c.outq = c.seq.Dispatch(c.outq)
		kept := c.outq[:start]
		completed := false
		for _, r := range c.outq[start:] {
			if r.local != nil {
				r.resp = r.local
				r.local = nil
				c.seq.Hold(len(r.resp.B))
				c.seq.Complete(r.seq)
				local, completed = true, true
				continue
			}
			kept = append(kept, r)
		}
		clear(c.outq[len(kept):])
		c.outq = kept
		if !completed {
			return local
		}
		// A completed barrier releases what waited behind it, which
		// may be answered locally too (a SaslHandshake, then its
		// SaslAuthenticate).
	}
}

// flush writes the upstream queue until it is empty, or, unless byReader,
// until a request whose body must be spliced from the client socket is at
// its head: that one is left for the client reader. The caller has set
// c.flushing; flush clears it, or hands it to the goroutine it starts. It
// reports whether it moved a body from the client socket. Request frames
// are taken from the queue under the lock and owned by flush from then on,
// since a fast upstream may answer and release a request before its write
// call returns.
//
// With try (the upstream reader, which must not wait for the upstream),
// each write is made once without waiting for room; when the socket does
// not take all of it, a goroutine finishes the write and the flush
// (finishFlush).
func (c *conn) flush(byReader, try bool) (spliced bool) {
	if c.one != nil {
		c.flushSingle(byReader)
		return false
	}
	c.mu.Lock()
	frames, bufs := c.flushFrames[:0], c.flushBufs[:0]
	c.mu.Unlock()
	// The scratch goes back with the flushing flag, under the lock, so
	// the next flusher never shares it.
	done := func() { c.flushDoneLocked(frames, bufs) }
	for {
		c.mu.Lock()
		if c.dead.Load() || c.writeErr != nil || len(c.outq) == 0 {
			done()
			c.mu.Unlock()
			return spliced
		}
		frames, bufs = frames[:0], bufs[:0]
		held, taken, stream := 0, 0, int64(0)
		scanBody, unread, streamSeq := false, false, uint64(0)
		var streamAud *capture.Req
		now, writes := c.p.metrics.Now(), 0
		var charged [2]charge // small, bulk: released once written
		for _, r := range c.outq {
			if r.stream > 0 && !byReader {
				break
			}
			taken++
			c.forwardedLocked(r, now)
			if r.ord.Kind == ordering.Write {
				writes++
			}
			if r.frame != nil {
				// Unread requests have none: the client's id is
				// the upstream's (unread.go).
				frames = append(frames, r.frame)
				wire.SetRequestCorrelation(r.frame.B, r.upCorr)
				bufs = append(bufs, r.frame.B)
			}
			if c.verify != nil && r.upCorr != noCorrelation {
				c.verify.Sent(r.hdr.Key, r.upCorr)
			}
			stream = int64(r.stream)
			scanBody = r.scanBody
			if stream > 0 {
				streamSeq, streamAud = r.seq, r.aud
				if r.upCorr == noCorrelation {
					// Not sequenced: everything sequenced
					// so far precedes it.
					streamSeq = c.seq.Next()
				}
			}
			unread = r.frame == nil && r.stream > 0
			if ch := &r.frameCharge; ch.N > 0 {
				i := 0
				if ch.Bulk {
					i = 1
				}
				charged[i].N += ch.N
				charged[i].Bulk = ch.Bulk
				*ch = charge{}
			}
			if r.upCorr == noCorrelation {
				r.frame = nil
				if r.aud != nil {
					c.unanswered = append(c.unanswered, r)
				} else {
					putRequest(r)
				}
			} else if r.frame != nil {
				held += len(r.frame.B)
				r.frame = nil
			}
			if stream > 0 {
				// The rest of this request is still in the client
				// socket: it must follow its head before anything
				// else is written.
				break
			}
		}
		if taken == 0 {
			done()
			c.mu.Unlock()
			return spliced
		}
		n := copy(c.outq, c.outq[taken:])
		clear(c.outq[n:])
		c.outq = c.outq[:n]
		c.mu.Unlock()

		var err error
		rest := stream
		switch {
		case try && stream == 0:
			var left net.Buffers
			left, err = c.tryUp.Write(bufs)
			if err == nil && left != nil {
				c.p.flushHandOffs.Add(1)
				c.wg.Add(1)
				go c.finishFlush(&flushTail{frames: frames, bufs: bufs, left: left,
					charged: charged, held: held, writes: writes, now: now})
				return false
			}
		case scanBody:
			// The body follows at once, scanned.
			err = c.writeUpBefore(bufs)
		default:
			bufs, rest, err = c.writeHead(bufs, stream)
		}
		clear(bufs)
		if err == nil && stream > 0 {
			kind := metrics.StreamedRequestSpliced
			switch {
			case unread:
				kind = metrics.StreamedRequestUnread
			case scanBody:
				kind = metrics.StreamedRequestScanned
			}
			if scanBody {
				err = c.streamProduce(streamSeq, streamAud)
			} else if rest > 0 {
				err = c.spliceRest(rest)
			}
			spliced = err == nil
			if spliced {
				c.p.metrics.Stream(kind)
			}
		}
		c.written(frames, &charged, held, writes, now, err)
		c.auditUnanswered(err == nil)
		if err != nil {
			c.mu.Lock()
			done()
			c.mu.Unlock()
			clientsFault := errors.Is(err, ErrBadRequest) || errors.Is(err, ErrShutdown) || errors.Is(err, ErrReadTimeout)
			switch {
			case clientsFault && byReader && stream > 0:
				// The client broke off a body, which only the
				// client reader moves.
				c.cutOff(err, streamSeq)
			case clientsFault, errors.Is(err, ErrUpstreamProtocol), errors.Is(err, errClientRead):
				c.die(err)
			default:
				c.writeFailed(fmt.Errorf("%w: write: %v", ErrUpstreamFailed, err))
			}
			return false
		}
	}
}

// flushDoneLocked ends a flush: the flushing flag goes, and the scratch
// goes back with it, so the next flusher never shares it.
func (c *conn) flushDoneLocked(frames []*wire.Buf, bufs net.Buffers) {
	c.flushing = false
	c.flushFrames, c.flushBufs = frames[:0], bufs[:0]
	c.cond.Broadcast()
}

// written settles what one write upstream took from the queue: its
// frames go back to their pool, their charges to the budget, and what they
// held to the sequencer.
func (c *conn) written(frames []*wire.Buf, charged *[2]charge, held, writes int, now time.Time, err error) {
	if err == nil {
		c.forwardWritten(writes, now)
	}
	for _, f := range frames {
		wire.Put(f)
	}
	clear(frames)
	charged[0].Release(c.p.budget)
	charged[1].Release(c.p.budget)
	c.mu.Lock()
	c.seq.Free(held)
	c.cond.Broadcast()
	c.mu.Unlock()
}

// flushTail is a write the upstream socket did not take whole when the
// upstream reader tried it: left is what is still to go, the rest what
// written settles once it has.
type flushTail struct {
	frames       []*wire.Buf
	bufs, left   net.Buffers
	charged      [2]charge
	held, writes int
	now          time.Time
}

// finishFlush writes the rest of t, waiting for room, then goes on with
// the flush it was part of; it holds the flushing flag meanwhile.
func (c *conn) finishFlush(t *flushTail) {
	defer c.wg.Done()
	c.flushW = t.left
	_, err := c.flushW.WriteTo(c.up)
	clear(t.bufs)
	c.written(t.frames, &t.charged, t.held, t.writes, t.now, err)
	c.auditUnanswered(err == nil)
	c.mu.Lock()
	if err != nil {
		c.flushDoneLocked(t.frames, t.bufs)
		c.mu.Unlock()
		c.writeFailed(fmt.Errorf("%w: write: %v", ErrUpstreamFailed, err))
		return
	}
	c.flushFrames, c.flushBufs = t.frames[:0], t.bufs[:0]
	c.mu.Unlock()
	c.flush(false, false)
}

// writeFailed ends the connection after a failed upstream write. An
// upstream that fails (a reset, a close) has often answered earlier
// requests first, and those responses may still be unread in the socket:
// when the upstream reader runs, it reads them and delivers them in order
// until the socket reports the failure itself, and that ends the
// connection. lingerTimeout bounds the wait for an upstream that stops
// taking requests but never fails its reads.
func (c *conn) writeFailed(err error) {
	c.mu.Lock()
	if c.writeErr == nil {
		c.writeErr = err
	}
	reading := c.reading
	c.mu.Unlock()
	if !reading {
		c.die(err)
		return
	}
	time.AfterFunc(lingerTimeout, func() { c.die(err) })
}

// cutOff records that the client broke off the body of the request at seq
// after its head had gone upstream: nothing more is written upstream, and
// the client reader, once submit reports the request stranded, lets the
// requests before seq be answered and delivered before it ends the
// connection with err (stranded).
func (c *conn) cutOff(err error, seq uint64) {
	c.mu.Lock()
	if c.writeErr == nil {
		c.writeErr = err
	}
	if c.cut == nil {
		c.cut, c.cutAt = err, seq
	}
	c.mu.Unlock()
}

// writeUpBefore writes bufs upstream just before more of the same frame
// is sent, with MSG_MORE where the platform has it (sockio.MoreWriter).
// Its writer is made on first use, so idle connections hold none.
func (c *conn) writeUpBefore(bufs net.Buffers) error {
	if c.toUp == nil {
		c.toUp = sockio.NewMoreWriter(tcpConn(c.up))
	}
	if c.toUp == nil {
		// A copy: WriteTo's receiver escapes, and bufs itself would
		// then be moved to the heap on every call.
		w := bufs
		_, err := w.WriteTo(c.up)
		return err
	}
	return c.toUp.Write(bufs)
}

// writeHead writes bufs upstream together with as much of the next n
// bytes of the request body as the client reader's buffer holds, and
// reports how many are still in the client socket; it returns bufs, whose
// array the caller keeps. A body still in the socket follows at once,
// spliced (spliceRest), so the head then goes with MSG_MORE. Whoever
// flushes calls it; with n > 0 that is the client reader, which alone
// moves a body from the client socket.
func (c *conn) writeHead(bufs net.Buffers, n int64) (net.Buffers, int64, error) {
	rest := n
	if n > 0 && c.in.Buffered() > 0 {
		b := c.in.Next(int(min(int64(c.in.Buffered()), n)))
		bufs, rest = append(bufs, b), n-int64(len(b))
	}
	var err error
	switch {
	case len(bufs) == 0:
	case rest > 0:
		err = c.writeUpBefore(bufs)
	default:
		// WriteTo consumes the slice it is called on; handing it
		// c.flushW keeps bufs' backing array.
		c.flushW = bufs
		_, err = c.flushW.WriteTo(c.up)
	}
	if rest < n {
		c.in.Done()
	}
	return bufs, rest, err
}

// spliceRest splices the next n bytes of a request body, none of them in
// the client reader's buffer, from the client socket to the upstream; over
// TLS it copies them (copyRest). A short body leaves the upstream
// mid-frame, so any error ends the connection.
func (c *conn) spliceRest(n int64) error {
	if !c.splice {
		return c.copyRest(n)
	}
	copied, err := copyN(c.up, c.client, n, &c.body)
	switch {
	case err == nil:
		return nil
	case c.draining.Load():
		return fmt.Errorf("%w: a request was cut mid-body", ErrShutdown)
	case errors.Is(err, io.EOF) && copied < n:
		return fmt.Errorf("%w: %v", ErrBadRequest, wire.ErrTruncated)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Only the client socket has a deadline: the body did not
		// arrive within the read timeout.
		return c.timedOut(err)
	case peerReset(c.client):
		// A splice does not say which socket failed; the client's
		// has, so nothing more can reach the client.
		return fmt.Errorf("%w: %w", errClientRead, err)
	}
	return err
}

// copyRest is spliceRest where a side is not a TCP socket: the body goes
// through one chunk of at most streamChunk bytes charged to the memory
// budget, as a streamed response does over TLS: a whole chunk read from
// the client in a few calls and written upstream in one, so that a
// request is never held whole for want of a splice. Measured with TLS
// clients producing at saturation (four rounds), chunks of 64 KiB written
// as each TLS record was read cost 18% (connection mode) and 31% (none
// mode) more CPU per byte than reading requests whole, a write upstream
// per record; whole chunks of 1 MiB cost 0.99 and 1.04 times as much.
func (c *conn) copyRest(n int64) error {
	size := wire.Cap(int(min(n, streamChunk)))
	acct := c.account(size)
	if err := acct.Reserve(size); err != nil {
		return c.timedOut(err)
	}
	defer acct.Release(size)
	chunk := wire.Get(size)
	defer wire.Put(chunk)
	for n > 0 {
		b := chunk.B[:min(n, int64(len(chunk.B)))]
		if _, err := io.ReadFull(c.client, b); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return c.bodyReadError(err)
		}
		if _, err := c.up.Write(b); err != nil {
			return err
		}
		n -= int64(len(b))
	}
	return nil
}

// copyN is io.CopyN through lr, which the caller owns and the call leaves
// empty: a splice per request, or per partition in None mode, allocates
// nothing.
func copyN(dst io.Writer, src io.Reader, n int64, lr *io.LimitedReader) (int64, error) {
	*lr = io.LimitedReader{R: src, N: n}
	copied, err := io.Copy(dst, lr)
	*lr = io.LimitedReader{}
	switch {
	case copied == n:
		return n, nil
	case err == nil:
		err = io.EOF
	}
	return copied, err
}

// flushAsync runs flush on its own goroutine, for callers that must not
// block on the upstream.
func (c *conn) flushAsync() {
	defer c.wg.Done()
	c.flush(false, false)
}
