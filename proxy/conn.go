package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// lingerTimeout bounds how long a failing connection waits for the client
// to read the responses already written before the socket is closed.
const lingerTimeout = 2 * time.Second

// eofDrain bounds how long requests read before a client's EOF or bad
// frame may take to complete upstream.
const eofDrain = 30 * time.Second

// noCorrelation is the upstream correlation id of requests that expect no
// response; it is negative so that no live sequence number matches it.
const noCorrelation = -1

// conn is one client connection and its own upstream connection.
type conn struct {
	p      *Proxy
	client net.Conn
	up     net.Conn
	target target
	node   int32 // -1 on the bootstrap listener

	// mu guards seq, the upstream queue and the flags below it; cond
	// wakes the client reader when capacity frees or the conn dies.
	mu       sync.Mutex
	cond     sync.Cond
	seq      *ordering.Sequencer[*request]
	outq     []*request // dispatched, not yet written upstream
	flushing bool       // a goroutine is writing outq upstream
	reading  bool       // the upstream reader runs; see startReaderLocked
	splice   bool       // large produce bodies move socket to socket
	poison   uint64     // close once the head passes this seq (0: none)
	poisoned error

	// wmu makes the client writer one at a time; see deliver.
	wmu     sync.Mutex
	ready   []*request
	outBufs net.Buffers

	// Scratch of the one flusher at a time (see c.flushing).
	flushFrames []*wire.Buf
	flushBufs   net.Buffers

	wg       sync.WaitGroup // upstream reader and flushers
	dead     atomic.Bool
	draining atomic.Bool
	reason   error // set once by die

	dec *decoder // request bodies, used by the client reader only
}

func newConn(p *Proxy, nc net.Conn, t target) *conn {
	c := &conn{p: p, client: nc, target: t, node: t.node}
	c.cond.L = &c.mu
	c.seq = ordering.New[*request](p.mode, p.cfg.MaxInFlight, p.cfg.MaxBufferedBytes)
	return c
}

// serve runs the connection to its end: dial the upstream, read the client
// until it stops, then tear down through die, the one teardown path.
func (c *conn) serve() {
	defer c.p.untrack(c)
	err := c.connect()
	if err == nil {
		err = c.readClient()
	}
	c.die(err)
	c.wg.Wait()
	c.closeClient()
	c.release()
	c.logClose()
}

func (c *conn) connect() error {
	var (
		up  net.Conn
		err error
	)
	if c.target.resolve == nil {
		up, _, err = c.p.bootstrapUpstream()
	} else {
		addr := c.target.resolve()
		if up, err = c.p.dialUpstream(addr); err != nil {
			err = fmt.Errorf("node %d at %s: %v", c.node, addr, err)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUpstreamFailed, err)
	}
	// die may run concurrently (the proxy closing): the upstream is
	// published under the lock so that die closes it or never sees it.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead.Load() {
		up.Close()
		return ErrShutdown
	}
	c.up = up
	c.enableSplice()
	return nil
}

// enableSplice lets large produce requests bypass user space. Only
// connection mode qualifies: the request goes upstream as soon as it is
// read, by the goroutine that reads the client, and its body need not be
// understood.
func (c *conn) enableSplice() {
	_, clientTCP := c.client.(*net.TCPConn)
	_, upTCP := c.up.(*net.TCPConn)
	c.splice = c.p.mode == ordering.Connection && clientTCP && upTCP && !c.p.noSplice
}

// die records why the connection ends and unblocks every goroutine: the
// upstream closes, the client's write side closes after what was delivered,
// and the client reader wakes. Only the first call has an effect.
func (c *conn) die(reason error) {
	if !c.dead.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.reason = reason
	c.cond.Broadcast()
	up := c.up
	c.mu.Unlock()
	if up != nil {
		up.Close()
	}
	// Half-close so responses already written reach the client before the
	// socket closes; closing with unread input would reset the connection
	// and could drop them.
	if tc, ok := c.client.(*net.TCPConn); ok && !errors.Is(reason, errClientClosed) {
		tc.CloseWrite()
		tc.SetReadDeadline(time.Now().Add(lingerTimeout))
		return
	}
	c.client.Close()
}

// cause returns why the connection died, once die has run.
func (c *conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// closeClient drains what the client still sends until it closes or the
// linger ends, then closes the socket.
func (c *conn) closeClient() {
	if tc, ok := c.client.(*net.TCPConn); ok && !errors.Is(c.cause(), errClientClosed) {
		tc.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.Copy(io.Discard, io.LimitReader(tc, 1<<20))
	}
	c.client.Close()
}

// drain stops reading new requests; readClient then waits for the
// in-flight responses and returns ErrShutdown.
func (c *conn) drain() {
	c.draining.Store(true)
	c.client.SetReadDeadline(time.Now())
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}

// release returns the buffers of requests that never completed.
func (c *conn) release() {
	c.mu.Lock()
	left := c.seq.Drain(nil)
	c.mu.Unlock()
	for _, r := range left {
		r.free()
	}
}

func (c *conn) logClose() {
	reason := c.cause()
	attrs := []any{"client", c.client.RemoteAddr().String(), "node", c.node}
	switch {
	case reason == nil, errors.Is(reason, errClientClosed), errors.Is(reason, ErrShutdown):
		c.p.log.Debug("connection closed", append(attrs, "reason", reason)...)
	case errors.Is(reason, ErrBadRequest), errors.Is(reason, ErrUpstreamProtocol):
		c.p.log.Warn("connection closed", append(attrs, "reason", reason.Error())...)
	default:
		c.p.log.Info("connection closed", append(attrs, "reason", reason.Error())...)
	}
}

// readClient reads requests until the client stops, and sequences and
// forwards each. It returns why it stopped.
func (c *conn) readClient() error {
	var lenBuf [4]byte
	maxReq := c.p.cfg.MaxRequestSize
	for {
		if err := c.waitCapacity(); err != nil {
			return err
		}
		size, err := wire.ReadLength(c.client, &lenBuf, wire.MinRequestFrame, maxReq)
		if err != nil {
			return c.clientReadError(err)
		}
		r, readErr, err := c.readRequest(size, &lenBuf)
		if readErr != nil {
			return c.clientReadError(readErr)
		}
		if err != nil {
			c.finishInFlight()
			return err
		}
		c.submit(r)
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
	if c.splice && size >= spliceMin {
		head := wire.Get(4 + spliceHead)
		copy(head.B, lenBuf[:])
		if err := wire.ReadBody(c.client, head.B[4:]); err != nil {
			wire.Put(head)
			return nil, err, nil
		}
		if r := c.spliceable(head, size); r != nil {
			return r, nil, nil
		}
		buf := wire.Get(4 + int(size))
		copy(buf.B, head.B)
		wire.Put(head)
		if err := wire.ReadBody(c.client, buf.B[4+spliceHead:]); err != nil {
			wire.Put(buf)
			return nil, err, nil
		}
		return c.parseFrame(buf)
	}
	buf := wire.Get(4 + int(size))
	copy(buf.B, lenBuf[:])
	if err := wire.ReadBody(c.client, buf.B[4:]); err != nil {
		wire.Put(buf)
		return nil, err, nil
	}
	return c.parseFrame(buf)
}

func (c *conn) parseFrame(buf *wire.Buf) (*request, error, error) {
	r, err := c.parseRequest(buf)
	if err != nil {
		wire.Put(buf)
		return nil, nil, err
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
		return errClientClosed
	case errors.Is(err, net.ErrClosed):
		return errClientClosed
	case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrFrameTooSmall), errors.Is(err, wire.ErrTruncated):
		c.finishInFlight()
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return fmt.Errorf("client read: %w", err)
}

// waitCapacity blocks while the connection holds as much as it may: the
// client is not read, and TCP pushes back on it.
func (c *conn) waitCapacity() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.seq.Full() && !c.dead.Load() && !c.draining.Load() {
		c.cond.Wait()
	}
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

// finishInFlight waits, bounded by eofDrain, for the requests read before
// the client's EOF or bad frame to complete and their responses to be
// delivered, so that what was well formed is answered before the close.
func (c *conn) finishInFlight() {
	t := time.AfterFunc(eofDrain, func() { c.die(errEOFDrain) })
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.seq.Idle() && !c.dead.Load() {
		c.cond.Wait()
	}
}

// submit sequences r and writes whatever may now go upstream.
func (c *conn) submit(r *request) {
	local := false
	c.mu.Lock()
	if r.noResp && c.p.mode == ordering.Connection {
		// A request without a response leaves no state behind: it
		// only has to be written in order.
		r.upCorr = noCorrelation
		c.outq = append(c.outq, r)
	} else {
		r.seq = c.seq.Push(r.ord, r)
		r.upCorr = int32(r.seq & (1<<31 - 1))
		if r.frame != nil {
			c.seq.Hold(len(r.frame.B))
		}
		local = c.dispatchLocked()
		c.startReaderLocked()
	}
	flush := !c.flushing && len(c.outq) > 0
	if flush {
		c.flushing = true
	}
	c.mu.Unlock()
	if flush {
		c.flush()
	}
	if local {
		if err := c.deliver(); err != nil {
			c.die(err)
		}
	}
}

// dispatchLocked moves every request the sequencer releases to the upstream
// queue; requests the proxy answers itself complete at once, and then it
// reports true.
func (c *conn) dispatchLocked() (local bool) {
	start := len(c.outq)
	c.outq = c.seq.Dispatch(c.outq)
	kept := c.outq[:start]
	for _, r := range c.outq[start:] {
		if r.local != nil {
			r.resp = r.local
			r.local = nil
			c.seq.Hold(len(r.resp.B))
			c.seq.Complete(r.seq)
			local = true
			continue
		}
		kept = append(kept, r)
	}
	clear(c.outq[len(kept):])
	c.outq = kept
	return local
}

// flush writes the upstream queue until it is empty. The caller has set
// c.flushing; flush clears it. Request frames are taken from the queue
// under the lock and owned by flush from then on, since a fast upstream may
// answer and release a request before its write call returns.
func (c *conn) flush() {
	c.mu.Lock()
	frames, bufs := c.flushFrames[:0], c.flushBufs[:0]
	c.mu.Unlock()
	// The scratch goes back with the flushing flag, under the lock, so
	// the next flusher never shares it.
	done := func() {
		c.flushing = false
		c.flushFrames, c.flushBufs = frames[:0], bufs[:0]
	}
	for {
		c.mu.Lock()
		if c.dead.Load() || len(c.outq) == 0 {
			done()
			c.mu.Unlock()
			return
		}
		frames, bufs = frames[:0], bufs[:0]
		held, taken, stream := 0, 0, int64(0)
		for _, r := range c.outq {
			taken++
			frames = append(frames, r.frame)
			wire.SetRequestCorrelation(r.frame.B, r.upCorr)
			bufs = append(bufs, r.frame.B)
			stream = int64(r.stream)
			if r.upCorr == noCorrelation {
				r.frame = nil
				putRequest(r)
			} else {
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
		n := copy(c.outq, c.outq[taken:])
		clear(c.outq[n:])
		c.outq = c.outq[:n]
		c.mu.Unlock()

		// WriteTo consumes the slice it is called on; writing a copy
		// keeps bufs' backing array for the next batch.
		w := bufs
		_, err := w.WriteTo(c.up)
		clear(bufs)
		if err == nil && stream > 0 {
			err = c.spliceBody(stream)
		}
		for _, f := range frames {
			wire.Put(f)
		}
		clear(frames)
		c.mu.Lock()
		c.seq.Free(held)
		c.cond.Broadcast()
		c.mu.Unlock()
		if err != nil {
			c.mu.Lock()
			done()
			c.mu.Unlock()
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrShutdown) {
				err = fmt.Errorf("%w: write: %v", ErrUpstreamFailed, err)
			}
			c.die(err)
			return
		}
	}
}

// spliceBody moves the n bytes of a request body still in the client
// socket to the upstream. It runs only on the client reader, which alone
// reads the client; a short body leaves the upstream mid-frame, so any
// error ends the connection.
func (c *conn) spliceBody(n int64) error {
	copied, err := io.CopyN(c.up, c.client, n)
	switch {
	case err == nil:
		return nil
	case c.draining.Load():
		return fmt.Errorf("%w: a request was cut mid-body", ErrShutdown)
	case errors.Is(err, io.EOF) && copied < n:
		return fmt.Errorf("%w: %v", ErrBadRequest, wire.ErrTruncated)
	}
	return err
}

// flushAsync runs flush on its own goroutine, for callers that must not
// block on the upstream.
func (c *conn) flushAsync() {
	defer c.wg.Done()
	c.flush()
}

// startReaderLocked starts the upstream reader if a forwarded request
// awaits its response and no reader runs. The reader ends when nothing is
// in flight, so an idle connection parks one goroutine, not two.
func (c *conn) startReaderLocked() {
	if c.reading || c.seq.InFlight() == 0 || c.dead.Load() {
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

// idle ends the reader when no forwarded request awaits a response.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq.InFlight() > 0 && !c.dead.Load() {
		return false
	}
	c.reading = false
	return true
}

// upstreamReaders buffer the upstream side while a reader runs, so a small
// response takes one read call instead of two; large bodies bypass the
// buffer. Idle connections hold none.
var upstreamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

func (c *conn) readUpstreamLoop() error {
	var lenBuf [4]byte
	maxResp := c.p.cfg.MaxResponseSize
	rd := upstreamReaders.Get().(*bufio.Reader)
	rd.Reset(c.up)
	defer func() {
		rd.Reset(nil)
		upstreamReaders.Put(rd)
	}()
	for {
		if c.idle() {
			if rd.Buffered() > 0 {
				// Nothing is in flight, so these bytes answer
				// nothing the proxy sent.
				return fmt.Errorf("%w: %d bytes with no request in flight", ErrUpstreamProtocol, rd.Buffered())
			}
			return nil
		}
		buf, err := wire.ReadFrame(rd, &lenBuf, wire.MinResponseFrame, maxResp)
		if err != nil {
			if c.dead.Load() {
				return c.cause()
			}
			if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrFrameTooSmall) {
				return fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
			}
			return fmt.Errorf("%w: read: %v", ErrUpstreamFailed, err)
		}
		corr := wire.ResponseCorrelation(buf.B)
		c.mu.Lock()
		seq, ok := c.seq.Lookup(corr)
		var r *request
		if ok {
			r, _ = c.seq.Get(seq)
		}
		c.mu.Unlock()
		if r == nil || r.resp != nil || r.upCorr != corr {
			wire.Put(buf)
			return fmt.Errorf("%w: unexpected correlation id %d", ErrUpstreamProtocol, corr)
		}
		resp, err := c.response(r, buf)
		if err != nil {
			return err
		}
		if err := c.complete(r, resp); err != nil {
			return err
		}
	}
}

// complete records r's response, releases what the sequencer lets go, and
// delivers what is ready.
func (c *conn) complete(r *request, resp *wire.Buf) error {
	c.mu.Lock()
	if err := c.seq.Complete(r.seq); err != nil {
		c.mu.Unlock()
		wire.Put(resp)
		return fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
	}
	if r.noResp {
		wire.Put(resp)
		r.resp = noResponse
		if r.failed != nil && c.poisoned == nil {
			c.poison, c.poisoned = r.seq, r.failed
		}
	} else {
		c.seq.Hold(len(resp.B))
		r.resp = resp
	}
	c.dispatchLocked()
	async := !c.flushing && len(c.outq) > 0
	if async {
		c.flushing = true
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if async {
		go c.flushAsync()
	}
	return c.deliver()
}

// noResponse marks a completed request that sends nothing to the client.
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
		c.ready = c.seq.Ready(c.ready[:0])
		var poisoned error
		if c.poisoned != nil && c.seq.Head() > c.poison {
			poisoned = c.poisoned
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
		for _, r := range c.ready {
			c.outBufs = append(c.outBufs, r.resp.B)
			held += len(r.resp.B)
		}
		w := c.outBufs
		_, err := w.WriteTo(c.client)
		clear(c.outBufs)
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
