package authn

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// Keys are made once: RSA key generation is slow under the race detector.
var oauthTestKeys = sync.OnceValue(func() map[string]crypto.Signer {
	keys := make(map[string]crypto.Signer)
	for _, kid := range []string{"rsa1", "rsa2", "rsa3"} {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keys[kid] = k
	}
	for kid, c := range map[string]elliptic.Curve{"ec256": elliptic.P256(), "ec384": elliptic.P384()} {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			panic(err)
		}
		keys[kid] = k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	keys["ed"] = ed
	return keys
})

// jwksOf gives the JWKS of the public halves of the named keys.
func jwksOf(t testing.TB, kids ...string) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, kid := range kids {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: oauthTestKeys()[kid].Public(), KeyID: kid, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signJWT signs claims with the named key; kid "" leaves the header
// without a key id.
func signJWT(t testing.TB, key, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: oauthTestKeys()[key]}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var oauthTestNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func goodClaims() map[string]any {
	return map[string]any{
		"sub": "alice",
		"iss": "https://idp.example",
		"aud": []string{"kafka", "other"},
		"exp": oauthTestNow.Add(time.Hour).Unix(),
		"iat": oauthTestNow.Add(-time.Minute).Unix(),
		"nbf": oauthTestNow.Add(-time.Minute).Unix(),
	}
}

func with(c map[string]any, kv ...any) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
			continue
		}
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	// Replace by rename, as Kubernetes and editors do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newFileMech(t testing.TB, jwks []byte, cfg OAuthConfig) *OAuthBearer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, jwks)
	cfg.JWKS = path
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return oauthTestNow }
	}
	m, err := NewOAuthBearer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func clientFirst(authzid, token string, ext ...string) []byte {
	s := "n,"
	if authzid != "" {
		s += "a=" + authzid
	}
	s += ",\x01auth=Bearer " + token + "\x01"
	for _, e := range ext {
		s += e + "\x01"
	}
	return []byte(s + "\x01")
}

// authenticate runs one exchange to its end, as a client that
// acknowledges an error reply would, and gives the principal, lifetime and
// error.
func authenticate(t testing.TB, m Mechanism, first []byte) (Principal, time.Duration, error) {
	t.Helper()
	x := m.Start(true)
	reply, done, err := x.Step(first)
	if err != nil {
		return Principal{}, 0, err
	}
	if done {
		if len(reply) != 0 {
			t.Fatalf("success reply %q, want empty", reply)
		}
		return x.Principal(), x.Lifetime(), nil
	}
	if string(reply) != `{"status":"invalid_token"}` {
		t.Fatalf("error reply %q", reply)
	}
	if x.Principal() != Anonymous || x.Lifetime() != 0 {
		t.Fatalf("refused exchange has principal %v lifetime %v", x.Principal(), x.Lifetime())
	}
	reply, done, err = x.Step([]byte{1})
	if err == nil || done || reply != nil {
		t.Fatalf("after the acknowledgement: %q %v %v, want an error", reply, done, err)
	}
	return Principal{}, 0, err
}

func TestOAuthAccepts(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "rsa1", "ec256", "ec384", "ed"), OAuthConfig{
		Issuer:   "https://idp.example",
		Audience: "kafka",
	})
	for _, tc := range []struct {
		key string
		alg jose.SignatureAlgorithm
	}{
		{"rsa1", jose.RS256}, {"rsa1", jose.RS512}, {"rsa1", jose.PS256},
		{"ec256", jose.ES256}, {"ec384", jose.ES384}, {"ed", jose.EdDSA},
	} {
		t.Run(string(tc.alg)+"/"+tc.key, func(t *testing.T) {
			tok := signJWT(t, tc.key, tc.key, tc.alg, goodClaims())
			p, life, err := authenticate(t, m, clientFirst("", tok))
			if err != nil {
				t.Fatal(err)
			}
			if p != (Principal{Type: "User", Name: "alice"}) || p.String() != "User:alice" {
				t.Fatalf("principal %v", p)
			}
			if life != time.Hour {
				t.Fatalf("lifetime %v, want 1h", life)
			}
		})
	}
	t.Run("no kid", func(t *testing.T) {
		tok := signJWT(t, "ec256", "", jose.ES256, goodClaims())
		if _, _, err := authenticate(t, m, clientFirst("", tok)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("authzid equal to the principal", func(t *testing.T) {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		if _, _, err := authenticate(t, m, clientFirst("alice", tok)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("extensions", func(t *testing.T) {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		if _, _, err := authenticate(t, m, clientFirst("", tok, "traceId=abc 123", "logicalCluster=lkc-1")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("single audience string", func(t *testing.T) {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "aud", "kafka"))
		if _, _, err := authenticate(t, m, clientFirst("", tok)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("expired within the clock skew", func(t *testing.T) {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "exp", oauthTestNow.Add(-20*time.Second).Unix()))
		_, life, err := authenticate(t, m, clientFirst("", tok))
		if err != nil {
			t.Fatal(err)
		}
		if life <= 0 || life > time.Second {
			t.Fatalf("lifetime %v, want a small positive one", life)
		}
	})
}

func TestOAuthPrincipalClaim(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "ec256"), OAuthConfig{PrincipalClaim: "preferred_username"})
	tok := signJWT(t, "ec256", "ec256", jose.ES256, with(goodClaims(), "preferred_username", " svc-orders\n"))
	p, _, err := authenticate(t, m, clientFirst("", tok))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "svc-orders" {
		t.Fatalf("principal %v", p)
	}
	// With no issuer or audience configured, neither is checked.
	tok = signJWT(t, "ec256", "ec256", jose.ES256, with(goodClaims(), "preferred_username", "bob", "iss", "elsewhere", "aud", "x"))
	if p, _, err = authenticate(t, m, clientFirst("", tok)); err != nil || p.Name != "bob" {
		t.Fatal(p, err)
	}
}

// noneToken is a JWT with alg "none": header and claims, no signature.
func noneToken(claims map[string]any) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"rsa1"}`))
	c, _ := json.Marshal(claims)
	return h + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// hmacWithPublicKey is the classic confusion attack: HS256 keyed with the
// server's public RSA key, which the attacker knows.
func hmacWithPublicKey(t *testing.T, claims map[string]any) string {
	der, err := x509.MarshalPKIXPublicKey(oauthTestKeys()["rsa1"].Public())
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: der},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "rsa1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOAuthRefuses(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "rsa1", "ec256"), OAuthConfig{
		Issuer:   "https://idp.example",
		Audience: "kafka",
	})
	badSig := func() string {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		// Sign with another key under rsa1's id.
		other := signJWT(t, "rsa2", "rsa1", jose.RS256, goodClaims())
		return tok[:strings.LastIndexByte(tok, '.')] + other[strings.LastIndexByte(other, '.'):]
	}
	tampered := func() string {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		parts := strings.Split(tok, ".")
		c, _ := json.Marshal(with(goodClaims(), "sub", "admin"))
		parts[1] = base64.RawURLEncoding.EncodeToString(c)
		return strings.Join(parts, ".")
	}
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "exp", oauthTestNow.Add(-time.Minute).Unix())), "expired"},
		{"no exp", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "exp", nil)), "no exp"},
		{"not yet valid", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "nbf", oauthTestNow.Add(time.Minute).Unix())), "nbf"},
		{"issued in the future", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "iat", oauthTestNow.Add(time.Minute).Unix())), "iat"},
		{"wrong issuer", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "iss", "https://evil.example")), "issuer"},
		{"no issuer", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "iss", nil)), "issuer"},
		{"wrong audience", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "aud", []string{"billing"})), "audience"},
		{"no audience", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "aud", nil)), "audience"},
		{"no sub", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "sub", nil)), `no "sub"`},
		{"empty sub", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "sub", "")), "non-blank string"},
		{"blank sub", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "sub", " \t ")), "non-blank string"},
		{"sub not a string", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "sub", 42)), "non-blank string"},
		{"exp not a number", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "exp", "tomorrow")), "claims not valid"},
		{"no iat", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "iat", nil)), "no iat"},
		{"bad signature", badSig(), "signature"},
		{"tampered claims", tampered(), "signature"},
		{"unknown kid", signJWT(t, "rsa2", "rsa2", jose.RS256, goodClaims()), "no key with id"},
		{"key not in the JWKS, no kid", signJWT(t, "rsa2", "", jose.RS256, goodClaims()), "signature"},
		{"alg none", noneToken(goodClaims()), "algorithm"},
		{"HS256 with the public key as secret", hmacWithPublicKey(t, goodClaims()), "algorithm"},
		{"RSA key id, EC algorithm", signJWT(t, "ec256", "rsa1", jose.ES256, goodClaims()), "fits"},
		{"EC P-256 key id, ES384", signJWT(t, "ec384", "ec256", jose.ES384, goodClaims()), "fits"},
		{"not a JWT", "abc.def", "not a signed JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := authenticate(t, m, clientFirst("", tc.token))
			checkRefusal(t, err, tc.reason, tc.token)
		})
	}
	t.Run("authzid of another user", func(t *testing.T) {
		tok := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		x := m.Start(true)
		reply, done, err := x.Step(clientFirst("admin", tok))
		if done || reply != nil {
			t.Fatalf("%q %v", reply, done)
		}
		checkRefusal(t, err, "authorization id", tok)
		if x.Principal() != Anonymous {
			t.Fatal(x.Principal())
		}
	})
	t.Run("no acknowledgement", func(t *testing.T) {
		x := m.Start(true)
		tok := noneToken(goodClaims())
		if _, _, err := x.Step(clientFirst("", tok)); err != nil {
			t.Fatal(err)
		}
		// A second token instead of the acknowledgement is not a retry.
		good := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
		_, done, err := x.Step(clientFirst("", good))
		if done || !errors.Is(err, ErrAuthentication) {
			t.Fatal(done, err)
		}
	})
}

func checkRefusal(t *testing.T, err error, reason, token string) {
	t.Helper()
	if !errors.Is(err, ErrAuthentication) {
		t.Fatalf("error %v, want ErrAuthentication", err)
	}
	var r *OAuthRefusal
	if !errors.As(err, &r) {
		t.Fatalf("error %T, want *OAuthRefusal", err)
	}
	if !strings.Contains(r.Reason, reason) {
		t.Fatalf("reason %q, want it to mention %q", r.Reason, reason)
	}
	if err.Error() != ErrAuthentication.Error() {
		t.Fatalf("client-visible message %q says more than ErrAuthentication", err.Error())
	}
	if token != "" && (strings.Contains(r.Reason, token) || strings.Contains(r.Reason, token[:min(len(token), 20)])) {
		t.Fatalf("reason %q holds the token", r.Reason)
	}
}

func TestOAuthMalformed(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "ec256"), OAuthConfig{})
	tok := signJWT(t, "ec256", "ec256", jose.ES256, goodClaims())
	for _, msg := range []string{
		"",
		"\x01",
		"y,,\x01auth=Bearer " + tok + "\x01\x01",
		"p=tls-unique,,\x01auth=Bearer " + tok + "\x01\x01",
		"n,,auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01",
		"n,,\x01auth=Basic " + tok + "\x01\x01",
		"n,,\x01auth=Bearer\x01\x01",
		"n,,\x01auth=Bearer " + tok + "!\x01\x01",
		"n,,\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01bad_key=1\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k=\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k=\x02\x01\x01",
		"n,a=,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=al=ce,\x01auth=Bearer " + tok + "\x01\x01",
		"n,b=x,\x01auth=Bearer " + tok + "\x01\x01",
	} {
		x := m.Start(true)
		reply, done, err := x.Step([]byte(msg))
		if done || reply != nil || !errors.Is(err, ErrAuthentication) {
			t.Errorf("%q: %q %v %v, want a refusal", msg, reply, done, err)
		}
	}
	// The scheme is case-insensitive, as in Kafka, and an escaped
	// authorization id is decoded before it is compared.
	m2 := newFileMech(t, jwksOf(t, "ec256"), OAuthConfig{})
	tok2 := signJWT(t, "ec256", "ec256", jose.ES256, with(goodClaims(), "sub", "a,b=c"))
	x := m2.Start(true)
	if _, done, err := x.Step([]byte("n,a=a=2Cb=3Dc,\x01auth=bearer " + tok2 + "\x01\x01")); !done || err != nil {
		t.Fatal(done, err)
	}
	if x.Principal().Name != "a,b=c" {
		t.Fatal(x.Principal())
	}
	// A step after the end is refused.
	if _, done, err := x.Step([]byte{1}); done || !errors.Is(err, ErrAuthentication) {
		t.Fatal(done, err)
	}
}

// TestOAuthFranzGoClient drives the server with franz-go's client side of
// the mechanism, as a kgo client would, good and bad tokens in turn.
func TestOAuthFranzGoClient(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "rsa1"), OAuthConfig{Audience: "kafka"})
	good := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
	bad := signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "aud", "billing"))
	for i := range 50 {
		tok, zid := good, ""
		switch i % 3 {
		case 1:
			tok = bad
		case 2:
			zid = "alice"
		}
		auth := oauth.Auth{Token: tok, Zid: zid, Extensions: map[string]string{"traceId": "t" + string(rune('a'+i%26))}}
		sess, msg, err := auth.AsMechanism().Authenticate(context.Background(), "proxy:9092")
		if err != nil {
			t.Fatal(err)
		}
		x := m.Start(false)
		var serverErr, clientErr error
		for range 4 {
			reply, done, err := x.Step(msg)
			if err != nil {
				serverErr = err
				break
			}
			cdone, next, err := sess.Challenge(reply)
			if err != nil {
				clientErr = err
				break
			}
			if done != cdone {
				t.Fatalf("round %d: server done %v, client done %v", i, done, cdone)
			}
			if done {
				break
			}
			msg = next
		}
		if tok == bad {
			if !errors.Is(serverErr, ErrAuthentication) || clientErr != nil {
				t.Fatalf("round %d: server %v client %v, want the server to refuse after the acknowledgement", i, serverErr, clientErr)
			}
			continue
		}
		if serverErr != nil || clientErr != nil || x.Principal().Name != "alice" {
			t.Fatalf("round %d: server %v client %v principal %v", i, serverErr, clientErr, x.Principal())
		}
	}
}

func TestOAuthFileReload(t *testing.T) {
	now := oauthTestNow
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, jwksOf(t, "rsa1"))
	m, err := NewOAuthBearer(OAuthConfig{JWKS: path, Now: clock, RefreshInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	claims := func() map[string]any {
		return with(goodClaims(), "exp", clock().Add(time.Hour).Unix(), "iat", clock().Unix(), "nbf", nil)
	}

	// A new key: its first token makes the file be read again at once.
	writeFile(t, path, jwksOf(t, "rsa1", "rsa2"))
	if _, _, err := authenticate(t, m, clientFirst("", signJWT(t, "rsa2", "rsa2", jose.RS256, claims()))); err != nil {
		t.Fatal(err)
	}
	// Another new key soon after: an unknown key id does not re-read the
	// file more often than oauthUnknownKidInterval.
	writeFile(t, path, jwksOf(t, "rsa2", "rsa3"))
	tok3 := signJWT(t, "rsa3", "rsa3", jose.RS256, claims())
	if _, _, err := authenticate(t, m, clientFirst("", tok3)); err == nil {
		t.Fatal("unknown key accepted before the file was looked at again")
	}
	advance(oauthUnknownKidInterval)
	if _, _, err := authenticate(t, m, clientFirst("", tok3)); err != nil {
		t.Fatal(err)
	}
	// A removed key stops working once the interval passed.
	tok1 := signJWT(t, "rsa1", "rsa1", jose.RS256, claims())
	advance(time.Minute)
	if _, _, err := authenticate(t, m, clientFirst("", tok1)); err == nil {
		t.Fatal("key removed from the file still accepted")
	}
	// A broken file keeps the last good keys.
	writeFile(t, path, []byte("{not json"))
	advance(time.Minute)
	tok2 := signJWT(t, "rsa2", "rsa2", jose.RS256, claims())
	if _, _, err := authenticate(t, m, clientFirst("", tok2)); err != nil {
		t.Fatal(err)
	}
}

func TestOAuthConfigErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	writeFile(t, empty, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`))
	for _, cfg := range []OAuthConfig{
		{},
		{JWKS: filepath.Join(dir, "missing.json")},
		{JWKS: empty},
		{JWKS: "http://idp.example/jwks"},
		{JWKS: "https://"},
		{JWKS: "https://idp.example:xx/jwks?key=s3cr3t"},
	} {
		m, err := NewOAuthBearer(cfg)
		if err == nil {
			m.Close()
			t.Errorf("%+v: no error", cfg)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error holds the URL's query: %v", err)
		}
	}
}

// TestOAuthJWKSSkipsKeys checks that a JWKS with keys this proxy cannot use
// still gives the ones it can.
func TestOAuthJWKSSkipsKeys(t *testing.T) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(jwksOf(t, "ec256"), &doc); err != nil {
		t.Fatal(err)
	}
	enc, _ := json.Marshal(jose.JSONWebKey{Key: oauthTestKeys()["rsa1"].Public(), KeyID: "rsa1", Use: "enc"})
	doc.Keys = append(doc.Keys,
		json.RawMessage(`{"kty":"oct","k":"c2VjcmV0","kid":"h"}`),
		json.RawMessage(`{"kty":"OKP","crv":"X448","x":"AAAA","kid":"x"}`),
		json.RawMessage(`{"kty":"unknown"}`),
		enc)
	b, _ := json.Marshal(doc)
	m := newFileMech(t, b, OAuthConfig{})
	if _, _, err := authenticate(t, m, clientFirst("", signJWT(t, "ec256", "ec256", jose.ES256, goodClaims()))); err != nil {
		t.Fatal(err)
	}
	_, _, err := authenticate(t, m, clientFirst("", signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())))
	checkRefusal(t, err, "no key with id", "")
}

// jwksServer serves a JWKS over TLS on loopback and counts its fetches.
type jwksServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	fetches atomic.Int32
	fail    atomic.Bool
}

func newJWKSServer(t *testing.T, jwks []byte) *jwksServer {
	s := &jwksServer{}
	s.body.Store(&jwks)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(*s.body.Load())
	}))
	// The test of an untrusted certificate makes the server log the
	// handshake it refused.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(b []byte) { s.body.Store(&b) }

func TestOAuthJWKSURL(t *testing.T) {
	srv := newJWKSServer(t, jwksOf(t, "rsa1"))
	m, err := NewOAuthBearer(OAuthConfig{
		JWKS:            srv.URL + "/jwks?tenant=a",
		HTTPClient:      srv.Client(),
		RefreshInterval: 50 * time.Millisecond,
		Now:             func() time.Time { return oauthTestNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok1 := signJWT(t, "rsa1", "rsa1", jose.RS256, goodClaims())
	if _, _, err := authenticate(t, m, clientFirst("", tok1)); err != nil {
		t.Fatal(err)
	}

	// Rotation: the old key leaves the set, a new one joins. The
	// scheduled refresh picks it up.
	srv.set(jwksOf(t, "rsa2"))
	tok2 := signJWT(t, "rsa2", "rsa2", jose.RS256, goodClaims())
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err1 := authenticate(t, m, clientFirst("", tok1))
		_, _, err2 := authenticate(t, m, clientFirst("", tok2))
		if err1 != nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after rotation: old key %v, new key %v", err1, err2)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// An identity provider that is down keeps the last keys.
	srv.fail.Store(true)
	before := srv.fetches.Load()
	for srv.fetches.Load() < before+2 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := authenticate(t, m, clientFirst("", tok2)); err != nil {
		t.Fatal(err)
	}
}

func TestOAuthJWKSURLUnknownKid(t *testing.T) {
	srv := newJWKSServer(t, jwksOf(t, "rsa1"))
	now := oauthTestNow
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m, err := NewOAuthBearer(OAuthConfig{
		JWKS:       srv.URL,
		HTTPClient: srv.Client(),
		Now:        clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches at start", n)
	}
	// A token of a key published since the last fetch: the unknown key id
	// fetches the set at once.
	srv.set(jwksOf(t, "rsa1", "rsa2"))
	claims := with(goodClaims(), "exp", now.Add(time.Hour).Unix())
	if _, _, err := authenticate(t, m, clientFirst("", signJWT(t, "rsa2", "rsa2", jose.RS256, claims))); err != nil {
		t.Fatal(err)
	}
	// Made-up key ids, many and concurrent, fetch no more than once per
	// interval.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, _, err := authenticate(t, m, clientFirst("", signJWT(t, "rsa3", "made-up", jose.RS256, claims)))
			if err == nil {
				t.Error("made-up key id accepted")
			}
		})
	}
	wg.Wait()
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	mu.Lock()
	now = now.Add(oauthUnknownKidInterval)
	mu.Unlock()
	srv.set(jwksOf(t, "rsa1", "rsa2", "rsa3"))
	if _, _, err := authenticate(t, m, clientFirst("", signJWT(t, "rsa3", "rsa3", jose.RS256, claims))); err != nil {
		t.Fatal(err)
	}
}

func TestOAuthJWKSURLErrors(t *testing.T) {
	srv := newJWKSServer(t, jwksOf(t, "rsa1"))
	srv.fail.Store(true)
	if _, err := NewOAuthBearer(OAuthConfig{JWKS: srv.URL + "/?secret=s3cr3t", HTTPClient: srv.Client()}); err == nil {
		t.Fatal("no error for a failing JWKS URL")
	} else if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error holds the URL's query: %v", err)
	}
	// Not trusted: the system roots do not hold the test server's CA.
	srv.fail.Store(false)
	if _, err := NewOAuthBearer(OAuthConfig{JWKS: srv.URL, FetchTimeout: 5 * time.Second}); err == nil {
		t.Fatal("no error for an untrusted certificate")
	}
	// Too large.
	big := make([]byte, oauthMaxJWKS+10)
	for i := range big {
		big[i] = ' '
	}
	srv.set(big)
	if _, err := NewOAuthBearer(OAuthConfig{JWKS: srv.URL, HTTPClient: srv.Client()}); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("error %v for a JWKS too large", err)
	}
}
