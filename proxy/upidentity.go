package proxy

// Who a client connection reaches the upstream as, when the proxy
// authenticates its clients (clientauth.go). Its upstream connection is
// dialled only once the client has authenticated: a client nobody knows
// costs the cluster nothing. It authenticates upstream with the
// credentials upauth.As chooses for the client's principal
// (WithUpstreamIdentities, --upstream-principal-credentials, else the
// proxy's own), and a principal it refuses is closed with a log line.
//
// Before authentication the only request forwarded would be ApiVersions;
// the proxy answers it from the upstream's versions, learned at discovery
// and from every ApiVersions answer since (upauth.Versions), clamped as an
// answer from the upstream is. In the single topology the client's
// connections to the brokers are dialled as its parts need them, each as
// its principal; the cluster view (package single) keeps its own
// connections, in the proxy's name. A re-authentication (KIP-368) keeps the
// principal (clientauth refuses a change), so the upstream connection and
// its identity stay as they are.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

// UpstreamIdentities maps a principal to the credentials it reaches the
// upstream with; upauth.Principals is the implementation.
type UpstreamIdentities = upauth.Identities

// WithUpstreamIdentities makes each authenticated client reach the
// upstream with the credentials ids maps its principal to. In the single
// topology the view of the cluster still dials as the proxy, so against
// a cluster that requires SASL the proxy needs credentials of its own.
func WithUpstreamIdentities(ids UpstreamIdentities) Option {
	return func(p *Proxy) { p.identities = ids }
}

// lateUpstream reports whether connections dial their upstream only once
// the client has authenticated. In the single topology nothing is dialled
// then either: the identity is set, and each broker is dialled with it as
// parts need one (single/conn.go).
func (p *Proxy) lateUpstream() bool { return p.clientAuth != nil }

// earlyVersions reports whether clients may ask for the API versions
// before their upstream is dialled: when they authenticate with SASL at
// the proxy (a client certificate names the client before its first
// request).
func (p *Proxy) earlyVersions() bool { return p.lateUpstream() && p.clientSASL() }

// lateConnect runs after the client authentication passed r: it dials the
// upstream as the client's principal if it is not dialled yet (in the
// single topology: sets who the brokers are dialled as), or answers r
// itself when r is an ApiVersions sent before authenticating.
func (c *conn) lateConnect(r *request) error {
	if !c.p.lateUpstream() || c.upDialled {
		return nil
	}
	principal, named := c.principal(), []any{}
	if principal == "" && c.p.clientSASL() {
		if r.hdr.Key != keyApiVersions {
			return nil // clientauth passes nothing else before authentication
		}
		return c.answerVersions(r)
	}
	if principal == "" {
		// No SASL at the proxy and no client certificate: Kafka's
		// name for such a client.
		principal = "User:" + anonymous
		named = []any{"principal", principal}
	}
	auth, err := upauth.As(c.p.identities, c.p.sec.auth, principal)
	if err != nil {
		if skipped, ok := c.p.sec.failures.allow("upstream-identity", time.Now()); ok {
			c.p.log.Warn("client refused: its principal has no upstream credentials in --upstream-principal-credentials and the proxy has none of its own (--upstream-sasl-mechanism)",
				append(append(c.who(), named...), "similar_not_logged", skipped)...)
		}
		return fmt.Errorf("%w: %s: %w", ErrClientAuth, principal, err)
	}
	c.upDialled = true
	if c.one != nil {
		// Read by the dials of parts of later requests, which the
		// sequencer's lock orders after this.
		c.sasl.auth = auth
		return nil
	}
	return c.dial(auth)
}

// answerVersions answers an ApiVersions request sent before the client
// authenticated from the upstream's versions, as the upstream would.
func (c *conn) answerVersions(r *request) error {
	addr := ""
	if c.target.resolve != nil {
		addr, _ = c.target.resolve()
	}
	known := c.p.upVersions.Get(addr)
	if known == nil {
		if err := c.p.learnVersions(c.p.ctx, addr); err != nil {
			return fmt.Errorf("%w: the upstream's API versions: %v", ErrUpstreamFailed, err)
		}
		known = c.p.upVersions.Get(addr)
	}
	resp := *known
	resp.ApiKeys = slices.Clone(known.ApiKeys)
	resp.Version = r.hdr.Version
	resp.ErrorCode, resp.ThrottleMillis = 0, 0
	if c.one != nil {
		c.clampSingleVersions(&resp)
	} else {
		c.clampVersions(&resp)
	}
	c.answerLocally(r, wire.AppendResponse(nil, r.hdr.Correlation, false, resp.AppendTo))
	return nil
}

// learnVersions asks addr, or the configured upstreams in turn when addr
// is empty or fails, for its API versions.
func (p *Proxy) learnVersions(ctx context.Context, addr string) error {
	return p.upVersions.Learn(ctx, addr, p.current().Upstreams, p.probeVersions)
}

// learnEarlyVersions learns the upstream's API versions at discovery when
// clients may ask for them before their upstream is dialled.
func (p *Proxy) learnEarlyVersions(ctx context.Context) {
	if !p.earlyVersions() {
		return
	}
	if err := p.learnVersions(ctx, ""); err != nil {
		p.log.Warn("the upstream's API versions are not known yet; the first client to ask will wait for them", "err", err)
	}
}

// keepVersions records an ApiVersions answer of the upstream at addr
// before it is clamped for the client.
func (p *Proxy) keepVersions(addr string, resp *kmsg.ApiVersionsResponse) {
	if p.earlyVersions() {
		p.upVersions.Keep(addr, resp)
	}
}
