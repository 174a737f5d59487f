package proxy

// This file holds everything the proxy records into metrics; the
// connection files call it through one-line hooks. Without WithMetrics,
// p.metrics is nil: every hook returns after a nil check, no clock is read
// and nothing is kept per request or per connection.
//
// Where each figure is taken:
//
//   - requests, latency: stamped when the client reader has read a request
//     (requestRead) and observed when deliver has written its response
//     (delivered), per API key;
//   - the upstream's share and the out-of-order count: stamped when a
//     flusher takes the request for the upstream (forwardedLocked), under
//     the lock that already guards the queue, and observed when the
//     upstream reader matches its response (answeredLocked), under the
//     lock it already takes;
//   - write waits: queued (read to forwarded) at forwarding; accepted
//     (forwarded to order fixed) at the response in none mode, and at the
//     end of the socket write in connection mode (forwardWritten);
//   - backpressure: the time waitCapacity blocks;
//   - connections open, requests in flight, bytes held and listeners are
//     not counted on the hot path at all: gauges reads them at scrape time.

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// WithMetrics records the proxy's figures into m. Without it (or with nil)
// nothing is recorded and the hot path pays one nil check per event.
func WithMetrics(m *metrics.Metrics) Option {
	return func(p *Proxy) { p.metrics = m }
}

// Metrics returns what the proxy records into; nil when it records nothing.
func (p *Proxy) Metrics() *metrics.Metrics { return p.metrics }

// gauges fills the state gauges at scrape time, so that keeping them costs
// the hot path nothing.
func (p *Proxy) gauges(g *metrics.Gauges) {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	g.ConnectionsOpen = int64(len(conns))
	for _, c := range conns {
		c.mu.Lock()
		g.RequestsInFlight += int64(c.seq.Len())
		g.HeldBytes += c.seq.Bytes()
		c.mu.Unlock()
	}
	g.MemoryUsed, g.MemoryLimit = p.budget.Used(), p.budget.Limit()
	nodes, controllers := p.nodes.listening()
	g.NodeListeners, g.ControllerListeners = int64(nodes), int64(controllers)
	g.FetchAnswersCut = p.fetchCuts.Load()
	g.FetchAnswersEarly, g.FetchPartsKept, g.FetchPartsKeptTaken = p.fetchEarly.Load(), p.fetchKept.Load(), p.fetchKeptTaken.Load()
	g.FetchPartsLate, g.FetchPartsTrimmed = p.fetchLate.Load(), p.fetchTrimmed.Load()
	g.BrokerStalls = p.brokerStalls.Load()
}

// requestRead counts r and stamps the moment it was read.
func (c *conn) requestRead(r *request) {
	if m := c.p.metrics; m != nil {
		m.RequestRead(r.hdr.Key)
		r.readAt = time.Now()
	}
}

// forwardedLocked stamps r as taken for the upstream at now (one clock
// read per batch, by the caller) and remembers the order in which requests
// go up, to see responses that overtake earlier ones. The caller holds
// c.mu.
func (c *conn) forwardedLocked(r *request, now time.Time) {
	m := c.p.metrics
	if m == nil {
		return
	}
	r.sentAt = now
	if r.ord.Kind == ordering.Write {
		m.WriteWait(metrics.PhaseQueued, now.Sub(r.readAt))
	}
	if r.upCorr != noCorrelation {
		c.sent.push(r.upCorr)
	}
}

// forwardWritten records, in connection mode, the time the socket write of
// a batch holding writes took: there a write's order is fixed once it is
// written.
func (c *conn) forwardWritten(writes int, since time.Time) {
	m := c.p.metrics
	if m == nil || writes == 0 || c.mode != ordering.Connection {
		return
	}
	d := time.Since(since)
	for range writes {
		m.WriteWait(metrics.PhaseAccept, d)
	}
}

// answeredLocked records the upstream's response with correlation id corr
// to r (nil, or another request, when it matches nothing: the reader then
// closes the connection). The caller holds c.mu.
func (c *conn) answeredLocked(r *request, corr int32) {
	m := c.p.metrics
	if m == nil || r == nil || r.resp != nil || r.upCorr != corr {
		return
	}
	if !r.sentAt.IsZero() {
		r.upTook = time.Since(r.sentAt)
		if r.ord.Kind == ordering.Write && c.mode == ordering.None {
			m.WriteWait(metrics.PhaseAccept, r.upTook)
		}
	}
	if !c.sent.pop(corr) {
		m.UpstreamOutOfOrder()
	}
}

// delivered records the responses just written to the client.
func (c *conn) delivered(rs []*request) {
	m := c.p.metrics
	if m == nil {
		return
	}
	now := time.Now()
	for _, r := range rs {
		if r.resp != noResponse && !r.readAt.IsZero() {
			m.ResponseWritten(r.hdr.Key, now.Sub(r.readAt), r.upTook)
		}
	}
}

// streamed records a response streamed to the client as it arrived.
func (c *conn) streamed(r *request) {
	kind := metrics.StreamedResponse
	if walked(r) {
		kind = metrics.StreamedResponseScanned
	}
	c.p.metrics.Stream(kind)
	if m := c.p.metrics; m != nil && !r.readAt.IsZero() {
		m.ResponseWritten(r.hdr.Key, time.Since(r.readAt), r.upTook)
	}
}

// pauseStartLocked returns when the client reader stopped reading because
// the connection is full, and why; the zero time when it is not full or
// nothing is recorded. The caller holds c.mu.
func (c *conn) pauseStartLocked() (time.Time, metrics.PauseReason) {
	if c.p.metrics == nil || !c.seq.Full() {
		return time.Time{}, ""
	}
	if c.seq.Len() >= c.cfg.MaxInFlight {
		return time.Now(), metrics.PauseInFlight
	}
	return time.Now(), metrics.PauseBytes
}

// pauseEnd records a pause begun at start.
func (c *conn) pauseEnd(start time.Time, why metrics.PauseReason) {
	if !start.IsZero() {
		c.p.metrics.ReadPaused(why, time.Since(start))
	}
}

// listenerKind names the listener kind of connections to t.
func (t target) listenerKind() metrics.Listener {
	switch {
	case t.byName:
		return metrics.ListenerSNI
	case t.node < 0:
		return metrics.ListenerBootstrap
	case t.controller:
		return metrics.ListenerController
	}
	return metrics.ListenerNode
}

// recordClose counts a connection that ended with reason, and the upstream
// failure behind it, if any.
func (c *conn) recordClose(reason error) {
	m := c.p.metrics
	if m == nil {
		return
	}
	m.ConnClosed(closeReason(reason))
	switch {
	case errors.Is(reason, ErrMemory):
		m.FrameRefused(metrics.SettingMaxMemory)
	case errors.Is(reason, wire.ErrFrameTooLarge) && errors.Is(reason, ErrBadRequest):
		m.FrameRefused(metrics.SettingMaxRequestSize)
	case errors.Is(reason, wire.ErrFrameTooLarge) && errors.Is(reason, ErrUpstreamProtocol):
		m.FrameRefused(metrics.SettingMaxResponseSize)
	}
	switch {
	case errors.Is(reason, ErrNotAllowed):
		m.UpstreamDialError(metrics.DialNotAllowed)
	case errors.Is(reason, ErrUpstreamProtocol):
		m.UpstreamProtocolError(protocolReason(reason))
	}
}

func closeReason(err error) metrics.CloseReason {
	switch {
	case err == nil, errors.Is(err, errClientClosed):
		return metrics.CloseClientClosed
	case errors.Is(err, ErrShutdown), errors.Is(err, ErrClosed):
		return metrics.CloseShutdown
	case errors.Is(err, ErrIdleTimeout):
		return metrics.CloseIdle
	case errors.Is(err, ErrWriteTimeout):
		return metrics.CloseWriteTimeout
	case errors.Is(err, ErrMemory):
		return metrics.CloseLimit
	case errors.Is(err, ErrReadTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return metrics.CloseReadTimeout
	case errors.Is(err, ErrTLSHandshake), errors.Is(err, ErrServerName):
		return metrics.CloseTLS
	case errors.Is(err, ErrUpstreamAuth), errors.Is(err, ErrClientAuth):
		return metrics.CloseSASL
	case errors.Is(err, ErrDenied):
		return metrics.CloseDenied
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrClientSASL):
		return metrics.CloseBadRequest
	case errors.Is(err, ErrUpstreamProtocol):
		return metrics.CloseUpstreamProtocol
	case errors.Is(err, ErrAcksZeroFailed):
		return metrics.CloseAcksZeroFailed
	case errors.Is(err, ErrUpstreamFailed), errors.Is(err, ErrNotAllowed), errors.Is(err, errEOFDrain):
		return metrics.CloseUpstreamFailure
	case errors.Is(err, errClientRead):
		return metrics.CloseClientError
	}
	return metrics.CloseOther
}

func protocolReason(err error) metrics.ProtocolError {
	switch {
	case errors.Is(err, errUnknownCorrelation):
		return metrics.ProtoUnknownCorrelationID
	case errors.Is(err, errUnsolicited):
		return metrics.ProtoUnexpectedBytes
	case errors.Is(err, wire.ErrFrameTooLarge):
		return metrics.ProtoFrameTooLarge
	case errors.Is(err, wire.ErrFrameTooSmall):
		return metrics.ProtoBadFrame
	}
	return metrics.ProtoBadResponse
}

// dialFailed counts a failed dial to the upstream by its cause.
func (p *Proxy) dialFailed(err error) {
	if p.metrics == nil {
		return
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		p.metrics.UpstreamDialError(metrics.DialRefused)
	case errors.As(err, &dns):
		p.metrics.UpstreamDialError(metrics.DialDNS)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		p.metrics.UpstreamDialError(metrics.DialTimeout)
	default:
		p.metrics.UpstreamDialError(metrics.DialOther)
	}
}

// sentOrder is the upstream correlation ids of one connection's requests
// awaiting a response, in the order they were written. A response to its
// head is in order; any other overtook an earlier request. Kept only while
// metrics are recorded.
type sentOrder struct {
	ids  []int32
	head int
}

func (s *sentOrder) push(id int32) {
	if s.head > 0 && s.head*2 >= len(s.ids) {
		// Reuse the answered half, so a connection that never drains
		// keeps only what awaits a response.
		n := copy(s.ids, s.ids[s.head:])
		s.ids, s.head = s.ids[:n], 0
	}
	s.ids = append(s.ids, id)
}

// pop removes id and reports whether it was the oldest.
func (s *sentOrder) pop(id int32) (inOrder bool) {
	live := s.ids[s.head:]
	if len(live) > 0 && live[0] == id {
		s.head++
		return true
	}
	for i, v := range live {
		if v == id {
			copy(live[i:], live[i+1:])
			s.ids = s.ids[:len(s.ids)-1]
			return false
		}
	}
	return true
}
