package proxy

// This file holds the bounds that keep the proxy safe to expose: the
// process-wide memory budget as the connections see it, the connection cap,
// the idle and read timeouts, and the watch on idle upstream connections.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/wire"
)

// bulkFrame is the request frame size above which a frame's memory is
// reserved in the budget's bulk class: large frames together may not take
// the reserve kept for ordinary requests (see package budget).
const bulkFrame = 16 << 10

// responseWait bounds each wait of the upstream reader for memory. Client
// requests can never take the budget's response reserve, so a response
// waits only for memory other responses hold: those being written to their
// clients (bounded by the write timeout) and those held behind an earlier
// response that has not arrived. Those held may not take the reserve of
// the responses owed next (respAccount), so only a response read ahead of
// its turn waits on them, and on requests beside them. If these fill the
// budget for this long, the response closes its connection (ErrMemory),
// which releases what that connection holds, instead of waiting on what
// may be waiting on it. A variable only so that tests can shorten it
// (export_test.go).
var responseWait = 30 * time.Second

// upstreamCheckEvery is how often idle upstream connections are checked
// for a close by the upstream (a broker's own idle timeout, or a close
// after a failed acks=0 write).
const upstreamCheckEvery = 2 * time.Second

// refusedLogEvery spaces the log lines about connections refused at the
// cap; each line says how many were refused since the last.
const refusedLogEvery = 10 * time.Second

// connLimits are the bounds a connection takes from the configuration when
// it is accepted; a configuration changed later applies to new connections.
type connLimits struct {
	idle time.Duration // 0: no idle timeout
	read time.Duration // 0: no read timeout
	// write bounds a client write that moves no byte; 0: none
	// (clientwrite.go).
	write time.Duration
}

// frameAccount charges one connection's frame buffers to the budget in one
// class, giving up when the connection halts. Time spent waiting for memory
// is recorded as a read pause.
type frameAccount struct {
	p    *Proxy
	bulk bool
	// resp: the upstream reader's account, charged as responses, and each
	// wait bounded by responseWait.
	resp bool
	// ahead: with resp, for responses read ahead of one owed before them,
	// which may not take the budget's reserve for the responses owed next
	// (budget.NextShare).
	ahead bool
	stop  <-chan struct{}
	// deadline, when not nil, is the read deadline of the frame being
	// read: a frame that cannot get memory before it is shed like one
	// that does not arrive (client reader only).
	deadline *time.Time
	// before, when not nil, runs before a wait for memory: the upstream
	// reader delivers the responses it holds back, which may be what
	// the budget waits for.
	before func() error
}

func (a *frameAccount) Reserve(n int) error {
	if a.tryReserve(int64(n)) {
		return nil
	}
	if a.before != nil {
		if err := a.before(); err != nil {
			return err
		}
		if a.tryReserve(int64(n)) {
			return nil
		}
	}
	start := a.p.metrics.Now()
	var err error
	if a.resp {
		reserve := a.p.budget.ReserveResponse
		if a.ahead {
			reserve = a.p.budget.ReserveAhead
		}
		err = reserve(int64(n), a.stop, time.Now().Add(responseWait))
		if errors.Is(err, budget.ErrDeadline) {
			err = fmt.Errorf("%w: a response found no memory for %s (raise --max-memory)", ErrMemory, responseWait)
		}
	} else {
		var deadline time.Time
		if a.deadline != nil {
			deadline = *a.deadline
		}
		err = a.p.budget.Reserve(int64(n), a.bulk, a.stop, deadline)
	}
	if !start.IsZero() {
		a.p.metrics.ReadPaused(metrics.PauseMemory, time.Since(start))
	}
	if errors.Is(err, budget.ErrTooLarge) {
		return a.tooLarge(n)
	}
	return err
}

// tooLarge is the error for a frame that needs a buffer of n bytes, more
// than the budget can ever hold for one of its kind: only that connection
// ends, and the reason names the setting to raise.
func (a *frameAccount) tooLarge(n int) error {
	what, most := "a request", a.p.budget.Max(a.bulk)
	if a.resp {
		what, most = "a response", a.p.budget.MaxResponse()
		if a.ahead {
			most = a.p.budget.MaxAhead()
		}
	}
	return fmt.Errorf("%w: %s needs a buffer of %s, and --max-memory %s holds at most %s for one: raise --max-memory",
		ErrMemory, what, config.FormatSize(int64(n)), config.FormatSize(a.p.budget.Limit()), config.FormatSize(most))
}

func (a *frameAccount) tryReserve(n int64) bool {
	if a.resp && a.ahead {
		return a.p.budget.TryReserveAhead(n)
	}
	if a.resp {
		return a.p.budget.TryReserveResponse(n)
	}
	return a.p.budget.TryReserve(n, a.bulk)
}

func (a *frameAccount) Release(n int) {
	ch := a.Charge(n)
	ch.Release(a.p.budget)
}

// Charge returns n bytes reserved in a's class, for the buffer or request
// that keeps them. With Bulk it makes a frameAccount a single.Account: the
// single topology's connections charge the budget through it
// (single_host.go).
func (a *frameAccount) Charge(n int) charge {
	return charge{N: int64(n), Bulk: a.bulk, Resp: a.resp, Ahead: a.ahead}
}

func (a *frameAccount) Bulk() bool { return a.bulk }

// charge is memory reserved in the budget for one buffer or state: the
// budget's own Charge, which the single topology keeps as well.
type charge = budget.Charge

// account returns the client reader's account for a frame of total bytes.
func (c *conn) account(total int) *frameAccount {
	if total > bulkFrame {
		return &c.accts[1]
	}
	return &c.accts[0]
}

// upAccount returns the upstream reader's account for a frame of total
// bytes: responses are one class whatever their size.
func (c *conn) upAccount(total int) *frameAccount {
	return &c.accts[2]
}

// respAccount returns the upstream reader's account for a response frame
// of total bytes, owed next to the client or read ahead of one owed before
// it. A response ahead waits for that one, so it may not take the reserve
// kept for the responses owed next (budget.NextShare): however many are
// held on some connections, every other connection can still read the
// answer it owes next. One too large for what is left outside that
// reserve (a buffer and the one it grows into, at most twice its
// capacity) is charged as a response owed next.
func (c *conn) respAccount(owed bool, total int) *frameAccount {
	if owed || 2*int64(wire.Cap(total)) > c.p.budget.MaxAhead() {
		return &c.accts[2]
	}
	return &c.accts[3]
}

// initLimits reads the connection's bounds; called once, at accept.
func (c *conn) initLimits() {
	c.halt = make(chan struct{})
	c.lim = connLimits{idle: c.cfg.IdleTimeout, read: c.cfg.ReadTimeout, write: c.cfg.WriteTimeout}
	c.accts = [4]frameAccount{
		{p: c.p, stop: c.halt, deadline: &c.frameDeadline}, {p: c.p, bulk: true, stop: c.halt, deadline: &c.frameDeadline},
		{p: c.p, resp: true, stop: c.halt, before: c.deliverUndelivered},
		{p: c.p, resp: true, ahead: true, stop: c.halt, before: c.deliverUndelivered},
	}
}

// stop wakes everything the connection waits for on the budget; called by
// die.
func (c *conn) stop() {
	c.haltOnce.Do(func() { close(c.halt) })
}

// setReadDeadline sets the client read deadline unless the connection is
// draining or dying, whose own deadline (now) must stay in force.
func (c *conn) setReadDeadline(d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	c.client.SetReadDeadline(t)
	if c.draining.Load() || c.dead.Load() {
		c.client.SetReadDeadline(time.Now())
	}
}

// readPrefix reads a request's length prefix. While waiting for its first
// byte the idle timeout applies, and ends the connection only if nothing is
// in flight; from its first byte the whole frame has the read timeout.
func (c *conn) readPrefix(lenBuf *[4]byte, maxReq int32) (int32, error) {
	c.setReadDeadline(c.lim.idle)
	n := 0
	for n < 4 {
		var k int
		var err error
		if n == 0 && c.uh.on && c.in.Buffered() == 0 {
			// The frame may go upstream unread (unread.go).
			k, err = c.peekPrefix(lenBuf)
			if k >= 4 {
				c.startFrame()
				size, err := wire.CheckLength(lenBuf, wire.MinRequestFrame, maxReq)
				if err != nil {
					c.uh.drop()
				}
				return size, err
			}
			if k > 0 {
				// Too little to go on: read it.
				c.uh.on = false
				continue
			}
		} else {
			k, err = c.in.Read(lenBuf[n:])
		}
		if n == 0 && k > 0 {
			c.startFrame()
		}
		n += k
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || c.draining.Load() || c.dead.Load() {
			if n > 0 && errors.Is(err, io.EOF) {
				return 0, wire.ErrTruncated
			}
			return 0, err
		}
		if n > 0 {
			return 0, fmt.Errorf("%w: a length prefix took over %s", ErrReadTimeout, c.lim.read)
		}
		if c.idleNow() {
			return 0, fmt.Errorf("%w: nothing in flight and nothing received for %s", ErrIdleTimeout, c.lim.idle)
		}
		c.setReadDeadline(c.lim.idle)
	}
	return wire.CheckLength(lenBuf, wire.MinRequestFrame, maxReq)
}

// startFrame gives the frame whose first byte has arrived the read
// timeout; a drain no longer interrupts it (see drain), a teardown does.
func (c *conn) startFrame() {
	c.inFrame.Store(true)
	var t time.Time
	if c.lim.read > 0 {
		t = time.Now().Add(c.lim.read)
	}
	c.frameDeadline = t
	c.client.SetReadDeadline(t)
	if c.dead.Load() {
		c.client.SetReadDeadline(time.Now())
	}
}

// endFrame marks the frame read and forwarded; the next read may be
// interrupted by a drain again.
func (c *conn) endFrame() { c.inFrame.Store(false) }

// timedOut turns a deadline hit while reading a frame into ErrReadTimeout,
// unless the deadline was the proxy's own (drain, teardown).
func (c *conn) timedOut(err error) error {
	if errors.Is(err, budget.ErrDeadline) {
		return fmt.Errorf("%w: a request could not get memory within %s", ErrReadTimeout, c.lim.read)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.draining.Load() && !c.dead.Load() {
		return fmt.Errorf("%w: a request did not arrive whole within %s", ErrReadTimeout, c.lim.read)
	}
	return err
}

// idleNow reports whether the connection has nothing in flight.
func (c *conn) idleNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq.Idle() && len(c.outq) == 0 && !c.flushing
}

// readFrame reads the rest of a request frame of total bytes whose first
// bytes are head, growing its buffer as bytes arrive and charging it to the
// budget. The returned charge is what the buffer holds.
func (c *conn) readFrame(head []byte, upto, total int) (*wire.Buf, charge, error) {
	acct := c.account(total)
	b, err := wire.Start(head, total, acct)
	if err != nil {
		return nil, charge{}, c.timedOut(err)
	}
	ch := acct.Charge(cap(b.B))
	b, err = wire.Grow(&c.in, b, upto, acct, wire.GrowFactor)
	if err != nil {
		return nil, charge{}, c.timedOut(err)
	}
	ch.N = int64(cap(b.B))
	return b, ch, nil
}

// growFrame continues reading a frame started by readFrame up to total.
func (c *conn) growFrame(b *wire.Buf, ch charge, total int) (*wire.Buf, charge, error) {
	acct := c.account(total)
	if acct.bulk != ch.Bulk {
		// The head was charged as small; move it to the frame's class.
		if err := acct.Reserve(int(ch.N)); err != nil {
			ch.Release(c.p.budget)
			wire.Put(b)
			return nil, charge{}, c.timedOut(err)
		}
		c.p.budget.Release(ch.N, ch.Bulk)
		ch.Bulk = acct.bulk
	}
	b, err := wire.Grow(&c.in, b, total, acct, wire.GrowFactor)
	if err != nil {
		return nil, charge{}, c.timedOut(err)
	}
	ch.N = int64(cap(b.B))
	return b, ch, nil
}

// reserveState charges the key state a request will hold in the sequencer.
// Every request read from the client passes here, frame or none (an
// unread one has none), so here it learns the budget its state goes back
// to: a streaming write adds to that state later (endStream).
func (c *conn) reserveState(r *request) error {
	r.bud = c.p.budget
	n := c.seq.StateBytes(r.ord)
	if n == 0 {
		return nil
	}
	if err := c.accts[0].Reserve(n); err != nil {
		return c.timedOut(err)
	}
	r.stateCharge = charge{N: int64(n)}
	return nil
}

// admit counts a new connection against the cap; false closes it at once.
// The caller holds p.mu.
func (p *Proxy) admitLocked() bool {
	return len(p.conns) < p.current().Connections()
}

// refuse closes a connection accepted past the cap, counts it, and logs
// at most once per refusedLogEvery how many were refused.
func (p *Proxy) refuse(c *conn) {
	n := p.refused.Add(1)
	c.client.Close()
	p.metrics.ConnRejected(metrics.RejectLimit)
	now := time.Now().UnixNano()
	last := p.refusedLogged.Load()
	if now-last < int64(refusedLogEvery) || !p.refusedLogged.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("connection refused: max-connections reached", "client", c.client.RemoteAddr().String(),
		"max_connections", p.current().Connections(), "refused_total", n)
}

// watchUpstreams closes, within upstreamCheckEvery, the client connections
// whose idle upstream connection the upstream closed, so that the client
// reconnects as it would with the broker itself, instead of a later request
// failing for a close that happened long before.
func (p *Proxy) watchUpstreams() {
	defer p.wg.Done()
	t := time.NewTicker(upstreamCheckEvery)
	defer t.Stop()
	var conns []*conn
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		conns = p.openConns(conns)
		for _, c := range conns {
			if c.upstreamClosedWhileIdle() {
				c.die(fmt.Errorf("%w: %w", ErrUpstreamFailed, errUpstreamIdleClose))
			}
		}
		clear(conns)
	}
}

// openConns returns the open connections in dst's array, for a watch to
// look at outside p.mu.
func (p *Proxy) openConns(dst []*conn) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	dst = dst[:0]
	for c := range p.conns {
		dst = append(dst, c)
	}
	return dst
}

// upstreamClosedWhileIdle reports whether the upstream closed this
// connection while no upstream reader runs. The check holds mu, so no
// reader starts during it, and only peeks: it consumes nothing.
func (c *conn) upstreamClosedWhileIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading || c.up == nil || c.dead.Load() {
		return false
	}
	return peekClosed(c.up)
}
