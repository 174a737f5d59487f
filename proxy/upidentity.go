package proxy

// Who a client connection reaches the upstream as, when the proxy
// authenticates its clients (clientauth.go). Its upstream connection is
// dialled only once the client has authenticated: a client nobody knows
// costs the cluster nothing. It authenticates upstream with the
// credentials mapped to the client's principal (WithUpstreamIdentities,
// --upstream-principal-credentials), else with the proxy's own
// (--upstream-sasl-mechanism), else, with no mapping configured, with
// none, as before client authentication. A principal the mapping leaves
// out while the proxy has no credentials of its own is refused: reaching
// the cluster in no one's name is not what a mapping asks for.
//
// Before authentication the only request forwarded would be ApiVersions;
// the proxy answers it from the upstream's versions, learned at discovery
// and from every ApiVersions answer since (upVersions), clamped as an
// answer from the upstream is. In the single topology the client's
// connections to the brokers are dialled as its parts need them, each as
// its principal; the cluster view (package single) keeps its own
// connections, in the proxy's name. A re-authentication (KIP-368) keeps the
// principal (clientauth refuses a change), so the upstream connection and
// its identity stay as they are.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

// UpstreamIdentities maps a principal to the credentials it reaches the
// upstream with; upauth.Principals is the implementation.
type UpstreamIdentities interface {
	// For returns principal's credentials, nil when it has none.
	For(principal string) *upauth.Authenticator
}

// WithUpstreamIdentities makes each authenticated client reach the
// upstream with the credentials ids maps its principal to. In the single
// topology the view of the cluster still dials as the proxy, so against
// a cluster that requires SASL the proxy needs credentials of its own.
func WithUpstreamIdentities(ids UpstreamIdentities) Option {
	return func(p *Proxy) { p.identities = ids }
}

// errNoIdentity refuses a principal with no upstream credentials.
var errNoIdentity = errors.New("no upstream credentials for this principal")

type identityKey struct{}

// withIdentity makes dialSecure authenticate as a on the dials under ctx;
// nil leaves the proxy's own identity.
func withIdentity(ctx context.Context, a *upauth.Authenticator) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, a)
}

// identity is who a dial under ctx authenticates as: the identity ctx
// carries, or the proxy's own (nil: none).
func (p *Proxy) identity(ctx context.Context) *upauth.Authenticator {
	if a, ok := ctx.Value(identityKey{}).(*upauth.Authenticator); ok {
		return a
	}
	return p.sec.auth
}

// gateKey is the key of an authentication's back-off: the address for the
// proxy's own identity, the address and user for another, so that one
// principal's refused credentials hold back no one else's dials.
func gateKey(addr string, auth, own *upauth.Authenticator) string {
	if auth == nil || auth == own {
		return addr
	}
	return addr + " as " + auth.Mechanism() + " " + auth.User()
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

// upstreamAs returns who principal reaches the upstream as (nil: no
// SASL), or errNoIdentity.
func (p *Proxy) upstreamAs(principal string) (*upauth.Authenticator, error) {
	if p.identities == nil {
		return p.sec.auth, nil
	}
	if a := p.identities.For(principal); a != nil {
		return a, nil
	}
	if p.sec.auth != nil {
		return p.sec.auth, nil
	}
	return nil, errNoIdentity
}

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
	auth, err := c.p.upstreamAs(principal)
	if err != nil {
		if skipped, ok := c.p.sec.failures.allow("upstream-identity", time.Now()); ok {
			c.p.log.Warn("client refused: its principal has no upstream credentials in --upstream-principal-credentials and the proxy has none of its own (--upstream-sasl-mechanism)",
				append(append(c.who(), named...), "similar_not_logged", skipped)...)
		}
		return fmt.Errorf("%w: %s: %w", ErrClientAuth, principal, errNoIdentity)
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
	known := c.p.upVersions.get(addr)
	if known == nil {
		if err := c.p.learnVersions(c.p.ctx, addr); err != nil {
			return fmt.Errorf("%w: the upstream's API versions: %v", ErrUpstreamFailed, err)
		}
		known = c.p.upVersions.get(addr)
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

// upVersions are the ApiVersions answers of the upstream, per address,
// and the last one of any, for answers given before a client's upstream
// connection is dialled. An address is one the configuration or the
// upstream's metadata names, so the map is bounded by the node table.
type upVersions struct {
	mu     sync.Mutex
	byAddr map[string]*kmsg.ApiVersionsResponse
	last   *kmsg.ApiVersionsResponse
}

// learn records resp, an answer from addr, unless it is in error or of a
// lower version than the one held (a lower version carries fewer fields).
// resp is kept: the caller must not change it after.
func (v *upVersions) learn(addr string, resp *kmsg.ApiVersionsResponse) {
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byAddr == nil {
		v.byAddr = make(map[string]*kmsg.ApiVersionsResponse)
	}
	if old := v.byAddr[addr]; old == nil || old.Version <= resp.Version {
		v.byAddr[addr] = resp
	}
	if v.last == nil || v.last.Version <= resp.Version {
		v.last = resp
	}
}

// get returns the answer of addr, or of any address; nil when none is
// known. It must not be changed.
func (v *upVersions) get(addr string) *kmsg.ApiVersionsResponse {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r := v.byAddr[addr]; r != nil {
		return r
	}
	return v.last
}

// learnVersionsAt is the ApiVersions version the proxy asks the upstream
// for its versions: v3 and later carry the features clients read.
const learnVersionsAt = 3

// learnVersions asks addr, or the configured upstreams in turn when addr
// is empty or fails, for its API versions. One probe runs at a time; a
// probe that finds the versions learned meanwhile asks nothing.
func (p *Proxy) learnVersions(ctx context.Context, addr string) error {
	p.versionsProbe.Lock()
	defer p.versionsProbe.Unlock()
	if p.upVersions.get(addr) != nil {
		return nil
	}
	addrs := p.current().Upstreams
	if addr != "" {
		addrs = append([]string{addr}, addrs...)
	}
	var errs []error
	for _, a := range addrs {
		resp, err := p.probeVersions(ctx, a, learnVersionsAt)
		if err == nil && resp.ErrorCode != 0 {
			resp, err = p.probeVersions(ctx, a, 0)
		}
		if err == nil {
			p.upVersions.learn(a, resp)
			return nil
		}
		errs = append(errs, err)
	}
	return oneLine(errs...)
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
	if !p.earlyVersions() || resp.ErrorCode == kerr.UnsupportedVersion.Code {
		return
	}
	kept := *resp
	kept.ApiKeys = slices.Clone(resp.ApiKeys)
	p.upVersions.learn(addr, &kept)
}
