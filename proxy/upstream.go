package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// startReaderLocked starts the upstream reader if a forwarded request
// awaits its response and no reader runs. The reader ends when nothing is
// in flight, so an idle connection parks one goroutine, not two.
func (c *conn) startReaderLocked() {
	if c.reading || c.seq.InFlight() == 0 || c.dead.Load() || c.one != nil {
		return
	}
	c.reading = true
	c.wg.Add(1)
	go c.readUpstream()
}

// readUpstream reads responses until nothing is in flight, the upstream
// fails, or the connection dies, matching each to its request by
// correlation id.
func (c *conn) readUpstream() {
	defer c.wg.Done()
	if err := c.readUpstreamLoop(); err != nil {
		c.die(err)
	}
}

// readerLinger is how long an upstream reader with nothing in flight waits
// for the next response before it ends. A client that sends its next
// request as soon as it has a response (a consumer's fetch loop, a
// producer with one request in flight) then finds the reader waiting on
// the socket, instead of starting a goroutine per request whose stack
// grows again each time. An idle connection holds a reader this long
// after its last response, then none.
const readerLinger = 20 * time.Millisecond

// idle reports what the reader does when no forwarded request awaits a
// response: linger for the next one (once, if mayLinger and nothing needs
// the upstream quiet), or end. A reader that ends clears c.reading.
func (c *conn) idle(mayLinger bool) (end, linger bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq.InFlight() > 0 && !c.dead.Load() {
		return false, false
	}
	if mayLinger && !c.quietWanted && !c.dead.Load() {
		c.lingering = true
		return false, true
	}
	c.reading = false
	c.cond.Broadcast() // for waitQuiet
	return true, false
}

// awaitNext waits, for at most readerLinger, until the upstream sends
// something, and consumes nothing. What arrived, or why nothing did, the
// loop learns next: a response is read, bytes nothing asked for end the
// connection, and an upstream that closed while idle is noticed as before
// (upstreamClosedWhileIdle). waitQuiet cuts the wait short by moving the
// deadline while c.lingering is set, which is why the deadline is cleared
// only after lingering is.
func (c *conn) awaitNext(rd *bufio.Reader) {
	c.up.SetReadDeadline(time.Now().Add(readerLinger))
	rd.Peek(1)
	c.mu.Lock()
	c.lingering = false
	c.mu.Unlock()
	c.up.SetReadDeadline(time.Time{})
}

// upstreamReaders buffer the upstream side while a reader runs, so a small
// response takes one read call instead of two; large bodies bypass the
// buffer. Idle connections hold none.
var upstreamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// readUpstreamLoop reads responses until the reader ends (see idle) or
// fails. A response whose successor is already whole in the reader's
// buffer is recorded but not delivered at once: the successor is read
// first, from memory, and both go to the client in one write, as a relay
// would pass them on in one read. Holding back waits for nothing but the
// buffer: what is held is delivered before the reader reads the socket,
// streams a response, waits for memory (frameAccount.before) or fails.
// c.undelivered belongs to the reader, which touches it only before idle
// can end it.
func (c *conn) readUpstreamLoop() error {
	var (
		lenBuf [4]byte
		head   [8]byte // length prefix and correlation id
	)
	rd := upstreamReaders.Get().(*bufio.Reader)
	rd.Reset(c.up)
	defer func() {
		rd.Reset(nil)
		upstreamReaders.Put(rd)
	}()
	lingered := false
	for {
		if c.undelivered && !wholeFrameBuffered(rd) {
			if err := c.deliverUndelivered(); err != nil {
				return err
			}
		}
		// A response held back means the next frame is buffered and
		// read at once, whatever idle would say.
		if !c.undelivered {
			// Bytes already buffered with nothing in flight end
			// the connection below, so they rule out lingering.
			end, linger := c.idle(!lingered && rd.Buffered() == 0)
			if end && rd.Buffered() > 0 {
				// Nothing is in flight, so these bytes answer
				// nothing the proxy sent.
				return fmt.Errorf("%w: %d %w", ErrUpstreamProtocol, rd.Buffered(), errUnsolicited)
			}
			if end {
				return nil
			}
			if linger {
				lingered = true
				c.awaitNext(rd)
				continue
			}
		}
		lingered = false
		if err := c.readResponse(rd, &lenBuf, &head); err != nil {
			// What was held back precedes the failure, and is
			// delivered as it would have been before it.
			_ = c.deliverUndelivered()
			return err
		}
	}
}

// readResponse reads one response and records it, delivering it unless the
// next one is already buffered (then c.undelivered is set).
func (c *conn) readResponse(rd *bufio.Reader, lenBuf *[4]byte, head *[8]byte) error {
	// The length and correlation id first: they say whether the body can
	// be streamed to the client instead of read.
	size, err := wire.ReadLength(rd, lenBuf, wire.MinResponseFrame, c.cfg.MaxResponseSize)
	if err == nil {
		copy(head[:], lenBuf[:])
		err = wire.ReadBody(rd, head[4:])
	}
	if err != nil {
		return c.upstreamReadError(err)
	}
	corr := wire.ResponseCorrelation(head[:])
	c.mu.Lock()
	seq, ok := c.sequenceOf(corr)
	var r *request
	if ok {
		r, _ = c.seq.Get(seq)
	}
	c.answeredLocked(r, corr)
	// Checked under the lock: a request already answered (a duplicate
	// id) may be delivered and recycled by another goroutine the moment
	// the lock is released. One that is not answered stays live until
	// this reader completes it.
	known := r != nil && r.resp == nil && r.upCorr == corr
	// Owed next stays true until this reader completes r; ahead may turn
	// into owed meanwhile, which only makes the charge's class stricter
	// than it needs to be.
	owed := known && c.seq.NextOwed(seq)
	c.mu.Unlock()
	if !known {
		return fmt.Errorf("%w: %w %d", ErrUpstreamProtocol, errUnknownCorrelation, corr)
	}
	var sent uint64 // r's place in write order, for the verifier
	if c.verify != nil {
		sent = c.verify.Answered(r.hdr, r.upCorr)
	}
	c.quotaResponse(r, size)
	if r.throttle == 0 && c.streamable(r, size) {
		if err := c.deliverUndelivered(); err != nil {
			return err
		}
		streamed, err := c.streamResponse(r, rd, head, size)
		if err != nil {
			return err
		}
		if streamed {
			c.streamed(r)
			// Delivered already: the sequencer only has to learn
			// it, and sends nothing more.
			return c.complete(r, noResponse)
		}
	}
	acct := c.respAccount(owed, 4+int(size))
	buf, err := wire.Start(head[:], 4+int(size), acct)
	if err == nil {
		buf, err = wire.Grow(rd, buf, 4+int(size), acct, wire.TrustedGrowFactor)
	}
	if err != nil {
		return c.upstreamReadError(err)
	}
	// The proxy's time on the answer starts once it is read whole.
	var answerAt time.Time
	if r.timed != nil {
		answerAt = time.Now()
	}
	ch := acct.Charge(cap(buf.B))
	if c.verify != nil {
		c.verify.Inspect(r.hdr, r.upCorr, buf.B, sent)
	}
	resp, err := c.response(r, buf)
	if err != nil {
		ch.Release(c.p.budget)
		return err
	}
	if r.timed != nil {
		// Before record: once recorded, r may be delivered and
		// recycled by another goroutine.
		took := time.Since(answerAt) // the monotonic clock alone
		r.timed.AddRequestTime(answerAt.Add(took), took)
	}
	r.bud, r.respCharge = c.p.budget, ch
	if err := c.record(r, resp); err != nil {
		return err
	}
	c.undelivered = true
	if wholeFrameBuffered(rd) {
		return nil
	}
	return c.deliverUndelivered()
}

// wholeFrameBuffered reports whether rd holds the whole of the next frame,
// going by its length prefix.
func wholeFrameBuffered(rd *bufio.Reader) bool {
	n := rd.Buffered()
	if n < 4 {
		return false
	}
	b, _ := rd.Peek(4)
	size := int32(binary.BigEndian.Uint32(b))
	return size >= 0 && int64(n)-4 >= int64(size)
}

// deliverUndelivered delivers the responses the upstream reader completed
// without delivering; upstream reader only.
func (c *conn) deliverUndelivered() error {
	if !c.undelivered {
		return nil
	}
	c.undelivered = false
	return c.deliver()
}

func (c *conn) upstreamReadError(err error) error {
	if c.dead.Load() {
		return c.cause()
	}
	if errors.Is(err, ErrMemory) {
		return err
	}
	if errors.Is(err, wire.ErrNotKafka) {
		return fmt.Errorf("%w: %w", ErrUpstreamProtocol, strangerFromUpstream(err))
	}
	if errors.Is(err, wire.ErrFrameTooLarge) {
		return fmt.Errorf("%w: %w (--max-response-size)", ErrUpstreamProtocol, err)
	}
	if errors.Is(err, wire.ErrFrameTooSmall) {
		return fmt.Errorf("%w: %w", ErrUpstreamProtocol, err)
	}
	return fmt.Errorf("%w: read: %v", ErrUpstreamFailed, err)
}

// complete records r's response, releases what the sequencer lets go, and
// delivers what is ready.
func (c *conn) complete(r *request, resp *wire.Buf) error {
	if err := c.record(r, resp); err != nil {
		return err
	}
	return c.deliver()
}

// record records r's response and releases what the sequencer lets go;
// the response waits for a deliver.
func (c *conn) record(r *request, resp *wire.Buf) error {
	c.mu.Lock()
	if err := c.seq.Complete(r.seq); err != nil {
		c.mu.Unlock()
		wire.Put(resp)
		r.respCharge.Release(c.p.budget)
		return fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
	}
	// The sequencer dropped the request's key state at Complete.
	r.stateCharge.Release(c.p.budget)
	if r.noResp {
		wire.Put(resp)
		r.respCharge.Release(c.p.budget)
		r.resp = noResponse
		if r.failed != nil && c.poisoned == nil {
			c.poison, c.poisoned = r.seq, r.failed
		}
	} else {
		r.resp = resp
		c.seq.Hold(r.respLen())
	}
	c.dispatchLocked()
	// The write may have held a key a streaming request waits for
	// (extendKey).
	c.cond.Broadcast()
	// In Connection mode every request is released when it is pushed and
	// the client reader writes it; a completion releases nothing.
	async := c.mode == ordering.None && !c.flushing && len(c.outq) > 0
	if async {
		c.flushing = true
	}
	c.mu.Unlock()
	if async {
		c.flushReleased()
	}
	return nil
}

// flushReleased writes the requests a completion released; the caller
// has set c.flushing. The upstream reader writes what the socket takes at
// once itself, which spares a goroutine and its wake-up per completion; a
// goroutine writes the rest, since the reader must not wait for an
// upstream that may be waiting for it to read.
func (c *conn) flushReleased() {
	if !c.tryMade {
		c.tryMade = true
		if c.one == nil {
			c.tryUp = sockio.NewTryWriter(tcpConn(c.up))
		}
	}
	if c.tryUp == nil {
		c.p.flushHandOffs.Add(1)
		c.wg.Add(1)
		go c.flushAsync()
		return
	}
	c.flush(false, true)
}

// noResponse marks a completed request that sends nothing to the client:
// it expects no response, or its response was streamed.
var noResponse = &wire.Buf{}

// deliver writes every response at the head of the sequence to the client.
// Whoever completes the head calls it; wmu keeps one writer at a time, and
// since responses leave the sequencer in order under mu and are written in
// that order under wmu, no interleaving can reorder them.
func (c *conn) deliver() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		c.mu.Lock()
		head := c.seq.Head()
		c.ready = c.seq.Ready(c.ready[:0])
		var poisoned error
		if c.poisoned != nil && c.seq.Head() > c.poison {
			poisoned = c.poisoned
		}
		if len(c.ready) == 0 && c.seq.Head() != head {
			// Requests expecting no response left: capacity for
			// the client reader (waitCapacity).
			c.cond.Broadcast()
		}
		c.mu.Unlock()
		if len(c.ready) == 0 {
			if poisoned != nil {
				return fmt.Errorf("%w: %v", ErrAcksZeroFailed, poisoned)
			}
			return nil
		}
		c.outBufs = c.outBufs[:0]
		held := 0
		pieces := false
		inPipes := piped(c.ready)
		from := c.fromBuf[:0]
		for _, r := range c.ready {
			c.outBufs, from = r.appendResp(c.outBufs, from, inPipes)
			held += r.respLen()
			pieces = pieces || r.vec != nil
		}
		c.outW, c.outFrom = c.outBufs, nil
		if inPipes {
			c.outFrom, c.fromBuf = from, from
		}
		c.beginWrite()
		err := c.writeOut(pieces)
		c.endWrite()
		c.outFrom = nil
		clear(c.outBufs)
		clear(c.fromBuf)
		if err == nil {
			c.delivered(c.ready)
			c.auditDelivered(c.ready)
		} else {
			c.auditLose(c.ready...)
		}
		c.mu.Lock()
		c.seq.Free(held)
		c.cond.Broadcast()
		c.mu.Unlock()
		for _, r := range c.ready {
			putRequest(r)
		}
		clear(c.ready)
		if err != nil {
			if c.dead.Load() {
				return c.cause()
			}
			return fmt.Errorf("%w: client write: %v", errClientClosed, err)
		}
	}
}
