package proxy

// SASL on a connection, in its two modes.
//
// Passed through (the default): a client's SaslHandshake and
// SaslAuthenticate are requests like any other, forwarded in order on its
// own upstream connection, so KIP-368 re-authentication works unchanged.
// The legacy flow is the exception: after a SaslHandshake v0 that the
// upstream accepts, the next frames in both directions are raw
// length-prefixed SASL tokens with no Kafka header. The client reader waits
// until the handshake's response is delivered and nothing is in flight,
// relays the mechanism's rounds token by token, and then returns to Kafka
// framing.
//
// From the proxy (upstream-sasl-mechanism): every upstream connection is
// authenticated when it is dialled (dialSecure), before any request is
// forwarded. Before the session the broker announced runs out, the client
// reader, holding the next request, waits until nothing is in flight and
// runs the exchange again on the idle connection: a barrier whose
// responses the proxy consumes, so nothing is reordered or lost in either
// ordering mode. A client's own SaslHandshake or SaslAuthenticate is
// answered by the proxy with an error.
//
// Terminated at the proxy (client-sasl-mechanisms): the client
// authentication answers the client's SASL itself (clientauth.go), and
// none of it reaches the upstream.
//
// What needs no connection is package clientsasl's: the refusal's answer,
// the v0 handshake and its answer read, the relay's rounds, the raw token
// reader. This file is the seam: it hands clientsasl the client's side
// (clientToken, writeClient) and the idle upstream connection.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/clientsasl"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

const (
	keySaslHandshake    = clientsasl.KeySaslHandshake
	keySaslAuthenticate = clientsasl.KeySaslAuthenticate
)

// reauthTimeout bounds a re-authentication exchange.
const reauthTimeout = 30 * time.Second

// saslState is a connection's SASL bookkeeping. The zero value has no
// session to renew and no legacy handshake pending.
type saslState struct {
	// reauthAt is when the proxy's own session on the upstream connection
	// must be renewed; zero: never. Client reader only.
	reauthAt time.Time
	// upAddr is the upstream's address: its host for mechanisms bound
	// to it, and its back-off after a refusal.
	upAddr string
	// auth is who the proxy authenticated the upstream connection as,
	// and renews the session as; nil: no SASL from the proxy.
	auth *upauth.Authenticator
	// v0Mech is the mechanism of a SaslHandshake v0 the client sent and
	// whose raw tokens follow its response. Client reader only.
	v0Mech string
	// v0Accepted is set by the upstream reader when the upstream accepted
	// that handshake.
	v0Accepted atomic.Bool
}

// startSession records the proxy's session on a new upstream connection.
func (c *conn) startSession(addr string, s upauth.Session, auth *upauth.Authenticator) {
	c.sasl.upAddr, c.sasl.auth = addr, auth
	c.sasl.reauthAt = s.ReauthAt
}

// prepareSASL handles a client's SaslHandshake or SaslAuthenticate at
// parse time: answered with an error when the proxy authenticates for the
// client; otherwise forwarded, remembering a v0 handshake's mechanism.
func (c *conn) prepareSASL(r *request) error {
	if c.p.clientSASL() {
		return nil // answered by the client authentication (screen)
	}
	if c.p.sec.auth != nil {
		c.refuseClientSASL(r)
		return nil
	}
	if r.hdr.Key != keySaslHandshake || r.hdr.Version != 0 {
		return nil
	}
	mech, err := clientsasl.HandshakeV0(r.frame.B[r.hdr.Body:])
	if err != nil {
		return err
	}
	c.sasl.v0Mech = mech
	return nil
}

// refuseClientSASL answers r in sequence with an error that says the proxy
// authenticates for the client: a handshake lists no mechanism, an
// authenticate fails with a message.
func (c *conn) refuseClientSASL(r *request) {
	out := clientsasl.Refuse(r.hdr)
	wire.Put(r.frame)
	r.frame = nil
	r.local = &wire.Buf{B: out}
	if skipped, ok := c.p.sec.failures.allow("client-sasl", time.Now()); ok {
		c.p.log.Warn("client sent SASL while the proxy authenticates for it; answered with an error",
			append(c.who(), "request", kmsg.NameForKey(r.hdr.Key), "similar_not_logged", skipped)...)
	}
}

// noteHandshakeResponse records whether the upstream accepted a
// SaslHandshake v0, whose raw tokens follow.
func (c *conn) noteHandshakeResponse(r *request, frame []byte) {
	if r.hdr.Version != 0 {
		return
	}
	if accepted, ok := clientsasl.Accepted(frame); ok {
		c.sasl.v0Accepted.Store(accepted)
	}
}

// beforeSubmit renews the proxy's session on the upstream connection when
// it is due, before the next request goes out.
func (c *conn) beforeSubmit() error {
	if c.sasl.reauthAt.IsZero() || time.Now().Before(c.sasl.reauthAt) {
		return nil
	}
	if err := c.waitQuiet(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.p.ctx, reauthTimeout)
	defer cancel()
	s, err := c.p.authenticate(ctx, c.sasl.auth, c.up, c.sasl.upAddr)
	if errors.Is(err, ErrUpstreamAuth) {
		return fmt.Errorf("re-authentication: %w", err)
	}
	if err != nil {
		return fmt.Errorf("%w: re-authentication: %v", ErrUpstreamFailed, err)
	}
	c.sasl.reauthAt = s.ReauthAt
	return nil
}

// afterSubmit relays the raw tokens of a legacy SASL exchange, when the
// request just submitted was a SaslHandshake v0.
func (c *conn) afterSubmit() error {
	if err := c.afterScreen(); err != nil {
		return err
	}
	if err := c.afterAuthorize(); err != nil {
		return err
	}
	mech := c.sasl.v0Mech
	if mech == "" {
		return nil
	}
	c.sasl.v0Mech = ""
	if err := c.waitQuiet(); err != nil {
		return err
	}
	if !c.sasl.v0Accepted.Swap(false) {
		// Refused mechanism: the client goes on in Kafka framing.
		return nil
	}
	// Nothing else is in flight, and wmu keeps any late deliverer off
	// the client socket.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return clientsasl.Relay(mech, (*saslClient)(c), c.up, upstreamTokenTimeout(c.lim.read))
}

// upstreamTokenTimeout bounds the wait for the upstream's raw SASL token:
// the read timeout clients have for theirs, or reauthTimeout where that is
// off.
func upstreamTokenTimeout(read time.Duration) time.Duration {
	if read > 0 {
		return read
	}
	return reauthTimeout
}

// saslClient is the client's side of a raw SASL token flow: the client
// reader's, holding wmu, with nothing else in flight.
type saslClient conn

// Token reads the client's next raw token. A token has the read timeout
// of a request, and the idle timeout does not apply: the exchange is in
// progress.
func (s *saslClient) Token() ([]byte, error) {
	c := (*conn)(s)
	c.setReadDeadline(c.lim.read)
	tok, err := clientsasl.ReadToken(&c.in)
	if err != nil {
		return nil, fmt.Errorf("%w: client SASL token: %v", ErrBadRequest, err)
	}
	return tok, nil
}

// Write writes b, a token or an answer, to the client.
func (s *saslClient) Write(b []byte) error {
	c := (*conn)(s)
	c.beginWrite()
	_, err := c.client.Write(b)
	c.endWrite()
	if err != nil {
		return fmt.Errorf("%w: client write: %v", errClientClosed, err)
	}
	return nil
}

// waitQuiet waits until no request is queued, in flight or undelivered and
// neither the upstream reader nor a flusher runs: the upstream connection
// then carries nothing, and the client reader alone may use it.
func (c *conn) waitQuiet() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quietWanted = true
	defer func() { c.quietWanted = false }()
	c.pauseRead()
	defer c.resumeRead()
	for !c.dead.Load() && (!c.seq.Idle() || c.reading || c.flushing || len(c.outq) > 0) {
		if c.lingering {
			// The reader waits for nothing: wake it now.
			c.up.SetReadDeadline(time.Now())
		}
		c.cond.Wait()
	}
	if c.dead.Load() {
		return c.reason
	}
	return nil
}
