package proxy

// This file holds a connection's lifecycle and its one teardown path;
// client.go reads the client, forward.go sequences and writes requests
// upstream, upstream.go reads the upstream and delivers responses.
//
// Goroutines and what each owns:
//
//   - The client reader (serve → readClient) is the only goroutine that
//     reads the client socket. It sequences each request (submit) and, in
//     Connection mode, is the only one that writes requests upstream.
//   - The upstream reader (readUpstream) runs while a forwarded request
//     awaits its response. It is the only goroutine that reads the upstream
//     socket; it completes requests and delivers responses.
//   - In None mode the upstream reader writes the requests a completion
//     released itself, each write made once without waiting for room
//     (flushReleased), so that it never blocks on an upstream write; a
//     flusher goroutine (finishFlush, or flushAsync where the socket is
//     not TCP) finishes what the socket did not take.
//   - The Proxy calls die (Close) and drain (Shutdown) from its own
//     goroutine, and its watches (watchUpstreams, watchClients) call die
//     for an upstream that closed while idle, a client that stopped
//     reading, and a client gone while the proxy did not read it.
//
// Locks, always taken in this order: wmu (one client writer at a time, see
// deliver), then mu (the sequencer, the upstream queue and the flags beside
// them). No socket I/O happens under mu.
//
// Splicing relies on one invariant: the bytes of a request body still in
// the client socket are moved upstream by the client reader alone, right
// behind the head it read. The code keeps it: a flusher started by a
// completion never takes a request with a body to stream (flush stops in
// front of it), completions start flushers only in None mode, and submit
// waits for any running flusher before it flushes a streamed request itself.
// In None mode a request streams only if the sequencer forwards it the
// moment it is pushed (spliceable), so its head is in the upstream queue
// when submit flushes; if the connection stops forwarding first, submit
// says so and the client reader stops (errStranded).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/verify"
	"github.com/inorder-proxy/inorder/wire"
)

// lingerTimeout bounds how long a failing connection waits for the client
// to read the responses already written before the socket is closed.
const lingerTimeout = 2 * time.Second

// eofDrain bounds how long requests read before a client's EOF or bad
// frame may take to complete upstream. A variable only so that tests can
// shorten it (export_test.go).
var eofDrain = 30 * time.Second

// noCorrelation is the upstream correlation id of requests that expect no
// response; it is negative so that no live sequence number matches it.
const noCorrelation = -1

// conn is one client connection and its own upstream connection.
type conn struct {
	p       *Proxy
	cfg     *config.Config // as it was when the connection was accepted; see Proxy.Reload
	mode    ordering.Mode  // cfg's
	client  net.Conn
	in      clientIn         // the client reader's way to read client
	spliced [2][]byte        // sendScanned's scratch: the window, the buffered body
	body    io.LimitedReader // spliceRest's, client reader only
	up      net.Conn
	// upDialled: up was dialled after the client authenticated (in the
	// single topology: its identity was set) (upidentity.go); client
	// reader only.
	upDialled bool
	target    target
	node      int32 // -1 on the bootstrap listener

	// mu guards seq, the upstream queue and the flags below it; cond
	// wakes the client reader when capacity frees or the conn dies.
	mu       sync.Mutex
	cond     sync.Cond
	seq      *ordering.Sequencer[*request]
	outq     []*request // dispatched, not yet written upstream
	flushing bool       // a goroutine is writing outq upstream
	reading  bool       // the upstream reader runs; see startReaderLocked
	// lingering: the reader, with nothing in flight, waits on the socket
	// for the next response (awaitNext); quietWanted: waitQuiet runs, and
	// a reader that runs out of work ends at once.
	lingering, quietWanted bool
	// writeErr is set when a write upstream failed; nothing more is
	// written, and the connection ends once the upstream reader has read
	// what the upstream sent before it failed (see writeFailed).
	writeErr error
	// cut is set when the client broke off a request whose head had gone
	// upstream (a malformed or truncated body, a stalled one, a shutdown):
	// the upstream is mid-frame, so nothing more is written to it, but it
	// still answers the requests before, which are delivered before the
	// connection ends; cutAt is the sequence number they end below (see
	// cutOff).
	cut    error
	cutAt  uint64
	splice bool // large produce bodies move socket to socket
	// singleSplice: in the single topology, a large Produce's frame is
	// peeked at, its records then moved socket to socket
	// (single_unread.go); peekedReq is that request until the client
	// reader is done with it, its socket still holding peekedLeft bytes
	// of it. The client reader sets them, under mu.
	singleSplice bool
	peekedReq    *request
	peekedLeft   int
	// peekedSparse: the peeked copy lacks the large record sets
	// (wire.PeekProduce), which are read into it if not spliced.
	peekedSparse bool
	// peekedTaken: the client reader's flush took peekedReq to forward
	// it; what its socket still holds of it after is dropped.
	peekedTaken bool
	// splicer moves a peeked frame's pieces to the brokers; the client
	// reader's, closed as it ends.
	splicer *sockio.Splicer
	// peekBelow: a peek at a frame this large waited too long; only
	// smaller ones are peeked at (zero: any). The client reader's.
	peekBelow int
	// streamReq: large produce bodies stream, spliced or, over TLS,
	// copied through a chunk (copyRest).
	streamReq bool
	poison    uint64 // close once the head passes this seq (0: none)
	poisoned  error
	// streamResp: large responses that need no rewriting are copied to
	// the client as they arrive (see stream.go); respBody is the upstream
	// reader's for that.
	streamResp bool
	respBody   io.LimitedReader
	fw         *fetchWalk // a Fetch response walked as it streams (fetchstream.go)

	// wmu makes the client writer one at a time; see deliver.
	wmu     sync.Mutex
	ww      writeWatch // the client write under way (clientwrite.go)
	pw      pauseWatch // the client reader's pauses (clientpause.go)
	ready   []*request
	outBufs net.Buffers
	outW    net.Buffers // what WriteTo consumes, so outBufs keeps its array
	// outFrom: the pipe each piece of outW is spliced from (nil: from
	// memory), or nil when none is; fromBuf keeps its array.
	outFrom, fromBuf []*sockio.Pipe

	// undelivered: the upstream reader has completed responses it has not
	// delivered yet, because the next one was already in its buffer
	// (readUpstreamLoop); upstream reader only.
	undelivered bool

	// Scratch of the one flusher at a time (see c.flushing).
	flushFrames []*wire.Buf
	flushBufs   net.Buffers
	flushW      net.Buffers        // what WriteTo consumes, so flushBufs keeps its array
	toUp        *sockio.MoreWriter // a spliced request's head, with MSG_MORE
	tryUp       *sockio.TryWriter  // the upstream reader's writes (flushReleased)
	tryMade     bool               // tryUp is made, or cannot be (not a TCP socket)
	// unanswered: audited requests no response answers (acks=0 in
	// Connection mode), taken from the queue, whose events are recorded
	// once they are written (auditUnanswered).
	unanswered []*request

	wg       sync.WaitGroup // upstream reader and flushers
	dead     atomic.Bool
	draining atomic.Bool
	reason   error // set once by die

	dec  *decoder       // request bodies, used by the client reader only
	bs   *bodyStream    // a None-mode request streaming; client reader only
	peek *sockio.Peeker // the client socket's, made on first use; client reader only
	// peekMade: peek is made, or cannot be (not a TCP socket).
	peekMade bool
	uh       unreadHead // see unread.go; client reader only
	// corrBase is added to a sequence number to make the upstream
	// correlation id (unread.go); set under mu when the first request is
	// sequenced, constant after.
	corrBase uint32
	sasl     saslState
	auth     connAuth // client authentication at the proxy (clientauth.go)
	// deniedAfter closes the connection once the request just submitted
	// is forwarded (authz.go); client reader only.
	deniedAfter error
	authzConn   authz.Conn // client reader only

	aud connAudit // the audit trail (audit.go)

	sent sentOrder // ids awaiting a response, when metrics are recorded; guarded by mu
	// Bounds read at accept (limits.go).
	lim   connLimits
	accts [4]frameAccount // client reader small, bulk; upstream reader owed next, ahead
	// frameDeadline is the read deadline of the frame the client reader
	// is in (zero: none); the client reader's accounts read it.
	frameDeadline time.Time
	halt          chan struct{} // closed by die: budget waits give up
	inFrame       atomic.Bool   // the client reader is inside a frame; see drain
	haltOnce      sync.Once

	verify *verify.Conn // nil without --verify; see verify.go
	// one: the connection's upstreams in the single topology, which
	// stand in for up (single.Conn, single_host.go); nil in the others.
	one *single.Conn

	quota connQuota // quotas and connection caps (quota.go)
}

func newConn(p *Proxy, nc net.Conn, t target) *conn {
	cfg := p.current()
	c := &conn{p: p, cfg: cfg, mode: modeOf(cfg), client: nc, target: t, node: t.node}
	c.cond.L = &c.mu
	c.initLimits()
	c.seq = ordering.New[*request](c.mode, cfg.MaxInFlight, cfg.MaxBufferedBytes)
	c.verify = c.newVerify()
	if p.single != nil {
		c.one = newSingleConn(c)
	}
	return c
}

// serve runs the connection to its end: dial the upstream, read the client
// until it stops, then tear down through die, the one teardown path.
func (c *conn) serve() {
	defer c.p.wg.Done()
	err := c.p.handshake(c.p.ctx, c.client)
	if err == nil {
		c.auditOpen()
		c.routeByName()
		err = c.connect()
	} else {
		c.auditHandshakeRefused(err)
	}
	if err == nil {
		err = c.readClient()
		c.in.release()
	}
	c.die(err)
	c.wg.Wait()
	c.release()
	c.auditClose()
	c.closeClient()
	c.releaseQuota()
	c.logClose()
	// It leaves the open connections before its close is counted, so a
	// scrape never sees it both open and closed.
	c.p.untrack(c)
	c.recordClose(c.cause())
}

func (c *conn) connect() error {
	if c.one != nil {
		// Nothing is dialled before a part needs a broker.
		c.in.init(c.client)
		_, clientTCP := c.client.(*net.TCPConn)
		c.singleSplice = clientTCP && !c.p.noSplice
		return nil
	}
	if c.p.lateUpstream() {
		// Dialled once the client has authenticated (upidentity.go).
		c.in.init(c.client)
		return nil
	}
	return c.dial(c.p.sec.auth)
}

// dial connects the connection's upstream, authenticated with auth (nil:
// no SASL from the proxy).
func (c *conn) dial(auth *upauth.Authenticator) error {
	var (
		up   net.Conn
		addr string
		sess upauth.Session
		err  error
	)
	ctx := upauth.WithIdentity(c.p.ctx, auth)
	if c.target.resolve == nil {
		up, addr, sess, err = c.p.bootstrapUpstream(ctx)
	} else {
		if addr, err = c.target.resolve(); err != nil {
			return err
		}
		if up, sess, err = c.p.dialUpstream(ctx, addr); err != nil {
			err = fmt.Errorf("node %d at %s: %w", c.node, addr, err)
		}
	}
	if errors.Is(err, ErrUpstreamAuth) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUpstreamFailed, err)
	}
	c.startSession(addr, sess, auth)
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

// enableSplice lets large produce requests bypass user space: the
// request goes upstream as soon as it is read, by the goroutine that reads
// the client, and its body need not be understood. In None mode a request
// streams once nothing waits before it, its partitions found on the way
// (bodystream.go). Responses stream in both modes, since they are
// delivered in order whatever the mode. Both are spliced between TCP
// sockets and copied through a bounded chunk over TLS (copyRest,
// stream.go).
func (c *conn) enableSplice() {
	if c.in.nc == nil {
		c.in.init(c.client)
	}
	_, clientTCP := c.client.(*net.TCPConn)
	_, upTCP := c.up.(*net.TCPConn)
	c.splice = clientTCP && upTCP && !c.p.noSplice
	// With ACLs, only a request its head shows allowed streams
	// (headAllowed): every topic it names is checked before any of it
	// is forwarded.
	c.streamReq = !c.p.noSplice
	c.streamResp = !c.p.noSplice
}

// die records why the connection ends and unblocks every goroutine: the
// upstream closes, the client reader wakes, and a write to the client still
// under way gets the linger to finish. The client's socket itself is closed
// by closeClient once every writer is done, so that a response being
// written when the last request completed is never cut; a socket that is
// gone already (clientGone) is closed at once. Only the first call has an
// effect.
func (c *conn) die(reason error) {
	if !c.dead.CompareAndSwap(false, true) {
		return
	}
	c.stop()
	c.mu.Lock()
	c.reason = reason
	c.cond.Broadcast()
	up := c.up
	c.mu.Unlock()
	if up != nil {
		up.Close()
	}
	if c.one != nil {
		c.one.Close()
	}
	if clientGone(reason) {
		c.client.Close()
		return
	}
	c.client.SetReadDeadline(time.Now())
	c.client.SetWriteDeadline(time.Now().Add(lingerTimeout))
}

// clientGone reports whether reason says the client socket is of no more
// use: nothing written to it would be read.
func clientGone(reason error) bool {
	return errors.Is(reason, errClientClosed) && !errors.Is(reason, errClientEOF) ||
		errors.Is(reason, ErrWriteTimeout)
}

// halfCloser returns nc's write-side close: a TCP socket's, or a TLS
// session's (close_notify, then the socket's) once its handshake is done.
func halfCloser(nc net.Conn) (interface{ CloseWrite() error }, bool) {
	switch t := nc.(type) {
	case *net.TCPConn:
		return t, true
	case *tls.Conn:
		return t, t.ConnectionState().HandshakeComplete
	}
	return nil, false
}

// cause returns why the connection died, once die has run.
func (c *conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// closeClient runs once every writer is done. It half-closes, so that the
// responses already written reach the client before the socket closes
// (closing with unread input would reset the connection and could drop
// them), drains what the client still sends until it closes or the linger
// ends, then closes the socket.
func (c *conn) closeClient() {
	if hc, ok := halfCloser(c.client); ok && !clientGone(c.cause()) {
		hc.CloseWrite()
		c.client.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.Copy(io.Discard, io.LimitReader(c.client, 1<<20))
	}
	c.client.Close()
}

// drain stops reading new requests; readClient then waits for the
// in-flight responses and returns ErrShutdown. A frame whose first byte has
// arrived is read (or spliced) to its end first: cutting it would leave the
// upstream mid-frame and lose the responses before it. The reader sets
// inFrame before it extends its deadline and clears it before it checks
// draining, so one of the two always stops the next read.
func (c *conn) drain() {
	c.draining.Store(true)
	if !c.inFrame.Load() {
		c.client.SetReadDeadline(time.Now())
	}
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}

// release returns the buffers of requests that never completed, and of
// those never sequenced (acks=0 requests in Connection mode) that the
// upstream queue still held; their events, if audited, go to auditClose
// as requests the client got no answer to.
func (c *conn) release() {
	c.mu.Lock()
	left := c.seq.Drain(nil)
	for _, r := range c.outq {
		if r.upCorr == noCorrelation {
			left = append(left, r)
		}
	}
	clear(c.outq)
	c.outq = c.outq[:0]
	c.auditLoseLocked(left)
	c.mu.Unlock()
	for _, r := range left {
		r.free()
	}
}

func (c *conn) logClose() {
	reason := c.cause()
	attrs := c.who()
	switch {
	case reason == nil, errors.Is(reason, errClientClosed), errors.Is(reason, ErrShutdown),
		errors.Is(reason, ErrTLSHandshake), errors.Is(reason, ErrServerName), errors.Is(reason, ErrUpstreamAuth),
		errors.Is(reason, ErrClientAuth), errors.Is(reason, ErrDenied): // logged, rate-limited, where they happen
		c.p.log.Debug("connection closed", append(attrs, "reason", reason)...)
	case errors.Is(reason, ErrBadRequest), errors.Is(reason, ErrUpstreamProtocol), errors.Is(reason, ErrClientSASL), errors.Is(reason, ErrMemory):
		c.p.log.Warn("connection closed", append(attrs, "reason", reason.Error())...)
	default:
		c.p.log.Info("connection closed", append(attrs, "reason", reason.Error())...)
	}
}
