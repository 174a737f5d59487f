package proxy

// The single topology (config.TopologySingle): the proxy is the cluster's
// only broker, at --listen's address. The view of the cluster every
// connection shares is single.View, built here with what it needs of the
// proxy (singleHost). A client connection's upstream connections, the
// life of a split request, the Fetch rounds, what orders a Fetch after
// the writes before it and the memory a split request, a Fetch's room
// and a merged answer reserve are package single's (single.Conn); this
// file is the proxy's side of the seam, single.Client (singleClient):
// what a single.Conn asks of its client connection, and the flusher that
// hands it the dispatched requests. The quotas applied to a merged answer
// are in single_quota.go.
// DESIGN.md, "The single endpoint", tells the whole.

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

// singleHost is the proxy as the single topology's view sees it
// (single.Host).
type singleHost struct{ p *Proxy }

func (h singleHost) Upstreams() []string      { return h.p.current().Upstreams }
func (h singleHost) Allowed(host string) bool { return h.p.nodes.allow.allows(host) }
func (h singleHost) Health(err error)         { h.p.health.record(err) }
func (h singleHost) Ready()                   { h.p.noteReady() }

// newSingleView builds the single topology's view: the one broker at the
// bootstrap listener's port (or the advertised one), the proxy's own
// client dialling through dialDiscovery; and what the connections share
// (p.singleEnv).
func newSingleView(p *Proxy) (*single.View, error) {
	p.singleEnv = &single.Env{
		Budget:         p.budget,
		FetchRooms:     &p.fetchRooms,
		Readers:        &upstreamReaders,
		Log:            p.log,
		ResponseWait:   &responseWait,
		ProbeTimeout:   probeTimeout,
		ReaderLinger:   readerLinger,
		IdleClosed:     peekClosed,
		NotKafka:       strangerFromUpstream,
		FetchVectors:   &p.fetchVectors,
		FetchCuts:      &p.fetchCuts,
		FetchEarly:     &p.fetchEarly,
		FetchKept:      &p.fetchKept,
		FetchKeptTaken: &p.fetchKeptTaken,
		FetchLate:      &p.fetchLate,
		FetchTrimmed:   &p.fetchTrimmed,
		BrokerStalls:   &p.brokerStalls,
		FetchParks:     &p.fetchParks,
		FetchPiped:     &p.fetchPiped,
		FetchParkCuts:  &p.fetchParkCuts,
		FetchParkDrops: &p.fetchParkDrops,
		ProduceSplices: &p.produceSplices,
	}
	port := p.boot.Addr().(*net.TCPAddr).Port
	if p.cfg.AdvertisedPort != 0 {
		port = p.cfg.AdvertisedPort
	}
	return single.NewView(singleHost{p}, single.Config{
		Self:        splitmerge.Self{NodeID: single.SelfNodeID, Host: p.advHost, Port: int32(port)},
		Seeds:       p.cfg.Upstreams,
		DialTimeout: p.cfg.DialTimeout,
		Dial:        p.dialDiscovery,
		Timeout:     probeTimeout,
		Log:         p.log,
	})
}

// newSingleConn makes c's side of the single topology.
func newSingleConn(c *conn) *single.Conn {
	return single.NewConn(c.p.ctx, singleClient{c}, c.p.single, c.p.singleEnv, &c.wg, c.halt, c.cfg.MaxResponseSize)
}

// flushSingle is conn.flush in the single topology: the dispatched
// requests are split and their parts written, one request at a time in
// dispatch order, so that on every upstream connection the parts keep the
// client's order (single.Conn.Forward). Unless byReader, it stops in
// front of a request whose frame the client socket still holds, which
// the client reader alone forwards (single_unread.go). The caller has
// set c.flushing; flushSingle clears it.
func (c *conn) flushSingle(byReader bool) {
	for {
		c.mu.Lock()
		if c.dead.Load() || len(c.outq) == 0 || !byReader && c.outq[0] == c.peekedReq {
			c.flushing = false
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		r := c.outq[0]
		n := copy(c.outq, c.outq[1:])
		c.outq[n] = nil
		c.outq = c.outq[:n]
		if r == c.peekedReq {
			c.peekedTaken = true
		}
		now := c.p.metrics.Now()
		if m := c.p.metrics; m != nil {
			r.sentAt = now
			if r.ord.Kind == ordering.Write {
				m.WriteWait(metrics.PhaseQueued, now.Sub(r.readAt))
			}
		}
		c.mu.Unlock()
		// acks=0 in connection mode: nothing comes back.
		unanswered := r.noResp && r.upCorr == noCorrelation
		c.one.Forward(r.split, now, unanswered, r.ord.Kind == ordering.Write)
	}
}

// reserveSplit reserves what r costs once decoded, before it is decoded
// (single.Conn.Reserve), and gives r its split state.
func (c *conn) reserveSplit(r *request) error {
	st, err := c.one.Reserve(r)
	if err != nil {
		return err
	}
	r.bud = c.p.budget
	r.split = st
	return nil
}

// The proxy's request as a split sees it (single.Request).
func (r *request) Header() *wire.RequestHeader    { return &r.hdr }
func (r *request) Frame() *wire.Buf               { return r.frame }
func (r *request) FixResponse(resp kmsg.Response) { r.fixResponse(resp) }
func (r *request) ForcedAck() bool                { return r.forcedAck }
func (r *request) SetFailed(err error)            { r.failed = err }
func (r *request) Pieces() bool                   { return r.aud == nil }

// Merging starts the proxy's time on a merged answer, counted against
// the client's request_percentage in Complete.
func (r *request) Merging() {
	if r.timed != nil {
		r.mergeAt = time.Now()
	}
}

func (r *request) SetPieces(pieces [][]byte, from []*sockio.Pipe, n int, done func()) {
	r.vec, r.vecFrom, r.vecLen, r.vecDone = pieces, from, n, done
}

// singleClient is a client connection as its single.Conn sees it
// (single.Client).
type singleClient struct{ c *conn }

func (s singleClient) Die(err error) { s.c.die(err) }
func (s singleClient) Who() []any    { return s.c.who() }

// dialStarted, when set, is told the address of every dial a client
// connection starts; tests count them.
var dialStarted func(addr string)

// Dial dials addr through dialSecure: TLS, and SASL as the client's
// principal maps to (upidentity.go).
func (s singleClient) Dial(ctx context.Context, addr string) (net.Conn, time.Time, bool, error) {
	p := s.c.p
	if f := dialStarted; f != nil {
		f(addr)
	}
	auth := s.c.sasl.auth
	nc, sess, err := p.dialSecure(upauth.WithIdentity(ctx, auth), addr, slices.Contains(p.current().Upstreams, addr))
	return nc, sess.ReauthAt, auth != nil && auth != p.sec.auth, err
}

func (s singleClient) Account(n int) single.Account   { return s.c.account(n) }
func (s singleClient) UpAccount(n int) single.Account { return s.c.upAccount(n) }
func (s singleClient) TimedOut(err error) error       { return s.c.timedOut(err) }

func (s singleClient) Fixup(key, version int16, resp kmsg.Response) {
	s.c.p.auditLearn(resp)
	if f := s.c.p.fixup; f != nil && f.Needs(key, version) {
		f.Fix(resp)
	}
}

func (s singleClient) Forwarded(since time.Time) { s.c.forwardWritten(1, since) }

// DropFrame lets a Produce's frame go once its parts are written: the
// sequencer's hold on it ends with it.
func (s singleClient) DropFrame(sr single.Request) {
	r, c := sr.(*request), s.c
	if r.frame == nil {
		return
	}
	held := len(r.frame.B)
	wire.Put(r.frame)
	r.frame = nil
	r.frameCharge.Release(c.p.budget)
	if r.upCorr != noCorrelation {
		c.mu.Lock()
		c.seq.Free(held)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// Release lets go of an acks=0 write in connection mode once its parts
// have gone to their upstreams: its audit event is complete then, and
// goes to the client reader to record, as an answered one's does. The
// partitions failed names, which were not sent, carry the error they
// were answered there: the event does not name them as written.
func (s singleClient) Release(sr single.Request, failed kmsg.Response) {
	r := sr.(*request)
	if pr, ok := failed.(*kmsg.ProduceResponse); ok && r.aud != nil {
		for _, t := range pr.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					s.c.aud.ev.Unsent(r.aud, t.Topic, t.TopicID, p.Partition, p.ErrorCode)
				}
			}
		}
	}
	s.c.auditAnswered(r, nil, time.Now())
	putRequest(r)
}

func (s singleClient) Versions(av *kmsg.ApiVersionsResponse) {
	s.c.p.keepVersions("", av)
	s.c.clampSingleVersions(av)
}

func (s singleClient) Quota(r single.Request, resp kmsg.Response) (kmsg.Response, int) {
	return s.c.quotaAnswer(r.(*request), resp)
}

func (s singleClient) Splices() bool { return s.c.clientTakesVector() }

func (s singleClient) PiecesHold() int {
	if s.c.clientTakesVector() {
		return 0
	}
	return vecChunk
}

// Complete delivers a merged answer as the other topologies deliver a
// broker's: in order (conn.complete).
func (s singleClient) Complete(sr single.Request, out *wire.Buf, ch budget.Charge) error {
	r, c := sr.(*request), s.c
	if r.timed != nil && !r.mergeAt.IsZero() {
		// Before complete: once recorded, r may be delivered and
		// recycled by another goroutine.
		took := time.Since(r.mergeAt) // the monotonic clock alone
		r.timed.AddRequestTime(r.mergeAt.Add(took), took)
	}
	if m := c.p.metrics; m != nil && !r.sentAt.IsZero() {
		r.upTook = time.Since(r.sentAt)
		if r.ord.Kind == ordering.Write && c.mode == ordering.None {
			m.WriteWait(metrics.PhaseAccept, r.upTook)
		}
	}
	c.mu.Lock()
	if r.frame != nil {
		c.seq.Free(len(r.frame.B))
	}
	c.mu.Unlock()
	r.bud, r.respCharge = c.p.budget, ch
	return c.complete(r, out)
}

// clampSingleVersions limits a merged ApiVersions answer as the proxy
// limits a broker's in the other topologies: to what it may forward and
// to --api-version-cap.
func (c *conn) clampSingleVersions(av *kmsg.ApiVersionsResponse) {
	defer c.p.advertiseClientSASL(av)
	rewrite.CapVersions(av, c.cfg.APIVersionCap)
	if c.p.versions == nil {
		return
	}
	keep := av.ApiKeys[:0]
	for _, k := range av.ApiKeys {
		max, ok := c.p.versions(k.ApiKey)
		if !ok {
			continue
		}
		if k.MaxVersion > max {
			k.MaxVersion = max
		}
		if k.MinVersion <= k.MaxVersion {
			keep = append(keep, k)
		}
	}
	av.ApiKeys = keep
}
