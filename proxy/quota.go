package proxy

// Client quotas and connection caps at the proxy, as a Kafka broker
// applies them (package quota measures; this file decides what the
// connection does about it):
//
//   - At accept, the client's address is counted against
//     max-connections-per-ip and its overrides (over the cap: closed at
//     once) and its connection_creation_rate (over the rate: closed once
//     the throttle has passed, uncounted, as Kafka's ConnectionQuotas
//     does). Once the client authentication knows the principal, the
//     connection counts against the user's max_connections.
//   - A Produce is recorded as it is read; over the quota, its response
//     carries throttle_time_ms (the larger of the broker's and the
//     proxy's) and the client reader stops reading the connection for that
//     time (KIP-219): requests already read go on.
//   - A Fetch read while the client is over its fetch quota, outside a
//     fetch session, is answered at once by the proxy, empty, as Kafka
//     answers a throttled fetch. Otherwise it is forwarded, with its
//     max_bytes lowered to what the quota allows over its window, and its
//     response recorded as it arrives: over the quota, the client gets an
//     empty response in its place with the broker's session id, and the
//     reader is muted likewise.
//   - request_percentage counts the proxy's own time on a client's
//     requests, measured by the wall clock on the goroutines that do the
//     work: from the moment a request's frame is read until it is
//     forwarded (screening, authorizing, sequencing, writing it
//     upstream), and from the moment its answer is read whole until it
//     is ready for the client (correlation id, throttle, addresses
//     rewritten). The waits for the broker and for the client are not
//     counted: neither the body of a request spliced from the client
//     socket, nor an answer streamed from the broker, nor the write of
//     answers, which the proxy batches. The check comes as the request
//     is forwarded (the time after it, like Kafka's network-thread time,
//     counts at the next request's check): over the quota, its answer
//     carries throttle_time_ms (the larger of the broker's, the byte
//     rates' and this one, at most one sample of the window), a Fetch's
//     is empty as Kafka answers a throttled fetch, and the reader is
//     muted likewise. The requests Kafka exempts (quota.RequestExempt, a
//     Produce with acks=0) and those the proxy answers itself are not
//     counted. None of it, not even a clock read, happens unless some
//     entry sets request_percentage.
//   - In the single topology the same holds of the merged answer
//     (single_quota.go): a Produce's carries the throttle, a Fetch's is
//     counted whole and, over the quota, replaced by an empty one; the
//     decoded Fetch, which is split, has its max_bytes lowered.
//
// The client reader alone reads and writes connQuota, but for muted,
// which the upstream reader sets; a forwarded Fetch carries its client's
// quota.Client to the upstream reader.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/quota"
	"github.com/inorder-proxy/inorder/wire"
)

// anonymous is the user of a client the proxy did not authenticate, as
// Kafka names it.
const anonymous = "ANONYMOUS"

// connQuota is a connection's part in the quotas.
type connQuota struct {
	ip   netip.Addr // counted by Conns.Accept; invalid: not counted
	user string     // counted by Conns.AcquireUser; "": not counted
	cl   *quota.Client
	// principal and clientID are what cl was made for.
	principal string
	clientID  string
	// muted is when the client reader may read again, in unix
	// nanoseconds; 0: not muted.
	muted atomic.Int64
}

// quotaLimits are cfg's connection caps by address.
func quotaLimits(cfg *config.Config) quota.ConnLimits {
	return quota.ConnLimits{PerIP: cfg.MaxConnectionsPerIP, PerIPOverrides: cfg.MaxConnectionsPerIPOverrides}
}

// initQuotas makes the proxy's quota state from cfg.
func (p *Proxy) initQuotas(cfg *config.Config) {
	p.quotas = quota.NewManager(cfg.Quotas, quota.Options{})
	p.connCaps = quota.NewConns(quotaLimits(cfg), cfg.Quotas, quota.Options{})
}

// reloadQuotas applies cfg's quotas and caps to every connection, open
// ones included, as Kafka applies a quota change at once.
func (p *Proxy) reloadQuotas(cfg *config.Config) {
	p.quotas.Update(cfg.Quotas)
	p.connCaps.Update(quotaLimits(cfg), cfg.Quotas)
}

// admitAddress counts nc against its address's caps. False: nc is
// refused, closed at once over the connection cap, or after the throttle
// over the connection creation rate, and must not be served.
func (p *Proxy) admitAddress(nc net.Conn) (netip.Addr, bool) {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		// Not a TCP peer (a pipe in tests): nothing to count.
		return netip.Addr{}, true
	}
	ip := ta.AddrPort().Addr().Unmap()
	throttle, err := p.connCaps.Accept(time.Now(), ip)
	switch {
	case throttle > 0:
		// Kafka holds a connection over the creation rate unserved
		// for the throttle, then closes it, so that a client
		// reconnecting in a loop is slowed down.
		time.AfterFunc(throttle, func() { nc.Close() })
		p.quotaRefused(nc, "connection_creation_rate exceeded", throttle)
		return netip.Addr{}, false
	case err != nil:
		nc.Close()
		p.quotaRefused(nc, err.Error(), 0)
		return netip.Addr{}, false
	}
	return ip, true
}

// quotaRefused counts and logs, rate-limited, a connection refused by a
// cap.
func (p *Proxy) quotaRefused(nc net.Conn, why string, throttle time.Duration) {
	p.metrics.ConnRejected(metrics.RejectLimit)
	if skipped, ok := p.sec.failures.allow("quota-conn", time.Now()); ok {
		attrs := []any{"client", nc.RemoteAddr().String(), "reason", why, "similar_not_logged", skipped}
		if throttle > 0 {
			attrs = append(attrs, "close_in", throttle)
		}
		p.log.Info("connection refused", attrs...)
	}
}

// releaseQuota uncounts the connection from the caps.
func (c *conn) releaseQuota() {
	if c.quota.ip.IsValid() {
		c.p.connCaps.Release(c.quota.ip)
	}
	if c.quota.user != "" {
		c.p.connCaps.ReleaseUser(c.quota.user)
	}
}

// quotaUser is the user the client's quotas are Kafka's for: the name of
// its principal, ANONYMOUS until it authenticated at the proxy.
func (c *conn) quotaUser() string {
	p := c.principal()
	if p == "" {
		return anonymous
	}
	if _, name, ok := strings.Cut(p, ":"); ok {
		return name
	}
	return p
}

// quotaMute waits while the connection is muted, before the client reader
// reads the next request. A drain ends the wait (checked every
// muteCheck), since the reader then reads no more requests anyway.
func (c *conn) quotaMute() error {
	until := c.quota.muted.Load()
	if until == 0 {
		return nil
	}
	paused := false
	for !c.draining.Load() {
		d := time.Until(time.Unix(0, until))
		if d <= 0 {
			break
		}
		if !paused {
			c.pauseRead()
			defer c.resumeRead()
			paused = true
		}
		t := time.NewTimer(min(d, muteCheck))
		select {
		case <-t.C:
		case <-c.halt:
			t.Stop()
			return c.cause()
		}
	}
	return nil
}

// muteCheck is how often a muted reader looks for a drain.
const muteCheck = 100 * time.Millisecond

// mute stops the client reader until d after now; a longer mute already
// set stands.
func (c *conn) mute(now time.Time, d time.Duration) {
	until := now.Add(d).UnixNano()
	for {
		old := c.quota.muted.Load()
		if old >= until || c.quota.muted.CompareAndSwap(old, until) {
			return
		}
	}
}

// requestHead returns the frame of r as the client reader holds it, the
// head at least (length prefix included), and the request's size less the
// prefix. A request going upstream unread (unread.go) has its head in the
// peek buffer. Nil: the proxy answers r itself.
func (c *conn) requestHead(r *request) ([]byte, int) {
	switch {
	case r.frame != nil:
		return r.frame.B, len(r.frame.B) - 4 + r.stream
	case r.stream > 0 && c.uh.buf != nil:
		return c.uh.buf[:], r.stream - 4
	}
	return nil, 0
}

// quotaClient returns the connection's view of the quotas for the client
// id in head, made anew when the principal or the client id changes. The
// client id is compared where it lies in the frame, copied only when it
// changes: a connection keeps one, so a request costs no allocation.
func (c *conn) quotaClient(head []byte) *quota.Client {
	principal := c.principal()
	id := clientIDBytes(head)
	if c.quota.cl == nil || principal != c.quota.principal || string(id) != c.quota.clientID {
		user := c.quotaUser()
		c.quota.clientID = string(id)
		c.quota.cl = c.p.quotas.Client(user, c.quota.clientID)
		c.quota.principal = principal
	}
	return c.quota.cl
}

// clientID reads the client id of a request frame (length prefix
// included); "" when null or cut short.
func clientID(frame []byte) string { return string(clientIDBytes(frame)) }

// clientIDBytes is clientID within the frame, not copied.
func clientIDBytes(frame []byte) []byte {
	const at = 4 + 8
	if len(frame) < at+2 {
		return nil
	}
	n := int(int16(binary.BigEndian.Uint16(frame[at:])))
	if n <= 0 || len(frame) < at+2+n {
		return nil
	}
	return frame[at+2 : at+2+n]
}

// errUserConnections closes a connection whose user has its most
// connections open.
var errUserConnections = errors.New("user connection cap")

// quotaRequest applies the quotas to r, read and screened, before it is
// sequenced: the user's connection cap once known, and the Produce and
// Fetch quotas. An error closes the connection.
func (c *conn) quotaRequest(r *request) error {
	if c.quota.user == "" && c.principal() != "" {
		user := c.quotaUser()
		if err := c.p.connCaps.AcquireUser(user); err != nil {
			c.p.metrics.ConnRejected(metrics.RejectLimit)
			if r.local != nil && c.auth.after.Action != clientauth.AnswerThenTokens {
				// The request that authenticated: its answer goes,
				// so the client learns it is in, then the close.
				c.auth.after = clientauth.Verdict{Action: clientauth.AnswerThenClose, Err: err}
				return nil
			}
			c.p.log.Info("connection closed", append(c.who(), "reason", err.Error())...)
			return fmt.Errorf("%w: %w", errUserConnections, err)
		}
		c.quota.user = user
	}
	if r.hdr.Key != keyProduce && r.hdr.Key != keyFetch || !c.p.quotas.On() {
		return nil
	}
	head, size := c.requestHead(r)
	if head == nil {
		return nil
	}
	cl := c.quotaClient(head)
	now := time.Now()
	if r.hdr.Key == keyProduce {
		if d := cl.RecordProduce(now, size); d > 0 {
			r.throttle = d
			c.mute(now, d)
		}
		return nil
	}
	f, ok := fetchFields(r)
	if !ok {
		return nil
	}
	if d := cl.FetchThrottle(now); d > 0 && f.session == 0 {
		c.answerThrottledFetch(r, d)
		cl.FetchAnswered(now, d)
		c.mute(now, d)
		return nil
	}
	r.quota = cl
	if f.maxBytesAt > 0 {
		if max := cl.MaxFetchBytes(); max > 0 && int64(f.maxBytes) > max {
			binary.BigEndian.PutUint32(r.frame.B[f.maxBytesAt:], uint32(max))
			if r.split != nil {
				// The single topology splits the decoded request,
				// not the frame.
				r.split.Req().(*kmsg.FetchRequest).MaxBytes = int32(max)
			}
		}
	}
	return nil
}

// requestQuota checks the client's request_percentage with the proxy's
// time on r since start, its frame read (zero: no entry sets
// request_percentage), just before r is forwarded: over the quota, r's
// answer is throttled and the reader muted. It returns the client's
// quotas and the time counted when r is timed, so that the time
// forwarding it takes is added after; nil when not. The time is read on
// the monotonic clock alone (time.Since), the cheaper read.
func (c *conn) requestQuota(r *request, start time.Time) (*quota.Client, time.Duration) {
	if start.IsZero() || r.local != nil || r.noResp || quota.RequestExempt(r.hdr.Key) {
		return nil, 0
	}
	head, _ := c.requestHead(r)
	if head == nil {
		return nil, 0
	}
	cl := c.quotaClient(head)
	if !cl.RequestTimed(start) {
		return nil, 0
	}
	took := time.Since(start)
	now := start.Add(took)
	if d := cl.RecordRequestTime(now, took); d > 0 {
		r.throttle = max(r.throttle, d)
		c.mute(now, d)
	}
	r.timed = cl
	return cl, took
}

// fetchRequest are the fields of a Fetch request's head the quotas need.
type fetchRequest struct {
	maxBytes   int32
	maxBytesAt int // offset of max_bytes in the frame; 0: none (v0-2)
	session    int32
}

// fetchFields reads the fixed head of a Fetch request body: [replica_id
// before v15], max_wait_ms, min_bytes, max_bytes (v3+), isolation_level
// (v4+), session_id (v7+).
func fetchFields(r *request) (fetchRequest, bool) {
	var f fetchRequest
	b := r.frame.B
	at := r.hdr.Body
	if r.hdr.Version < 15 {
		at += 4
	}
	at += 8
	if r.hdr.Version >= 3 {
		if len(b) < at+4 {
			return f, false
		}
		f.maxBytes, f.maxBytesAt = int32(binary.BigEndian.Uint32(b[at:])), at
		at += 4
	}
	if r.hdr.Version >= 7 {
		at++
		if len(b) < at+4 {
			return f, false
		}
		f.session = int32(binary.BigEndian.Uint32(b[at:]))
	}
	return f, true
}

// answerThrottledFetch makes the proxy answer r itself, as Kafka answers
// a throttled fetch (a full or sessionless FetchContext's
// getThrottledResponse): no partitions, no session, throttle_time_ms set.
// The answer takes the request's place among the responses.
func (c *conn) answerThrottledFetch(r *request, d time.Duration) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = r.hdr.Version
	resp.ThrottleMillis = throttleMillis(d)
	c.answerLocally(r, wire.AppendResponse(nil, r.hdr.Correlation, r.hdr.ResponseFlexible(), resp.AppendTo))
}

// throttleMillis is d in whole milliseconds, rounded up so that a client
// holding off for it is never early.
func throttleMillis(d time.Duration) int32 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(ms)
}

// quotaResponse records a Fetch response of size bytes (its frame less
// the length prefix) as it arrives from the upstream; upstream reader
// only. Over the quota the response is replaced by an empty one
// (throttledResponse), so it is not streamed.
func (c *conn) quotaResponse(r *request, size int32) {
	if r.quota == nil || r.hdr.Key != keyFetch {
		return
	}
	now := time.Now()
	if r.throttle > 0 {
		// Throttled for its request time: answered empty, its bytes
		// are checked for the larger throttle and taken back, as
		// Kafka does.
		if d := r.quota.RecordThrottledFetch(now, int(size)); d > r.throttle {
			r.throttle = d
			c.mute(now, d)
		}
		return
	}
	if d := r.quota.RecordFetch(now, int(size)); d > 0 {
		r.throttle = d
		c.mute(now, d)
	}
}

// throttledResponse sets the throttle time of a throttled request's
// response, buf, whose correlation id is the client's already: a Fetch
// response is replaced by an empty one that keeps the broker's error and
// session id, as Kafka answers a throttled fetch after the fact, its
// records dropped; any other keeps its body with the larger of the
// broker's and the proxy's throttle_time_ms where wire.ThrottleOffset
// finds the field.
func (c *conn) throttledResponse(r *request, buf *wire.Buf) (*wire.Buf, error) {
	flexible := r.hdr.ResponseFlexible()
	off, err := wire.ResponseBody(buf.B, flexible)
	if err != nil {
		wire.Put(buf)
		return nil, fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
	}
	ms := throttleMillis(r.throttle)
	body := buf.B[off:]
	if r.hdr.Key != keyFetch {
		at, err := wire.ThrottleOffset(r.hdr.Key, r.hdr.Version, body)
		if err == nil && int32(binary.BigEndian.Uint32(body[at:])) < ms {
			binary.BigEndian.PutUint32(body[at:], uint32(ms))
		}
		// A response without the field (Produce v0, the versions
		// before it has one, the delegation token answers): the
		// mute alone holds the client back.
		return buf, nil
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = r.hdr.Version
	resp.ThrottleMillis = ms
	if r.hdr.Version >= 7 && len(body) >= 10 {
		resp.ThrottleMillis = max(ms, int32(binary.BigEndian.Uint32(body)))
		resp.ErrorCode = int16(binary.BigEndian.Uint16(body[4:]))
		resp.SessionID = int32(binary.BigEndian.Uint32(body[6:]))
	}
	out := wire.AppendResponse(make([]byte, 0, 64), r.hdr.Correlation, flexible, resp.AppendTo)
	wire.Put(buf)
	return &wire.Buf{B: out}, nil
}

// quotaStats are the quota figures by configured entity, for metrics.
func (p *Proxy) quotaStats() []metrics.QuotaStat {
	stats := p.quotas.Stats()
	out := make([]metrics.QuotaStat, 0, len(stats))
	for _, s := range stats {
		st := metrics.QuotaStat{Entity: s.Entity.String(), Throttle: time.Duration(s.Throttle.Load())}
		switch s.Kind {
		case quota.Produce:
			st.Kind, st.Bytes = metrics.QuotaProduce, s.Amount.Load()
		case quota.Fetch:
			st.Kind, st.Bytes = metrics.QuotaFetch, s.Amount.Load()
		case quota.Request:
			st.Kind = metrics.QuotaRequest
		default:
			continue
		}
		out = append(out, st)
	}
	return out
}
