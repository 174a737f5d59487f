package authn

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthConfig configures the OAUTHBEARER mechanism: signed JWTs checked
// against a JSON Web Key Set, as Kafka's broker-side JWT validator does
// (KIP-768).
type OAuthConfig struct {
	// JWKS is where the verification keys are: an https:// URL, fetched
	// at start and refreshed, or a file path, re-read when it changes.
	// Required.
	JWKS string
	// Issuer, if not empty, must equal the token's "iss".
	Issuer string
	// Audience, if not empty, must be one of the token's "aud" values.
	// Empty means the audience is not checked.
	Audience string
	// PrincipalClaim names the claim whose value, a string not blank, is
	// the principal's name, trimmed. Empty means "sub", as Kafka's
	// sasl.oauthbearer.sub.claim.name.
	PrincipalClaim string
	// ClockSkew is the leeway on "exp", "nbf" and "iat". Zero means 30 s,
	// Kafka's sasl.oauthbearer.clock.skew.seconds; negative means none.
	ClockSkew time.Duration
	// RefreshInterval is how often a URL is fetched again, or a file
	// looked at for a change. Zero means an hour for a URL (Kafka's
	// sasl.oauthbearer.jwks.endpoint.refresh.ms) and 10 s for a file.
	RefreshInterval time.Duration
	// FetchTimeout bounds one fetch of a URL. Zero means 10 s.
	FetchTimeout time.Duration
	// HTTPClient fetches a URL; its redirects are held to https. Nil
	// means a client with the system's roots.
	HTTPClient *http.Client
	// Logger receives failed refreshes. Nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// OAuthRefusal is the error of a refused OAUTHBEARER token. Its message
// is ErrAuthentication's, so that whatever reaches the client tells it
// nothing more; Reason says why, for the proxy's log. Neither holds the
// token.
type OAuthRefusal struct {
	Reason string
}

func (e *OAuthRefusal) Error() string { return ErrAuthentication.Error() }

// Unwrap makes errors.Is(err, ErrAuthentication) hold.
func (e *OAuthRefusal) Unwrap() error { return ErrAuthentication }

func oauthRefuse(format string, args ...any) error {
	return &OAuthRefusal{Reason: fmt.Sprintf(format, args...)}
}

const (
	oauthDefaultSkew         = 30 * time.Second
	oauthDefaultURLRefresh   = time.Hour
	oauthDefaultFileRefresh  = 10 * time.Second
	oauthDefaultFetchTimeout = 10 * time.Second
	// A JWKS is a few keys; a bound keeps a wrong URL or file from
	// filling memory.
	oauthMaxJWKS = 1 << 20
	// A token of an unknown key id makes the keys be read again at most
	// this often, so a client sending made-up key ids cannot turn the
	// proxy into a load on the identity provider.
	oauthUnknownKidInterval = 10 * time.Second
	// oauthMaxClientMessage bounds the client's first message: a JWT is
	// a few KiB.
	oauthMaxClientMessage = 64 << 10
)

// The signature algorithms a token may use: asymmetric only. "none" and
// the HMAC family are refused, so the public keys of the JWKS can never be
// used as an HMAC secret.
var oauthAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// OAuthBearer is the SASL/OAUTHBEARER mechanism (RFC 7628) as Kafka's
// broker runs it: the client sends a bearer JWT, the server checks its
// signature against the JWKS and its claims against the configuration.
// It is safe for concurrent use; Close stops the refresh of a URL.
type OAuthBearer struct {
	issuer   string
	audience string
	claim    string
	skew     time.Duration
	now      func() time.Time
	keys     oauthKeySource

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ Mechanism = (*OAuthBearer)(nil)

// NewOAuthBearer reads the JWKS once, so that a wrong path, URL or key set
// is an error at start, and for a URL starts its refresh.
func NewOAuthBearer(cfg OAuthConfig) (*OAuthBearer, error) {
	if cfg.JWKS == "" {
		return nil, errors.New("oauth: JWKS: a file path or an https URL is required")
	}
	m := &OAuthBearer{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		claim:    cfg.PrincipalClaim,
		skew:     cfg.ClockSkew,
		now:      cfg.Now,
	}
	if m.claim == "" {
		m.claim = "sub"
	}
	switch {
	case m.skew == 0:
		m.skew = oauthDefaultSkew
	case m.skew < 0:
		m.skew = 0
	}
	if m.now == nil {
		m.now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := cfg.FetchTimeout
	if timeout <= 0 {
		timeout = oauthDefaultFetchTimeout
	}

	if strings.Contains(cfg.JWKS, "://") {
		u, err := url.Parse(cfg.JWKS)
		if err != nil {
			return nil, fmt.Errorf("oauth: JWKS %q: %w", oauthSafeURL(cfg.JWKS), oauthStripURL(err))
		}
		if u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("oauth: JWKS %q: a URL must be https", oauthSafeURL(cfg.JWKS))
		}
		interval := cfg.RefreshInterval
		if interval <= 0 {
			interval = oauthDefaultURLRefresh
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &oauthRemote{
			url:      u.String(),
			client:   oauthHTTPClient(cfg.HTTPClient),
			timeout:  timeout,
			interval: interval,
			log:      log,
			now:      m.now,
			ctx:      ctx,
		}
		if err := r.refresh(true); err != nil {
			cancel()
			return nil, err
		}
		m.keys = r
		m.cancel = cancel
		m.wg.Add(1)
		go r.refreshLoop(&m.wg)
		return m, nil
	}

	interval := cfg.RefreshInterval
	if interval <= 0 {
		interval = oauthDefaultFileRefresh
	}
	f := &oauthFile{path: cfg.JWKS, interval: interval, log: log, now: m.now}
	if err := f.load(); err != nil {
		return nil, err
	}
	m.keys = f
	return m, nil
}

// Close stops the refresh of a URL and waits for it; it is idempotent.
func (m *OAuthBearer) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	return nil
}

// Name is the mechanism's name in SaslHandshake.
func (m *OAuthBearer) Name() string { return "OAUTHBEARER" }

// Start begins one exchange. A bearer token is a credential sent as is,
// like a PLAIN password; refusing it over plaintext is the listener's
// choice, not the mechanism's.
func (m *OAuthBearer) Start(bool) Exchange {
	return &oauthExchange{m: m}
}

// oauthExchange is one OAUTHBEARER exchange: the client's first message,
// then either success or, as RFC 7628 section 3.2.2 has it, an error
// message the client acknowledges with a lone %x01 before the failure.
type oauthExchange struct {
	m       *OAuthBearer
	state   int
	refusal error
	who     Principal
	expiry  time.Time
	// claimed is the principal claim of the client's token, read
	// whether or not its signature holds, for the audit of a refusal.
	claimed string
}

// Claimed implements Claimant: the configured principal claim of the
// token the client sent, if the token parses as a JWT; its signature and
// claims may have failed every check.
func (x *oauthExchange) Claimed() (Principal, bool) {
	if x.claimed == "" {
		return Principal{}, false
	}
	return Principal{Type: "User", Name: x.claimed}, true
}

const (
	oauthStateFirst = iota
	oauthStateErrorSent
	oauthStateDone
	oauthStateFailed
)

// oauthErrorReply is what Kafka sends a client whose token it refuses.
var oauthErrorReply = []byte(`{"status":"invalid_token"}`)

func (x *oauthExchange) Step(token []byte) ([]byte, bool, error) {
	switch x.state {
	case oauthStateFirst:
	case oauthStateErrorSent:
		x.state = oauthStateFailed
		if len(token) == 1 && token[0] == 0x01 {
			return nil, false, x.refusal
		}
		return nil, false, oauthRefuse("after the error reply, the client sent something other than its acknowledgement")
	default:
		x.state = oauthStateFailed
		return nil, false, oauthRefuse("message after the exchange ended")
	}

	msg, err := oauthParseClientFirst(token)
	if err != nil {
		x.state = oauthStateFailed
		return nil, false, err
	}
	who, expiry, err := x.m.validate(msg.token)
	if err != nil {
		x.claimed = x.m.unverifiedName(msg.token)
		// The client learns only that its token is invalid, and must
		// acknowledge before the exchange fails.
		x.state = oauthStateErrorSent
		x.refusal = err
		return oauthErrorReply, false, nil
	}
	// An authorization id is allowed, as SASL allows it, only when it
	// names the token's own principal: the proxy does not act for
	// another user.
	if msg.authzid != "" && msg.authzid != who {
		x.claimed = who
		x.state = oauthStateFailed
		return nil, false, oauthRefuse("authorization id differs from the token's principal")
	}
	x.state = oauthStateDone
	x.who = Principal{Type: "User", Name: who}
	x.expiry = expiry
	return []byte{}, true, nil
}

func (x *oauthExchange) Principal() Principal {
	if x.state != oauthStateDone {
		return Anonymous
	}
	return x.who
}

// Lifetime is the time left until the token's "exp". A token accepted
// within the clock skew after its expiry still gets a positive lifetime,
// a millisecond, since zero would mean "no limit".
func (x *oauthExchange) Lifetime() time.Duration {
	if x.state != oauthStateDone {
		return 0
	}
	return max(x.expiry.Sub(x.m.now()), time.Millisecond)
}

// oauthClientFirst is the client's first message, parsed.
type oauthClientFirst struct {
	authzid    string
	token      string
	extensions map[string]string
}

// oauthParseClientFirst reads RFC 7628's client initial response as Kafka
// reads it: "n," [ "a=" saslname ] "," %x01 then key=value pairs each
// ended by %x01, one of them auth=Bearer <token>, and a final %x01.
// Extension keys are letters; values are printable ASCII, space, tab, CR
// and LF. Channel binding ("y," or "p=") is refused, as Kafka does.
func oauthParseClientFirst(b []byte) (oauthClientFirst, error) {
	var out oauthClientFirst
	if len(b) > oauthMaxClientMessage {
		return out, oauthRefuse("client message of %d bytes is too long", len(b))
	}
	s := string(b)
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return out, oauthRefuse("malformed client message: GS2 header must start with \"n,\"")
	}
	comma := strings.IndexByte(rest, ',')
	if comma < 0 {
		return out, oauthRefuse("malformed client message: GS2 header not ended")
	}
	if gs2 := rest[:comma]; gs2 != "" {
		name, ok := strings.CutPrefix(gs2, "a=")
		if !ok || name == "" {
			return out, oauthRefuse("malformed client message: bad authorization id")
		}
		authzid, err := oauthDecodeSASLName(name)
		if err != nil {
			return out, err
		}
		out.authzid = authzid
	}
	rest = rest[comma+1:]
	body, ok := strings.CutPrefix(rest, "\x01")
	if !ok {
		return out, oauthRefuse("malformed client message: no separator after the GS2 header")
	}
	body, ok = strings.CutSuffix(body, "\x01")
	if !ok {
		return out, oauthRefuse("malformed client message: not ended by a separator")
	}
	// What is left is zero or more "key=value\x01".
	var auth string
	var haveAuth bool
	for body != "" {
		kv, tail, ok := strings.Cut(body, "\x01")
		if !ok {
			return out, oauthRefuse("malformed client message: key=value not ended by a separator")
		}
		body = tail
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !oauthIsKey(k) || !oauthIsValue(v) {
			return out, oauthRefuse("malformed client message: bad key=value pair")
		}
		if k == "auth" {
			if haveAuth {
				return out, oauthRefuse("malformed client message: auth given twice")
			}
			auth, haveAuth = v, true
			continue
		}
		if out.extensions == nil {
			out.extensions = make(map[string]string)
		}
		out.extensions[k] = v
	}
	if !haveAuth {
		return out, oauthRefuse("malformed client message: no auth")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return out, oauthRefuse("malformed client message: auth scheme is not Bearer")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || !oauthIsTokenChars(token) {
		return out, oauthRefuse("malformed client message: bad bearer token characters")
	}
	out.token = token
	return out, nil
}

// oauthDecodeSASLName undoes RFC 5801's escapes of ',' and '=' in an
// authorization id.
func oauthDecodeSASLName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", oauthRefuse("malformed client message: bad escape in authorization id")
			}
			i += 2
		case c == 0 || c > 0x7f:
			return "", oauthRefuse("malformed client message: bad character in authorization id")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func oauthIsKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

func oauthIsValue(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// oauthIsTokenChars holds Kafka's bearer token alphabet: base64url and
// the dots of a JWT.
func oauthIsTokenChars(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// validate checks a JWT and gives its principal's name and expiry. Its
// errors are *OAuthRefusal.
func (m *OAuthBearer) validate(raw string) (string, time.Time, error) {
	tok, err := jwt.ParseSigned(raw, oauthAlgorithms)
	if err != nil {
		// The algorithm allowlist is applied here: "none" and HS256 land
		// in this branch.
		return "", time.Time{}, oauthRefuse("not a signed JWT with an allowed algorithm: %v", oauthLibError(err))
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, oauthRefuse("JWT has %d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	alg := jose.SignatureAlgorithm(h.Algorithm)

	candidates, known := m.keys.candidates(h.KeyID)
	if !known {
		return "", time.Time{}, oauthRefuse("no key with id %q in the JWKS", oauthShort(h.KeyID))
	}
	verified := false
	var lastErr error
	for _, k := range candidates {
		if !oauthKeyFits(k, alg) {
			continue
		}
		// Claims with no destination verifies the signature only.
		if err := tok.Claims(k.Key); err != nil {
			lastErr = err
			continue
		}
		verified = true
		break
	}
	if !verified {
		if lastErr == nil {
			return "", time.Time{}, oauthRefuse("no key with id %q fits algorithm %s", oauthShort(h.KeyID), alg)
		}
		return "", time.Time{}, oauthRefuse("signature not valid: %v", oauthLibError(lastErr))
	}

	// The signature is good, so the claims can be read. Only the claims
	// checked are given types, so that another claim of an unexpected type
	// (a numeric "sub" beside a configured principal claim) is no error, as
	// in Kafka.
	var std struct {
		Issuer    string           `json:"iss"`
		Audience  jwt.Audience     `json:"aud"`
		Expiry    *jwt.NumericDate `json:"exp"`
		NotBefore *jwt.NumericDate `json:"nbf"`
		IssuedAt  *jwt.NumericDate `json:"iat"`
	}
	var all map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&std, &all); err != nil {
		return "", time.Time{}, oauthRefuse("claims not valid: %v", oauthLibError(err))
	}
	// Kafka's broker requires both.
	if std.Expiry == nil {
		return "", time.Time{}, oauthRefuse("JWT has no exp")
	}
	if std.IssuedAt == nil {
		return "", time.Time{}, oauthRefuse("JWT has no iat")
	}
	expect := jwt.Expected{Issuer: m.issuer, Time: m.now()}
	if m.audience != "" {
		expect.AnyAudience = jwt.Audience{m.audience}
	}
	claims := jwt.Claims{Issuer: std.Issuer, Audience: std.Audience, Expiry: std.Expiry, NotBefore: std.NotBefore, IssuedAt: std.IssuedAt}
	if err := claims.ValidateWithLeeway(expect, m.skew); err != nil {
		return "", time.Time{}, oauthRefuse("%s", oauthClaimReason(err))
	}
	v, ok := all[m.claim]
	if !ok {
		return "", time.Time{}, oauthRefuse("JWT has no %q claim", m.claim)
	}
	name, ok := v.(string)
	// Trimmed as Java's String.trim does, as Kafka names the principal.
	name = strings.TrimFunc(name, func(r rune) bool { return r <= ' ' })
	if !ok || name == "" {
		return "", time.Time{}, oauthRefuse("JWT claim %q is not a non-blank string", m.claim)
	}
	return name, std.Expiry.Time(), nil
}

// unverifiedName is the principal claim of raw read without any check of
// its signature or claims, for the audit of a refused token alone; empty
// when raw is not a JWT of an allowed algorithm or has no such claim.
func (m *OAuthBearer) unverifiedName(raw string) string {
	tok, err := jwt.ParseSigned(raw, oauthAlgorithms)
	if err != nil {
		return ""
	}
	var all map[string]any
	if tok.UnsafeClaimsWithoutVerification(&all) != nil {
		return ""
	}
	name, _ := all[m.claim].(string)
	return strings.TrimFunc(name, func(r rune) bool { return r <= ' ' })
}

// oauthKeyFits says whether a key may verify a signature of alg: the key's
// own "alg", if it has one, must be alg, and the key's type and curve must
// be alg's.
func oauthKeyFits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case jose.ES256:
			return key.Curve == elliptic.P256()
		case jose.ES384:
			return key.Curve == elliptic.P384()
		case jose.ES512:
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

func oauthClaimReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return "JWT expired"
	case errors.Is(err, jwt.ErrNotValidYet):
		return "JWT not valid yet (nbf)"
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "JWT issued in the future (iat)"
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "JWT issuer is not the configured one"
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "JWT audience does not hold the configured one"
	}
	return "JWT claims not valid: " + oauthLibError(err)
}

// oauthShort bounds what a client wrote (a key id) before it is logged.
func oauthShort(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// oauthLibError shortens the library's messages for the log; none of them
// carry the token.
func oauthLibError(err error) string {
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "), "go-jose/go-jose: ")
}

// oauthKeySource gives the keys that may have signed a token with key id
// kid (every key, for a token without one). known is false when there is
// no key of that id even after a refresh.
type oauthKeySource interface {
	candidates(kid string) (keys []jose.JSONWebKey, known bool)
}

// oauthKeySet is one reading of a JWKS: the signing keys, public halves
// only, by key id.
type oauthKeySet struct {
	byKid map[string][]jose.JSONWebKey
	all   []jose.JSONWebKey
}

func (s *oauthKeySet) lookup(kid string) ([]jose.JSONWebKey, bool) {
	if s == nil {
		return nil, false
	}
	if kid == "" {
		return s.all, len(s.all) > 0
	}
	k, ok := s.byKid[kid]
	return k, ok
}

// oauthParseJWKS reads a JWKS. A key the library cannot read (a type it
// does not know), an encryption key and a symmetric key are skipped, as
// identity providers publish keys of all kinds; a set with no signing key
// left is an error.
func oauthParseJWKS(b []byte) (*oauthKeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	set := &oauthKeySet{byKid: make(map[string][]jose.JSONWebKey)}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if _, symmetric := k.Key.([]byte); symmetric {
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		if !k.Valid() {
			continue
		}
		set.all = append(set.all, k)
		set.byKid[k.KeyID] = append(set.byKid[k.KeyID], k)
	}
	if len(set.all) == 0 {
		return nil, errors.New("JWKS holds no signing key this proxy can use (RSA, EC P-256/384/521, Ed25519)")
	}
	return set, nil
}

// oauthFile is a JWKS in a file. It is looked at, lazily, when a token
// arrives at least interval after the last look, and at once (at most
// every oauthUnknownKidInterval) for an unknown key id; it is read again
// only when its size, time or identity changed. A file that became
// unreadable or invalid keeps the last good keys.
type oauthFile struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	set atomic.Pointer[oauthKeySet]

	mu          sync.Mutex
	lastLook    time.Time
	lastUnknown time.Time
	stat        os.FileInfo
}

func (f *oauthFile) load() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("oauth: JWKS file: %w", err)
	}
	b, err := oauthReadFile(f.path)
	if err != nil {
		return fmt.Errorf("oauth: JWKS file %s: %w", f.path, err)
	}
	set, err := oauthParseJWKS(b)
	if err != nil {
		return fmt.Errorf("oauth: JWKS file %s: %w", f.path, err)
	}
	f.set.Store(set)
	f.stat = st
	f.lastLook = f.now()
	return nil
}

func oauthReadFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, oauthMaxJWKS+1))
	if err != nil {
		return nil, err
	}
	if len(b) > oauthMaxJWKS {
		return nil, fmt.Errorf("larger than %d bytes", oauthMaxJWKS)
	}
	return b, nil
}

// look re-reads the file if it changed; force skips the interval.
func (f *oauthFile) look(force bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if force {
		if now.Sub(f.lastUnknown) < oauthUnknownKidInterval {
			return
		}
		f.lastUnknown = now
	} else if now.Sub(f.lastLook) < f.interval {
		return
	}
	f.lastLook = now
	st, err := os.Stat(f.path)
	if err != nil {
		f.log.Warn("oauth: JWKS file unreadable, keeping the last keys", "path", f.path, "error", err)
		return
	}
	if f.stat != nil && os.SameFile(st, f.stat) && st.Size() == f.stat.Size() && st.ModTime().Equal(f.stat.ModTime()) {
		return
	}
	if err := f.load(); err != nil {
		f.log.Warn("oauth: JWKS file not valid, keeping the last keys", "error", err)
	}
}

func (f *oauthFile) candidates(kid string) ([]jose.JSONWebKey, bool) {
	f.look(false)
	if k, ok := f.set.Load().lookup(kid); ok {
		return k, true
	}
	f.look(true)
	return f.set.Load().lookup(kid)
}

// oauthRemote is a JWKS at an https URL, fetched every interval (sooner,
// with backoff, after a failure) and at once, at most every
// oauthUnknownKidInterval, for a token of an unknown key id. A failed
// fetch keeps the last good keys: an identity provider that is briefly
// down does not lock every client out.
type oauthRemote struct {
	url      string
	client   *http.Client
	timeout  time.Duration
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time
	ctx      context.Context

	set atomic.Pointer[oauthKeySet]

	mu          sync.Mutex
	inflight    chan struct{} // closed when the fetch under way ends
	lastUnknown time.Time
}

func (r *oauthRemote) candidates(kid string) ([]jose.JSONWebKey, bool) {
	if k, ok := r.set.Load().lookup(kid); ok {
		return k, true
	}
	if err := r.refresh(false); err != nil {
		r.log.Warn("oauth: JWKS refresh for an unknown key id failed, keeping the last keys", "error", err)
	}
	return r.set.Load().lookup(kid)
}

// refresh fetches the keys. Callers that arrive while a fetch is under way
// wait for it rather than start another. Unless scheduled, a fetch happens
// at most every oauthUnknownKidInterval.
func (r *oauthRemote) refresh(scheduled bool) error {
	r.mu.Lock()
	if ch := r.inflight; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
		case <-r.ctx.Done():
		}
		return nil
	}
	if !scheduled {
		now := r.now()
		if now.Sub(r.lastUnknown) < oauthUnknownKidInterval {
			r.mu.Unlock()
			return nil
		}
		r.lastUnknown = now
	}
	ch := make(chan struct{})
	r.inflight = ch
	r.mu.Unlock()

	err := r.fetch()

	r.mu.Lock()
	r.inflight = nil
	close(ch)
	r.mu.Unlock()
	return err
}

func (r *oauthRemote) fetch() error {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return fmt.Errorf("oauth: JWKS %s: %w", oauthSafeURL(r.url), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("oauth: JWKS %s: %w", oauthSafeURL(r.url), oauthStripURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("oauth: JWKS %s: HTTP status %d", oauthSafeURL(r.url), resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, oauthMaxJWKS+1))
	if err != nil {
		return fmt.Errorf("oauth: JWKS %s: %w", oauthSafeURL(r.url), oauthStripURL(err))
	}
	if len(b) > oauthMaxJWKS {
		return fmt.Errorf("oauth: JWKS %s: larger than %d bytes", oauthSafeURL(r.url), oauthMaxJWKS)
	}
	set, err := oauthParseJWKS(bytes.TrimSpace(b))
	if err != nil {
		return fmt.Errorf("oauth: JWKS %s: %w", oauthSafeURL(r.url), err)
	}
	r.set.Store(set)
	return nil
}

// refreshLoop fetches the keys every interval until Close. After a failure
// it tries again sooner, backing off from a second to the interval.
func (r *oauthRemote) refreshLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	wait := r.interval
	backoff := time.Second
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		if err := r.refresh(true); err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.log.Warn("oauth: JWKS refresh failed, keeping the last keys", "error", err, "retry_in", backoff)
			wait = backoff
			backoff = min(backoff*2, r.interval)
		} else {
			wait = r.interval
			backoff = time.Second
		}
		t.Reset(wait)
	}
}

// oauthHTTPClient copies the client so that its redirects can be held to
// https without changing the caller's.
func oauthHTTPClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	prev := out.CheckRedirect
	out.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return errors.New("redirect away from https refused")
		}
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &out
}

// oauthSafeURL gives a URL for messages without what may be a secret: its
// user information and query.
func oauthSafeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}

// oauthStripURL drops the URL from a *url.Error, whose message would
// otherwise repeat it with its query.
func oauthStripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
