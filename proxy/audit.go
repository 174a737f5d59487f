package proxy

// The audit trail's seam in the connection: the proxy calls the
// audit.Recorder and knows nothing of events, queues or sinks; what a
// request's event holds is read from the request and its answer by
// audit/capture, which the hooks here hand them to.
//
// Where each call runs, so that a full queue in block mode holds back
// exactly the client whose event waits, and never another client:
//
//   - Open, the SASL and TLS Authentication events, denied requests and
//     Close run on the client reader.
//   - Request runs where the client's response was delivered in order
//     (deliver): the client reader or the connection's own upstream
//     reader, both this client's alone; while it waits, this client's
//     responses stop, its in-flight window fills and its reader stops.
//     In the single topology a response may be delivered by a goroutine
//     that serves other clients too, so there the event is handed to the
//     client reader, which records it before it reads the next request
//     (and at the close).
//   - An acks=0 Produce in Connection mode, which no response answers and
//     the sequencer never holds, is recorded once it is written upstream,
//     by the flusher that wrote it: there the client reader
//     (auditUnanswered); in the single topology it is handed to the
//     client reader once its parts are sent (singleClient.Release).
//   - A request the client never got an answer to (the write of its
//     answer failed, or the connection ended first) is kept where that
//     is found (auditLose) and recorded at the close, after every
//     goroutine of the connection has ended, with NETWORK_EXCEPTION.
//
// A request's event is started from its frame on the client reader
// (auditRead; a Produce streamed is counted as its partitions pass,
// bodystream.go) and completed from its answer where it is delivered
// (auditDelivered).

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/wire"
)

// WithRecorder makes the proxy record its clients' connections,
// authentications and requests into r. Without it (or with nil) nothing is
// recorded and each request pays one nil check.
func WithRecorder(r audit.Recorder) Option {
	return func(p *Proxy) { p.aud.rec = r }
}

// WithBudget makes the proxy hold its memory in b rather than in a budget
// of its own sized by the configuration, so that what else the process
// keeps (the audit trail's queue) is within the same bound.
func WithBudget(b *budget.Budget) Option {
	return func(p *Proxy) {
		if b != nil {
			p.budget = b
		}
	}
}

// proxyAudit is the proxy's audit state.
type proxyAudit struct {
	rec audit.Recorder
	ids atomic.Uint64 // connection numbers, so that a summary joins its requests
	// topics names the topics events would name by id, as the Metadata
	// answers passed on taught them (auditLearn).
	topics capture.TopicIDs
}

// auditLearn keeps what a Metadata answer passed on to a client teaches
// the audit trail: its topics' ids. Any connection's answer, audited or
// not, on whatever goroutine decoded it.
func (p *Proxy) auditLearn(resp kmsg.Response) {
	if md, ok := resp.(*kmsg.MetadataResponse); ok && p.aud.rec != nil {
		p.aud.topics.Learn(md)
	}
}

// connAudit is a connection's audit state.
type connAudit struct {
	a   *audit.Conn     // nil: not audited
	ctx context.Context // auditContext's, made by auditOpen
	// answered is the context an answered request's event is recorded
	// in, made by auditOpen (answeredContext).
	answered *answeredContext
	// countWrites: the data path's Produce events are recorded, so over
	// TLS a Produce of up to auditWholeMax bytes is read whole rather
	// than streamed (readsWhole); set when the audit opens.
	countWrites bool
	sasl        capture.SASL // client reader only
	ev          capture.Conn // its requests' events
	// lost holds, under the connection's mu, the events of requests
	// the client got no answer to, recorded at the close (auditLose).
	lost []lostRequest
}

// lostRequest is the event of a request the client got no answer to, and
// when it was lost.
type lostRequest struct {
	ar  *capture.Req
	hdr wire.RequestHeader
	at  time.Time
}

// auditContext is the connection's recording context, made once: a
// context made per event would be an allocation per request.
func (c *conn) auditContext() context.Context {
	if c.aud.ctx == nil {
		c.aud.ctx = capture.Context(c.halt)
	}
	return c.aud.ctx
}

// answeredContext is what the event of a request the client got its
// answer to waits for room in (block mode): until lingerTimeout after the
// connection ends, as the events recorded at its close (auditClose), not
// only until it ends. A client that leaves as soon as its last answer
// came would otherwise lose that answer's event whenever the queue was
// full then, a write acknowledged and never recorded. The timer starts
// the first time an event waits, on a goroutine the proxy tracks, which
// ends once the connection has and the linger passed.
type answeredContext struct {
	context.Context
	c    *conn
	once sync.Once
	done chan struct{}
}

func (a *answeredContext) Done() <-chan struct{} {
	a.once.Do(func() {
		p := a.c.p
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			<-a.c.halt
			t := time.NewTimer(lingerTimeout)
			defer t.Stop()
			<-t.C
			close(a.done)
		}()
	})
	return a.done
}

func (a *answeredContext) Err() error {
	select {
	case <-a.Done():
		return context.Canceled
	default:
		return nil
	}
}

// auditOpen starts the connection's audit once its TLS handshake is done;
// client reader. A client certificate that names a principal is recorded
// as an authentication of its own.
func (c *conn) auditOpen() {
	rec := c.p.aud.rec
	if rec == nil {
		return
	}
	info := audit.ConnInfo{ID: c.p.aud.ids.Add(1), Listener: c.listenerName(), ClientAddress: c.client.RemoteAddr().String()}
	var cs *tls.ConnectionState
	if tc, ok := c.client.(*tls.Conn); ok {
		st := tc.ConnectionState()
		cs = &st
		if len(st.PeerCertificates) > 0 {
			info.TLSSubject = st.PeerCertificates[0].Subject.String()
		}
	}
	if c.p.clientAuth != nil && c.auth.s == nil {
		// The session screen would open at the first request, opened
		// now: a client certificate's principal is known from the
		// handshake on.
		c.auth.s = c.p.clientAuth.Open(cs)
	}
	if info.TLSSubject != "" {
		info.Principal = c.principal()
	}
	c.aud.a = rec.Open(info)
	c.aud.ev.IDs = &c.p.aud.topics
	c.aud.countWrites = rec.Wants(keyProduce, audit.Allow)
	c.auditContext() // before any other goroutine records
	c.aud.answered = &answeredContext{Context: context.Background(), c: c, done: make(chan struct{})}
	if info.Principal != "" {
		_ = rec.Authentication(c.auditContext(), c.aud.a, &audit.Authentication{Mechanism: "TLS", APIKey: audit.NoAPIKey, Principal: info.Principal})
	}
	c.auditCertRefused(info.TLSSubject)
}

// auditWholeMax bounds the Produce requests the audit has read whole
// rather than streamed (readsWhole): a few batches of the clients' default
// size (1 MiB), held in memory, charged to the budget, as a smaller
// request is. A larger one streams through one chunk as before.
const auditWholeMax = 4 << 20

// readsWhole reports whether a Produce request of size bytes is read
// whole rather than streamed, so that its event counts its records from
// the record batches' headers, scattered through the body: over TLS,
// where a streamed body is copied through memory anyway (copyRest) and
// reading it whole costs no more (measured against streaming it, three
// runs of one and twelve partitions: 0.80 to 1.00 times the CPU per GB in
// request mode, 0.80 to 0.99 in a summary; peak memory grew by up to 17
// MiB). Between TCP sockets a body streams, counted as its partitions
// pass (bodystream.go, audit/capture): reading it whole would cost the
// copies the splice saves (measured in Connection mode: 1.22 times the
// CPU per GB of the splice with the per-request audit, beyond the 1.10
// allowed, and 1.06 times in a summary).
func (c *conn) readsWhole(size int32) bool {
	return c.aud.countWrites && !c.splice && size <= auditWholeMax
}

// listenerName names the listener the connection came in on.
func (c *conn) listenerName() string {
	switch {
	case c.one != nil:
		return "single"
	case c.p.nodes.names != nil:
		return "sni"
	case c.node < 0:
		return "bootstrap"
	}
	return "node"
}

// auditClose records what waits and ends the connection's audit, once
// every response was delivered; on the connection's goroutine, its
// reader's. The connection is dead by then, so the wait for room is
// bounded by a context of its own.
func (c *conn) auditClose() {
	if c.aud.a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lingerTimeout)
	defer cancel()
	c.auditQueued(ctx)
	c.mu.Lock()
	lost := c.aud.lost
	c.aud.lost = nil
	c.mu.Unlock()
	for _, l := range lost {
		c.aud.ev.Unanswered(l.ar, l.hdr, l.at)
		_ = c.p.aud.rec.Request(ctx, c.aud.a, l.ar.Request())
		capture.Put(l.ar)
	}
	_ = c.p.aud.rec.Close(ctx, c.aud.a)
}

// auditLose keeps the events of rs, requests whose answers the client
// will never get (the write of their answers failed, or the connection
// ends before they are answered or sent), for auditClose to record: a
// request that reached the upstream may have been applied there, and the
// trail says so rather than nothing. Any goroutine; c.mu not held.
func (c *conn) auditLose(rs ...*request) {
	if c.aud.a == nil {
		return
	}
	c.mu.Lock()
	c.auditLoseLocked(rs)
	c.mu.Unlock()
}

// auditLoseLocked is auditLose with c.mu held.
func (c *conn) auditLoseLocked(rs []*request) {
	if c.aud.a == nil {
		return
	}
	var now time.Time
	for _, r := range rs {
		if r.aud == nil {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		c.aud.lost = append(c.aud.lost, lostRequest{ar: r.aud, hdr: r.hdr, at: now})
		r.aud = nil
	}
}

// auditQueued records the requests answered on a shared goroutine; client
// reader.
func (c *conn) auditQueued(ctx context.Context) {
	for _, ar := range c.aud.ev.Queued() {
		_ = c.p.aud.rec.Request(ctx, c.aud.a, ar.Request())
		capture.Put(ar)
	}
}

// auditRead starts r's event before r is submitted; client reader. A
// request the proxy answers itself (SASL) is recorded as an
// authentication instead.
func (c *conn) auditRead(r *request) {
	if c.aud.a == nil {
		return
	}
	if c.one != nil {
		c.auditQueued(c.auditContext())
	}
	if r.local != nil || len(r.refused) == 0 && !c.p.aud.rec.Wants(r.hdr.Key, audit.Allow) {
		return
	}
	// A request going upstream unread has its head alone, in the peek
	// buffer: it is recorded with what its response says.
	frame, _ := c.requestHead(r)
	if frame == nil {
		return
	}
	whole := r.frame != nil && r.stream == 0 && r.hdr.Body <= len(frame)
	r.aud = c.aud.ev.Read(r.hdr, frame, clientIDBytes(frame), whole, c.cfg.AuditDataPath == config.AuditDataPathRequest, r.refused, r.scanBody)
}

// auditDelivered records the requests whose responses were just written
// to the client; see the top of this file for the goroutine.
func (c *conn) auditDelivered(rs []*request) {
	if c.aud.a == nil {
		return
	}
	now := time.Now()
	for _, r := range rs {
		var resp []byte
		if r.resp != nil && r.resp != noResponse {
			resp = r.resp.B
		}
		c.auditAnswered(r, resp, now)
	}
}

// auditAnswered records r's event, if it has one, with resp, the frame
// the client got (nil when none), at now.
func (c *conn) auditAnswered(r *request, resp []byte, now time.Time) {
	ar := r.aud
	if ar == nil {
		return
	}
	r.aud = nil
	c.aud.ev.Answered(ar, r.hdr, resp, now)
	if c.one != nil {
		c.aud.ev.Queue(ar)
		return
	}
	ctx := c.auditContext()
	if resp != nil && c.aud.answered != nil {
		ctx = c.aud.answered
	}
	_ = c.p.aud.rec.Request(ctx, c.aud.a, ar.Request())
	capture.Put(ar)
}

// auditUnanswered records the events of the requests in c.unanswered,
// acks=0 writes in Connection mode, which no response answers and the
// sequencer never holds: they are complete once written upstream, a
// streamed one's partitions counted by then (streamProduce). When the
// write failed the connection ends, and they are recorded at its close as
// requests the client got no answer to (auditLose). The requests go back
// to their pool. Flusher, after the write: in Connection mode the client
// reader (submit).
func (c *conn) auditUnanswered(written bool) {
	if len(c.unanswered) == 0 {
		return
	}
	if !written {
		c.auditLose(c.unanswered...)
	}
	now := time.Now()
	for _, r := range c.unanswered {
		c.auditAnswered(r, nil, now)
		putRequest(r)
	}
	clear(c.unanswered)
	c.unanswered = c.unanswered[:0]
}

// auditDenied records a request the proxy refused for its principal, with
// the error code the client gets and the resources refused; client reader,
// before the refusal is delivered.
func (c *conn) auditDenied(h wire.RequestHeader, frame []byte, code int16, res ...audit.Resource) {
	if c.aud.a == nil {
		return
	}
	r := capture.Denial(h, clientID(frame), code, res)
	_ = c.p.aud.rec.Request(c.auditContext(), c.aud.a, &r)
}

// auditSASL records the outcome of a SASL request the client
// authentication decided, and a denial of any other request it refused;
// client reader.
func (c *conn) auditSASL(h wire.RequestHeader, frame []byte, v clientauth.Verdict) {
	if c.aud.a == nil {
		return
	}
	a, denied := c.aud.sasl.Request(h, frame, v, c.auth.s)
	if denied != 0 {
		c.auditDenied(h, frame, denied)
	}
	c.auditAuthentication(a)
}

// auditToken records the outcome of a raw SASL token (SaslHandshake v0);
// client reader.
func (c *conn) auditToken(v clientauth.Verdict) {
	if c.aud.a == nil {
		return
	}
	c.auditAuthentication(c.aud.sasl.Verdict(keySaslHandshake, 0, v, c.auth.s))
}

// auditAuthentication records a, when an exchange ended; client reader.
func (c *conn) auditAuthentication(a *audit.Authentication) {
	if a != nil {
		_ = c.p.aud.rec.Authentication(c.auditContext(), c.aud.a, a)
	}
}
