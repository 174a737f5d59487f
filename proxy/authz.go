package proxy

// Authorization at the proxy: the connection's side of the seam with
// package authz, which holds the ACL file's rules and decides. screen
// hands it every request the client authentication passed, before the
// request is sequenced; a refused request becomes a local answer in its
// place, a partly refused one is forwarded without its denied entries and
// its answer completed by the Fix (response.go, single/gather.go).

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/wire"
)

// Authorizer enforces ACLs on every listener's clients; authz.Guard is the
// implementation.
type Authorizer interface {
	// Client is who sends a connection's requests.
	Client(principal string, host netip.Addr) acl.Client
	// Request decides on one request of the connection whose state is
	// st; req is the request decoded when the proxy has it already, nil
	// otherwise.
	Request(st *authz.Conn, c acl.Client, hdr wire.RequestHeader, frame []byte, req kmsg.Request, noResp bool) (authz.Outcome, error)
	// ProduceHead reports whether the Produce request whose frame, of
	// frameLen bytes, begins with head is allowed whole by what head
	// shows: then it may go upstream as it arrives, unread. False: it is
	// read whole and decided by Request. st is the connection's state,
	// as for Request.
	ProduceHead(st *authz.Conn, c acl.Client, hdr wire.RequestHeader, head []byte, frameLen int) bool
}

// topicIDResolver is an Authorizer that can ask the upstream for topic
// ids no answer it saw taught (authz.Guard).
type topicIDResolver interface {
	ResolveTopicIDsWith(list func(context.Context) (map[[16]byte]string, error))
}

// listTopicIDs asks the upstream, as the proxy's discovery does (its TLS
// and SASL), for every topic's id and name.
func (p *Proxy) listTopicIDs(ctx context.Context) (map[[16]byte]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	cfg := p.current()
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Upstreams...), kgo.RequestRetries(2), kgo.Dialer(p.dialDiscovery)}
	if cfg.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(cfg.DialTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest() // null topics: all of them
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrUpstreamFailed, err)
	}
	ids := make(map[[16]byte]string, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			ids[t.TopicID] = *t.Topic
		}
	}
	return ids, nil
}

// WithAuthorization makes the proxy enforce a's ACLs.
func WithAuthorization(a Authorizer) Option {
	return func(p *Proxy) { p.authz = a }
}

// headAllowed reports whether the Produce request h, of size bytes after
// its length prefix, whose frame begins with head, may stream: always
// without ACLs; with them, when its head alone shows it allowed whole
// (one topic, see authz.Guard.ProduceHead). A request that streams is
// not decided again by authorize: a denied one is read whole instead, and
// never forwarded.
func (c *conn) headAllowed(h wire.RequestHeader, head []byte, size int32) bool {
	if c.p.authz == nil {
		return true
	}
	if c.p.clientAuth != nil && c.auth.s == nil {
		// Who the client is is learned at its first request.
		return false
	}
	return c.p.authz.ProduceHead(&c.authzConn, c.p.authz.Client(c.principal(), c.clientAddr()), h, head, 4+int(size))
}

// authorize decides on r, which the client authentication passed. A
// streamed request was decided from its head (headAllowed).
func (c *conn) authorize(r *request) error {
	if c.p.authz == nil || r.frame == nil || r.local != nil || r.stream > 0 {
		return nil
	}
	var req kmsg.Request
	st := &c.authzConn
	if r.split != nil {
		// The single topology holds no fetch session upstream: it
		// answers a client's incremental Fetch itself.
		req, st = r.split.Req(), nil
	}
	out, err := c.p.authz.Request(st, c.p.authz.Client(c.principal(), c.clientAddr()), r.hdr, r.frame.B, req, r.noResp)
	if err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrBadRequest, kmsg.NameForKey(r.hdr.Key), r.hdr.Version, err)
	}
	switch out.Action {
	case authz.Answer:
		c.auditRefused(r, out.Refused)
		c.answerLocally(r, out.Response)
		return nil
	case authz.Close:
		c.auditRefused(r, out.Refused)
		return fmt.Errorf("%w: %w", ErrDenied, out.Err)
	case authz.Forward:
		if out.CloseAfter && r.split != nil {
			// The single topology sends an acks=0 write's parts once
			// their brokers' connections are up, and a close ends what
			// waits for a dial: the allowed part could be written or
			// not. It writes none of it, and closes as Kafka does.
			return fmt.Errorf("%w: %w", ErrDenied, out.Err)
		}
		if r.split == nil {
			// The single topology forwards the decoded request, which
			// authz changed in place, and keeps the frame it aliases.
			wire.Put(r.frame)
			r.frame = &wire.Buf{B: out.Frame}
		}
	}
	r.fix, r.refused = out.Fix, out.Refused
	if out.CloseAfter {
		c.deniedAfter = out.Err
	}
	return nil
}

// auditRefused records r, refused by the ACLs on the resources listed,
// before its refusal is delivered; client reader.
func (c *conn) auditRefused(r *request, refused []authz.Refusal) {
	if c.aud.a == nil || len(refused) == 0 {
		return
	}
	res := make([]audit.Resource, len(refused))
	for i, d := range refused {
		res[i] = audit.Resource{Type: d.Resource.String(), Name: d.Name, Operation: d.Operation.String(), ErrorCode: d.Code}
	}
	c.auditDenied(r.hdr, r.frame.B, refused[0].Code, res...)
}

// afterAuthorize closes the connection once an acks=0 write with denied
// partitions is forwarded, as Kafka closes it.
func (c *conn) afterAuthorize() error {
	err := c.deniedAfter
	if err == nil {
		return nil
	}
	c.deniedAfter = nil
	c.finishInFlight()
	return fmt.Errorf("%w: %w", ErrDenied, err)
}

// clientAddr is the client's IP address; the zero Addr when unknown.
func (c *conn) clientAddr() netip.Addr {
	if a, ok := c.client.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// fixResponse completes resp, r's decoded answer, as r's decision asks.
func (r *request) fixResponse(resp kmsg.Response) {
	if r.fix != nil {
		r.fix.Apply(resp)
	}
}
