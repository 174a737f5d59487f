package proxy

// Client authentication at the proxy: the connection's side of the seam
// with package clientauth, which owns the SASL state and decides. The
// client reader hands it every request before the request is sequenced
// (screen); a request it answers becomes a local response, delivered in
// its place among the responses like any other, and what must follow that
// answer (raw tokens, a delayed close) runs once the request is submitted
// (afterScreen). Nothing a client sends for SASL reaches the upstream.

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// ClientAuth authenticates the clients of every listener;
// clientauth.Gate is the implementation.
type ClientAuth interface {
	// SASL reports whether the proxy answers clients' SASL itself. False:
	// their SaslHandshake and SaslAuthenticate are passed through, or
	// refused while the proxy authenticates upstream, as without it.
	SASL() bool
	// Open begins one connection's authentication; cs is the client's
	// TLS state, nil on a plaintext listener.
	Open(cs *tls.ConnectionState) clientauth.Session
}

// WithClientAuth makes the proxy authenticate its clients with a.
func WithClientAuth(a ClientAuth) Option {
	return func(p *Proxy) { p.clientAuth = a }
}

// connAuth is a connection's authentication; client reader only.
type connAuth struct {
	s clientauth.Session // made at the first request, after the TLS handshake
	// after is the verdict on the request just submitted, when something
	// follows its answer.
	after clientauth.Verdict
}

// who are the attributes that name the connection in a log line: the
// client's address, the node, and the principal once known.
func (c *conn) who() []any {
	attrs := []any{"client", c.client.RemoteAddr().String(), "node", c.node}
	if p := c.principal(); p != "" {
		attrs = append(attrs, "principal", p)
	}
	return attrs
}

// principal is who the client is, once known; "" otherwise.
func (c *conn) principal() string {
	if c.auth.s == nil {
		return ""
	}
	return c.auth.s.Principal()
}

// clientSASL reports whether the proxy answers the client's SASL itself.
func (p *Proxy) clientSASL() bool { return p.clientAuth != nil && p.clientAuth.SASL() }

// advertiseClientSASL makes an ApiVersions answer list the SaslHandshake
// and SaslAuthenticate versions the client authentication serves, when it
// answers them (clientauth.Advertise).
func (p *Proxy) advertiseClientSASL(av *kmsg.ApiVersionsResponse) {
	if p.clientSASL() {
		clientauth.Advertise(av)
	}
}

// frameLimit is the largest frame the client may send now: max, or
// before it authenticated with SASL, no more than an exchange needs, so
// that a client nobody knows cannot make the proxy hold a large frame.
func (c *conn) frameLimit(max int32) int32 {
	if !c.p.clientSASL() || c.principal() != "" {
		return max
	}
	return min(max, clientauth.MaxUnauthenticatedFrame)
}

// unauthenticatedFrame closes a client that announced a frame above limit
// before it authenticated; what it sent before is answered first.
func (c *conn) unauthenticatedFrame(limit int32) error {
	c.finishInFlight()
	return c.authClosed(fmt.Errorf("%w: a frame of more than %d bytes before authentication", clientauth.ErrIllegalState, limit))
}

// screen hands r to the client authentication, then, if it passes, to the
// authorization (authz.go). An error closes the connection without an
// answer to r.
func (c *conn) screen(r *request) error {
	if err := c.screenAuth(r); err != nil {
		return err
	}
	return c.authorize(r)
}

// screenAuth hands r to the client authentication, when there is one.
func (c *conn) screenAuth(r *request) error {
	if c.p.clientAuth == nil {
		return nil
	}
	if c.auth.s == nil {
		var cs *tls.ConnectionState
		if tc, ok := c.client.(*tls.Conn); ok {
			st := tc.ConnectionState()
			cs = &st
		}
		c.auth.s = c.p.clientAuth.Open(cs)
	}
	var frame []byte
	if r.frame != nil {
		frame = r.frame.B
	}
	v := c.auth.s.Request(r.hdr, frame)
	c.auditSASL(r.hdr, frame, v)
	switch v.Action {
	case clientauth.Pass:
		return c.lateConnect(r)
	case clientauth.Close:
		return c.authClosed(v.Err)
	}
	c.answerLocally(r, v.Response)
	c.auth.after = v
	return nil
}

// answerLocally makes resp, a whole response frame, r's answer: the
// answer takes the request's place, sequenced as a barrier, written after
// every earlier response and before every later one; nothing is
// forwarded.
func (c *conn) answerLocally(r *request, resp []byte) {
	wire.Put(r.frame)
	r.frame = nil
	r.frameCharge.Release(c.p.budget)
	if r.split != nil {
		r.split.ReleaseAll(c.p.budget)
		r.split = nil
	}
	r.ord = ordering.Request{Kind: ordering.Barrier}
	r.noResp, r.forcedAck = false, false
	r.local = &wire.Buf{B: resp}
}

// afterScreen runs what follows the answer to the request just submitted:
// the raw tokens of a SaslHandshake v0, or the close after a refusal.
func (c *conn) afterScreen() error {
	v := c.auth.after
	c.auth.after = clientauth.Verdict{}
	switch v.Action {
	case clientauth.AnswerThenTokens:
		return c.authTokens()
	case clientauth.AnswerThenClose:
		// The refusal is delivered first, then the close waits, as
		// Kafka's does, so that guessing is slow.
		c.finishInFlight()
		t := time.NewTimer(v.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.halt:
		}
		return c.authClosed(v.Err)
	}
	return nil
}

// authTokens reads the raw SASL tokens that follow an accepted
// SaslHandshake v0 and writes the answers, until the exchange ends. They
// come once every earlier response is written, and nothing else is
// written meanwhile.
func (c *conn) authTokens() error {
	if err := c.waitQuiet(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	client := (*saslClient)(c)
	for {
		tok, err := client.Token()
		if err != nil {
			return err
		}
		v := c.auth.s.Token(tok[4:])
		c.auditToken(v)
		if len(v.Response) > 0 {
			if err := client.Write(v.Response); err != nil {
				return err
			}
		}
		switch v.Action {
		case clientauth.AnswerThenTokens:
			continue
		case clientauth.Answer:
			return nil
		case clientauth.AnswerThenClose:
			t := time.NewTimer(v.Delay)
			select {
			case <-t.C:
			case <-c.halt:
			}
			t.Stop()
		}
		return c.authClosed(v.Err)
	}
}

// authClosed logs, rate-limited, why the client authentication closes the
// connection, and returns the reason it closes with.
func (c *conn) authClosed(err error) error {
	if skipped, ok := c.p.sec.failures.allow("client-auth", time.Now()); ok {
		c.p.log.Info("client authentication closed the connection", append(c.who(), "reason", err.Error(), "similar_not_logged", skipped)...)
	}
	return fmt.Errorf("%w: %w", ErrClientAuth, err)
}
