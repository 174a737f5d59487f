package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/inorder-proxy/inorder/quota"
	"github.com/inorder-proxy/inorder/wire"
)

// readClient reads requests until the client stops, and sequences and
// forwards each. It returns why it stopped.
func (c *conn) readClient() error {
	var lenBuf [4]byte
	maxReq := c.cfg.MaxRequestSize
	defer c.dropStream()
	defer func() {
		if c.splicer != nil {
			c.splicer.Close()
		}
	}()
	for {
		if err := c.waitCapacity(); err != nil {
			return err
		}
		if err := c.quotaMute(); err != nil {
			return err
		}
		limit := c.frameLimit(maxReq)
		size, err := c.readPrefix(&lenBuf, limit)
		if err != nil {
			c.endFrame()
			if limit < maxReq && errors.Is(err, wire.ErrFrameTooLarge) {
				return c.unauthenticatedFrame(limit)
			}
			return c.clientReadError(err)
		}
		r, readErr, err := c.readRequest(size, &lenBuf)
		if readErr != nil {
			c.endFrame()
			return c.clientReadError(readErr)
		}
		if err != nil {
			c.endFrame()
			c.finishInFlight()
			return err
		}
		// The proxy's time on the request starts once its frame is
		// read, when request_percentage is configured at all.
		var start time.Time
		if c.p.quotas.RequestOn() {
			start = time.Now()
		}
		if err := c.screen(r); err != nil {
			putRequest(r)
			c.endFrame()
			c.finishInFlight()
			return err
		}
		if err := c.quotaRequest(r); err != nil {
			putRequest(r)
			c.endFrame()
			c.finishInFlight()
			return err
		}
		if err := c.beforeSubmit(); err != nil {
			putRequest(r)
			return err
		}
		c.requestRead(r)
		c.auditRead(r)
		// Only an answered request can go unread (unread.go); the
		// next is likely of the same kind.
		peekNext := r.stream > 0 && !r.noResp ||
			c.singleSplice && r.hdr.Key == keyProduce && r.frame != nil && len(r.frame.B) >= spliceMin
		spliced := r.stream > 0
		var timed *quota.Client
		var checked time.Duration
		if !start.IsZero() {
			timed, checked = c.requestQuota(r, start)
		}
		if c.submit(r) {
			c.endFrame()
			return c.stranded()
		}
		if c.peekedReq != nil {
			if err := c.takePeeked(); err != nil {
				c.endFrame()
				return err
			}
		}
		c.endFrame()
		if timed != nil && !spliced {
			// Forwarding it came after its throttle was decided: the
			// next request's check counts it. A spliced body's time
			// is the client's sending it, not the proxy's.
			took := time.Since(start)
			timed.AddRequestTime(start.Add(took), took-checked)
		}
		if peekNext {
			// The next request may well stream too: peek at it.
			c.uh.on = (c.splice || c.singleSplice) && !c.uh.never && c.clientPeeker() != nil
		}
		if err := c.afterSubmit(); err != nil {
			return err
		}
	}
}

// Large produce requests are spliced in connection mode: the proxy reads
// the first spliceHead bytes, which hold the header and acks, and the
// kernel moves the records from the client socket to the upstream socket
// without copying them through the proxy, as a plain TCP relay does.
const (
	spliceMin  = 32 << 10
	spliceHead = 1 << 10
)

// readRequest reads the request whose length prefix is in lenBuf and parses
// it. readErr is an error reading the client; err a request the proxy
// refuses.
func (c *conn) readRequest(size int32, lenBuf *[4]byte) (r *request, readErr, err error) {
	total := 4 + int(size)
	if c.uh.n > 0 && c.one != nil {
		r, readErr, err := c.unreadSingle(size, lenBuf)
		if r != nil || readErr != nil || err != nil {
			return r, readErr, err
		}
	} else if c.uh.n > 0 {
		r, readErr, err := c.unreadRequest(size, lenBuf)
		if r != nil || readErr != nil || err != nil {
			return r, readErr, err
		}
	}
	if c.streamReq && size >= spliceMin && !c.readsWhole(size) {
		head, ch, err := c.readFrame(lenBuf[:], 4+spliceHead, total)
		if err != nil {
			return nil, err, nil
		}
		if r := c.spliceable(head, size); r != nil {
			r.frameCharge = ch
			if err := c.reserveState(r); err != nil {
				putRequest(r)
				return nil, err, nil
			}
			return r, nil, nil
		}
		buf, ch, err := c.growFrame(head, ch, total)
		if err != nil {
			return nil, err, nil
		}
		return c.parseFrame(buf, ch)
	}
	buf, ch, err := c.readFrame(lenBuf[:], total, total)
	if err != nil {
		return nil, err, nil
	}
	return c.parseFrame(buf, ch)
}

// parseFrame parses buf, which holds ch of the budget: the request takes
// the charge, or it is released with the buffer.
func (c *conn) parseFrame(buf *wire.Buf, ch charge) (*request, error, error) {
	r, err := c.parseRequest(buf)
	if err != nil {
		wire.Put(buf)
		ch.Release(c.p.budget)
		return nil, nil, err
	}
	if r.frame == nil {
		// Answered by the proxy itself; buf is already back in its pool.
		ch.Release(c.p.budget)
	} else {
		r.frameCharge = ch
	}
	if err := c.reserveState(r); err != nil {
		putRequest(r)
		return nil, err, nil
	}
	return r, nil, nil
}

func (c *conn) clientReadError(err error) error {
	switch {
	case c.dead.Load():
		return nil
	case c.draining.Load():
		return c.waitIdle()
	case errors.Is(err, io.EOF):
		// The client may half-close after pipelining, or close after
		// acks=0 writes it expects no answer to; Kafka still processes
		// what it read, so the proxy forwards it and delivers what can
		// be delivered before closing.
		c.finishInFlight()
		return errClientEOF
	case errors.Is(err, net.ErrClosed):
		return errClientClosed
	case errors.Is(err, ErrReadTimeout), errors.Is(err, ErrIdleTimeout):
		return err
	case errors.Is(err, ErrMemory):
		c.finishInFlight()
		return err
	case errors.Is(err, wire.ErrNotKafka):
		c.finishInFlight()
		return fmt.Errorf("%w: %w", ErrBadRequest, strangerOnListener(err))
	case errors.Is(err, wire.ErrFrameTooLarge):
		c.finishInFlight()
		return fmt.Errorf("%w: %w (--max-request-size)", ErrBadRequest, err)
	case errors.Is(err, wire.ErrFrameTooSmall), errors.Is(err, wire.ErrTruncated):
		c.finishInFlight()
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return fmt.Errorf("%w: %w", errClientRead, err)
}

// waitCapacity blocks while the connection holds as much as it may: the
// client is not read, and TCP pushes back on it.
func (c *conn) waitCapacity() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	paused, why := c.pauseStartLocked()
	if c.seq.Full() {
		c.pauseRead()
		defer c.resumeRead()
	}
	for c.seq.Full() && !c.dead.Load() && !c.draining.Load() {
		c.cond.Wait()
	}
	c.pauseEnd(paused, why)
	if c.dead.Load() {
		return c.reason
	}
	return nil
}

// waitIdle waits, during shutdown, for every in-flight response to be
// delivered.
func (c *conn) waitIdle() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.seq.Idle() && !c.dead.Load() {
		c.cond.Wait()
	}
	return ErrShutdown
}

// stranded ends the client reader after submit reported a request whose
// body did not follow its head. The connection is ending, and what was
// forwarded before may still be answered: if the client broke the body
// off (cutOff), the upstream waits for the rest of that frame but answers
// the requests before it, and those are delivered; if the upstream failed,
// whatever it answered before failing is.
func (c *conn) stranded() error {
	c.mu.Lock()
	cut, at := c.cut, c.cutAt
	c.mu.Unlock()
	if cut == nil {
		c.finishInFlight()
		return errStranded
	}
	c.finishBefore(at)
	return cut
}

// finishBefore waits, bounded by eofDrain, for every request before seq to
// be answered and its response delivered.
func (c *conn) finishBefore(seq uint64) {
	t := time.AfterFunc(eofDrain, func() { c.die(errEOFDrain) })
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.seq.Head() < seq && !c.dead.Load() {
		c.cond.Wait()
	}
}

// finishInFlight waits, bounded by eofDrain, for the requests read before
// the client's EOF or bad frame to complete and their responses to be
// delivered, so that what was well formed is answered before the close.
// The client reader alone pushes, and it waits here: nothing is pushed
// meanwhile.
func (c *conn) finishInFlight() {
	c.mu.Lock()
	next := c.seq.Next()
	c.mu.Unlock()
	c.finishBefore(next)
}
