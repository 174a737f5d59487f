// Package clientauth authenticates clients at the proxy, as a Kafka
// broker's SASL listener does (Apache Kafka's SaslServerAuthenticator):
// it owns one connection's authentication state and decides, for each
// request the client sends, whether the proxy forwards it, answers it
// itself, or closes the connection. The SASL mechanisms themselves are
// authn's; this package holds the protocol around them: SaslHandshake v0
// and v1, SaslAuthenticate, the raw tokens that follow a v0 handshake,
// session lifetimes and re-authentication (KIP-368), and the answer and
// delayed close of a refusal (KIP-152, KIP-306).
//
// It holds no socket and no lock: the proxy's client reader calls a
// Session, one request at a time, in the order the client sent them, and
// delivers what it answers in that request's place among the responses.
package clientauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/wire"
)

// API keys the gate answers or lets through before authentication.
const (
	keyApiVersions      = wire.ApiVersionsKey
	keySaslHandshake    = 17
	keySaslAuthenticate = 36
)

// MaxUnauthenticatedFrame bounds a frame a client sends before it has
// authenticated, as Kafka's sasl.server.max.receive.size (512 KiB) does:
// SASL messages are small, and a client nobody knows must not make the
// proxy read and hold a large one.
const MaxUnauthenticatedFrame = 512 << 10

// Errors a Verdict closes a connection with. Match them with errors.Is.
var (
	// ErrRefused: the client's credentials, or its mechanism, were
	// refused. The error's text says why without any secret.
	ErrRefused = errors.New("client authentication failed")
	// ErrIllegalState: a request the SASL state does not allow (Kafka's
	// ILLEGAL_SASL_STATE): anything but ApiVersions and SaslHandshake
	// before authentication, anything but SaslAuthenticate during it.
	ErrIllegalState = errors.New("request not allowed before authentication")
	// ErrSessionExpired: the session's lifetime ended and the client sent
	// a request other than the SaslHandshake that re-authenticates.
	ErrSessionExpired = errors.New("authentication session expired")
	// ErrMalformed: a SaslHandshake or SaslAuthenticate body that does
	// not decode.
	ErrMalformed = errors.New("malformed SASL request")
)

// Action is what the proxy does with a request, or after a raw token.
type Action uint8

// Actions.
const (
	// Pass: the request goes on as it would without client
	// authentication.
	Pass Action = iota
	// Answer: Verdict.Response is delivered in the request's place.
	Answer
	// AnswerThenTokens: Response is delivered, and once every response
	// before it is written the client sends raw SASL tokens (the flow of
	// SaslHandshake v0), each handed to Session.Token.
	AnswerThenTokens
	// AnswerThenClose: Response is delivered, then, after Delay, the
	// connection closes with Err.
	AnswerThenClose
	// Close: the connection closes with Err at once; the request gets no
	// answer.
	Close
)

// Verdict is the gate's decision on one request or one raw token.
type Verdict struct {
	Action Action
	// Response is a whole frame, its length prefix included: a Kafka
	// response carrying the request's correlation id, or, from Token, a
	// raw SASL token.
	Response []byte
	// Err is why the connection closes (AnswerThenClose, Close).
	Err error
	// Delay is how long an AnswerThenClose holds the connection before
	// closing it (authn.FailureDelay), so that a client guessing
	// passwords gets slow answers.
	Delay time.Duration
}

// Session is one connection's authentication, called by the proxy's
// client reader only.
type Session interface {
	// Request decides a request read from the client, before it is
	// sequenced. frame is the request as read, its length prefix
	// included (only its head for a large Produce streamed upstream); it
	// is read only during the call. h is its parsed header.
	Request(h wire.RequestHeader, frame []byte) Verdict
	// Token decides a raw SASL token (without its length prefix) after a
	// verdict of AnswerThenTokens: AnswerThenTokens again while the
	// exchange goes on, Answer once it succeeded, AnswerThenClose or
	// Close when it failed.
	Token(tok []byte) Verdict
	// Principal is who the client is, as Kafka writes it
	// ("User:alice"); empty until known.
	Principal() string
	// Claimed is whom the client named as itself in its last SASL
	// exchange, proven or not, as Kafka writes a principal, for the
	// audit of a refusal: the SCRAM or PLAIN user name, the principal
	// claim of an OAUTHBEARER token whatever its signature. Empty when
	// the exchange named no one. Never a password, token or proof; at
	// most MaxClaimed bytes of the name.
	Claimed() string
	// CertRefused is why the client certificate maps to no principal,
	// when the gate refuses the connection for it; nil otherwise.
	CertRefused() error
}

// MaxClaimed bounds the name Session.Claimed gives: the client chose
// it, and it goes into every record of its refusal.
const MaxClaimed = 256

// Config configures a Gate. The zero value authenticates nobody and lets
// every request pass.
type Config struct {
	// Mechanisms are the SASL mechanisms clients may use, in the order
	// SaslHandshake lists them. Empty: the gate answers no SASL request
	// (they pass, as without the gate).
	Mechanisms []authn.Mechanism
	// MaxSessionLifetime bounds every session (Kafka's
	// connections.max.reauth.ms): a session ends at the smaller of it and
	// the mechanism's own lifetime, which SaslAuthenticate v1 and later
	// tell the client, and the client must re-authenticate before then.
	// Zero: no bound of its own.
	MaxSessionLifetime time.Duration
	// CertPrincipal gives the principal of a client that presented a
	// certificate, when the gate answers no SASL (Kafka's
	// ssl.principal.mapping.rules; with SASL, the SASL principal is the
	// client's, as on Kafka's SASL_SSL listeners). An error refuses the
	// client at its first request, as Kafka refuses a subject no rule
	// maps. Nil: such clients have no principal of their own.
	CertPrincipal func(*x509.Certificate) (authn.Principal, error)
	// Metrics counts the authentications; nil counts nothing.
	Metrics *metrics.Metrics
	// Now reads the clock; nil is time.Now. Tests move it.
	Now func() time.Time
}

// Gate authenticates the clients of one proxy. It is safe for concurrent
// use; each connection has a Session of its own.
type Gate struct {
	mechs map[string]authn.Mechanism
	names []string
	cfg   Config
}

// New returns a gate for cfg.
func New(cfg Config) *Gate {
	g := &Gate{mechs: make(map[string]authn.Mechanism, len(cfg.Mechanisms)), cfg: cfg}
	for _, m := range cfg.Mechanisms {
		g.mechs[m.Name()] = m
		g.names = append(g.names, m.Name())
	}
	if g.cfg.Now == nil {
		g.cfg.Now = time.Now
	}
	return g
}

// SASL reports whether the gate answers clients' SASL itself.
func (g *Gate) SASL() bool { return len(g.names) > 0 }

// Open begins the authentication of one connection; cs is its TLS state
// after the handshake, nil on a plaintext connection.
func (g *Gate) Open(cs *tls.ConnectionState) Session {
	s := &session{g: g, tls: cs != nil}
	if g.SASL() {
		return s
	}
	s.state = stateOpen
	if cs != nil && len(cs.PeerCertificates) > 0 && g.cfg.CertPrincipal != nil {
		p, err := g.cfg.CertPrincipal(cs.PeerCertificates[0])
		if err != nil {
			s.state, s.refused = stateFailed, fmt.Errorf("%w: client certificate: %w", ErrRefused, err)
		} else {
			s.cert, s.principal = true, p
		}
	}
	return s
}

type state uint8

const (
	stateStart      state = iota // ApiVersions or a SaslHandshake
	stateHandshaken              // a SaslHandshake v1 was accepted: SaslAuthenticate
	stateTokens                  // a SaslHandshake v0 was accepted: raw tokens
	stateDone                    // authenticated
	stateFailed                  // refused; the connection is closing
	stateOpen                    // no SASL at the proxy: everything passes
)

type session struct {
	g     *Gate
	tls   bool
	state state
	mech  authn.Mechanism
	x     authn.Exchange
	// principal is who authenticated, or whom the certificate names
	// (cert) until a SASL exchange succeeds.
	principal authn.Principal
	cert      bool
	authed    bool // a SASL exchange succeeded on this connection
	// reauth: the exchange under way re-authenticates a session.
	reauth bool
	// expires ends the session; zero: never.
	expires time.Time
	// refused is why a client whose certificate maps to no principal is
	// closed.
	refused error
	// badMech refuses a re-authentication that changed mechanism.
	badMech error
	// reauthAt is when the last re-authentication began; zero: none.
	reauthAt time.Time
}

// minReauthInterval is the least time between two re-authentications of a
// connection, as Kafka's KafkaChannel allows.
const minReauthInterval = time.Second

func (s *session) Principal() string {
	if !s.authed && !s.cert {
		return ""
	}
	return s.principal.String()
}

func (s *session) Claimed() string {
	c, ok := s.x.(authn.Claimant)
	if !ok {
		return ""
	}
	p, ok := c.Claimed()
	if !ok {
		return ""
	}
	if len(p.Name) > MaxClaimed {
		n := MaxClaimed
		for n > 0 && !utf8.RuneStart(p.Name[n]) {
			n--
		}
		p.Name = p.Name[:n] + "..."
	}
	return p.String()
}

func (s *session) CertRefused() error { return s.refused }

func (s *session) Request(h wire.RequestHeader, frame []byte) Verdict {
	switch s.state {
	case stateOpen:
		return Verdict{Action: Pass}
	case stateStart:
		switch h.Key {
		case keyApiVersions:
			// Clients learn the SASL versions before they authenticate,
			// and may ask again at a lower version after
			// UNSUPPORTED_VERSION.
			return Verdict{Action: Pass}
		case keySaslHandshake:
			return s.handshake(h, frame)
		}
		return s.illegal(h, "before authentication")
	case stateHandshaken:
		if h.Key == keySaslAuthenticate {
			return s.authenticate(h, frame)
		}
		return s.illegal(h, "during authentication")
	case stateDone:
		if h.Key == keySaslHandshake {
			if h.Version == 0 {
				// The raw tokens of v0 cannot follow requests in
				// flight; KIP-368 re-authenticates with v1.
				return s.illegal(h, "after authentication (re-authentication needs SaslHandshake v1)")
			}
			now := s.g.cfg.Now()
			if s.expires.IsZero() || !s.reauthAt.IsZero() && now.Sub(s.reauthAt) < minReauthInterval {
				// As Kafka's broker: a session without end is not
				// renewed, nor one renewed less than a second ago (each
				// costs a key derivation); the handshake is answered
				// with an error and the session goes on.
				resp := kmsg.NewPtrSASLHandshakeResponse()
				resp.Version = h.Version
				resp.ErrorCode = kerr.IllegalSaslState.Code
				return Verdict{Action: Answer, Response: wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)}
			}
			s.reauth, s.reauthAt = true, now
			return s.handshake(h, frame)
		}
		if !s.expires.IsZero() && s.g.cfg.Now().After(s.expires) {
			return Verdict{Action: Close, Err: fmt.Errorf("%w: %s v%d after the session of %s ended without re-authentication",
				ErrSessionExpired, kmsg.NameForKey(h.Key), h.Version, s.principal)}
		}
		if h.Key == keySaslAuthenticate {
			// As Kafka answers it once a session is established.
			return s.answerAuthenticate(h, kerr.IllegalSaslState.Code, "SaslAuthenticate after successful authentication", nil, 0)
		}
		return Verdict{Action: Pass}
	}
	if s.refused != nil {
		return Verdict{Action: Close, Err: s.refused}
	}
	return Verdict{Action: Close, Err: fmt.Errorf("%w: %s v%d after a refused authentication", ErrIllegalState, kmsg.NameForKey(h.Key), h.Version)}
}

// illegal closes the connection, as Kafka does on ILLEGAL_SASL_STATE.
func (s *session) illegal(h wire.RequestHeader, when string) Verdict {
	s.state = stateFailed
	return Verdict{Action: Close, Err: fmt.Errorf("%w: %s v%d %s", ErrIllegalState, kmsg.NameForKey(h.Key), h.Version, when)}
}

// maxNameInError bounds a client-chosen mechanism name quoted in an error.
const maxNameInError = 32

func (s *session) handshake(h wire.RequestHeader, frame []byte) Verdict {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = h.Version
	if err := readBody(req, h, frame); err != nil {
		s.state = stateFailed
		return Verdict{Action: Close, Err: fmt.Errorf("%w: SaslHandshake v%d: %v", ErrMalformed, h.Version, err)}
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = h.Version
	resp.SupportedMechanisms = s.g.names
	m := s.g.mechs[req.Mechanism]
	var refused error
	switch {
	case m == nil:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		name := req.Mechanism
		if len(name) > maxNameInError {
			name = name[:maxNameInError] + "..."
		}
		refused = fmt.Errorf("%w: mechanism %s is not enabled", ErrRefused, strconv.Quote(name))
	case s.reauth && m != s.mech:
		// As Kafka: the handshake is answered, and the exchange that
		// follows refused, since the mechanism may not change.
		s.badMech = fmt.Errorf("%w: SASL mechanism %s is not supported for re-authentication of mechanism %s",
			authn.ErrAuthentication, m.Name(), s.mech.Name())
		s.state = stateHandshaken
		return Verdict{Action: Answer, Response: wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)}
	}
	out := wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)
	if refused != nil {
		// Kafka closes the connection after this answer.
		s.state = stateFailed
		return Verdict{Action: AnswerThenClose, Response: out, Err: refused, Delay: authn.FailureDelay}
	}
	s.mech, s.x = m, m.Start(s.tls)
	if h.Version == 0 {
		s.state = stateTokens
		return Verdict{Action: AnswerThenTokens, Response: out}
	}
	s.state = stateHandshaken
	return Verdict{Action: Answer, Response: out}
}

func (s *session) authenticate(h wire.RequestHeader, frame []byte) Verdict {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = h.Version
	if err := readBody(req, h, frame); err != nil {
		s.state = stateFailed
		return Verdict{Action: Close, Err: fmt.Errorf("%w: SaslAuthenticate v%d: %v", ErrMalformed, h.Version, err)}
	}
	if s.badMech != nil {
		err := s.badMech
		v := s.fail(err)
		v.Response = s.answerAuthenticate(h, kerr.SaslAuthenticationFailed.Code, clientMessage(err), nil, 0).Response
		return v
	}
	reply, done, err := s.x.Step(req.SASLAuthBytes)
	if err != nil {
		v := s.fail(err)
		a := s.answerAuthenticate(h, kerr.SaslAuthenticationFailed.Code, clientMessage(err), reply, 0)
		v.Response = a.Response
		return v
	}
	if !done {
		return s.answerAuthenticate(h, 0, "", reply, 0)
	}
	if err := s.succeed(); err != nil {
		v := s.fail(err)
		a := s.answerAuthenticate(h, kerr.SaslAuthenticationFailed.Code, clientMessage(err), nil, 0)
		v.Response = a.Response
		return v
	}
	var life time.Duration
	if !s.expires.IsZero() && h.Version >= 1 {
		// SaslAuthenticate v0 has no field to tell it in; the session
		// ends all the same, as Kafka ends it.
		life = s.expires.Sub(s.g.cfg.Now())
	}
	return s.answerAuthenticate(h, 0, "", reply, life)
}

// readBody decodes the body of frame into req.
func readBody(req kmsg.Request, h wire.RequestHeader, frame []byte) error {
	if h.Body <= 0 || len(frame) < h.Body {
		return errors.New("no body")
	}
	return req.ReadFrom(frame[h.Body:])
}

// answerAuthenticate builds a SaslAuthenticate response.
func (s *session) answerAuthenticate(h wire.RequestHeader, code int16, msg string, reply []byte, life time.Duration) Verdict {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = h.Version
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	if reply == nil {
		reply = []byte{}
	}
	resp.SASLAuthBytes = reply
	if life > 0 {
		resp.SessionLifetimeMillis = max(life.Milliseconds(), 1)
	}
	return Verdict{Action: Answer, Response: wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)}
}

// clientMessage is the text a refusal sends the client: authn's, which
// holds no secret, or the plain refusal for any other error.
func clientMessage(err error) string {
	if errors.Is(err, authn.ErrAuthentication) {
		return err.Error()
	}
	return authn.ErrAuthentication.Error()
}

// fail ends the exchange with a refusal.
func (s *session) fail(err error) Verdict {
	s.state = stateFailed
	s.g.cfg.Metrics.ClientAuthentication(s.mech.Name(), metrics.ResultFailure)
	if !errors.Is(err, authn.ErrAuthentication) {
		err = fmt.Errorf("%w: %w", authn.ErrAuthentication, err)
	}
	var oauth *authn.OAuthRefusal
	if errors.As(err, &oauth) {
		// Its message is the client's; its reason is the log's.
		err = fmt.Errorf("%w (%s)", err, oauth.Reason)
	}
	return Verdict{Action: AnswerThenClose, Err: fmt.Errorf("%w: %s: %w", ErrRefused, s.mech.Name(), err), Delay: authn.FailureDelay}
}

// errPrincipalChanged refuses a re-authentication as someone else, as
// Kafka does.
var errPrincipalChanged = fmt.Errorf("%w: the principal may not change on re-authentication", authn.ErrAuthentication)

// succeed records the end of a successful exchange and when the session
// ends. As Kafka does, the session ends whether or not the client could
// be told (SaslAuthenticate v1+ tells it): a client that cannot
// re-authenticate is disconnected then, and connects again. An error
// refuses the exchange after all.
func (s *session) succeed() error {
	p := s.x.Principal()
	if s.authed && p != s.principal {
		return errPrincipalChanged
	}
	s.principal, s.authed, s.reauth = p, true, false
	s.state = stateDone
	s.expires = time.Time{}
	if life := s.mechLifetime(); life > 0 {
		s.expires = s.g.cfg.Now().Add(life)
	}
	s.x = nil
	s.g.cfg.Metrics.ClientAuthentication(s.mech.Name(), metrics.ResultSuccess)
	return nil
}

// mechLifetime is the session's lifetime: the smaller of the exchange's
// own and the configured bound, zero when neither bounds it.
func (s *session) mechLifetime() time.Duration {
	life, bound := s.x.Lifetime(), s.g.cfg.MaxSessionLifetime
	if bound > 0 && (life <= 0 || bound < life) {
		life = bound
	}
	return life
}

func (s *session) Token(tok []byte) Verdict {
	if s.state != stateTokens {
		s.state = stateFailed
		return Verdict{Action: Close, Err: fmt.Errorf("%w: a raw SASL token outside the SaslHandshake v0 flow", ErrIllegalState)}
	}
	reply, done, err := s.x.Step(tok)
	if err != nil {
		v := s.fail(err)
		if reply != nil {
			v.Response = rawToken(reply)
		}
		return v
	}
	if !done {
		return Verdict{Action: AnswerThenTokens, Response: rawToken(reply)}
	}
	if err := s.succeed(); err != nil {
		return s.fail(err)
	}
	return Verdict{Action: Answer, Response: rawToken(reply)}
}

// rawToken frames a token as the v0 flow sends it: a length prefix, no
// Kafka header. An empty token is still sent (Kafka's PLAIN answers one).
func rawToken(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b))), b...)
}
