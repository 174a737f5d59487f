package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestClientAuthPlainOverTLS: PLAIN is accepted on a TLS listener without
// --client-sasl-plain-without-tls.
func TestClientAuthPlainOverTLS(t *testing.T) {
	k := newPKI(t)
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cert, key := k.files(t, "proxy", "127.0.0.1")
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) { c.TLSCert, c.TLSKey = cert, key },
		proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, 0, false)))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "")),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(testContext(t, 20*time.Second), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("PLAIN over TLS: %v", err)
	}
}

// TestClientAuthCertificatePrincipal: with client certificates and no
// SASL at the proxy, a client's principal is its certificate's subject
// mapped by the rules; a subject no rule maps is closed at its first
// request.
func TestClientAuthCertificatePrincipal(t *testing.T) {
	k := newPKI(t)
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cert, key := k.files(t, "proxy", "127.0.0.1")
	start := func(rules string) *testProxy {
		mapper, err := authn.ParsePrincipalMappingRules(rules)
		if err != nil {
			t.Fatal(err)
		}
		return startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
			c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, k.caFile
		}, proxy.WithClientAuth(clientauth.New(clientauth.Config{CertPrincipal: mapper.Principal})))
	}
	p := start(`RULE:^CN=([^,]*)(,.*)?$/$1/U`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "alice")), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t, 20*time.Second), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	p.log.waitFor(t, "principal=User:ALICE")

	p = start(`RULE:^CN=nobody$/nobody/`)
	cl, err = kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(testContext(t, 5*time.Second)); err == nil {
		t.Fatal("a client whose certificate maps to no principal was served")
	}
	p.log.waitFor(t, "no principal mapping rule matches")
}

// TestClientAuthOAuthBearer: a kgo client with a signed JWT authenticates
// with OAUTHBEARER as the token's subject; a token signed by another key
// is refused with SASL_AUTHENTICATION_FAILED, and the log says why
// without the token.
func TestClientAuthOAuthBearer(t *testing.T) {
	good, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &good.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(key *ecdsa.PrivateKey) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}},
			(&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		s, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "svc-orders", Issuer: "https://idp.example", Audience: jwt.Audience{"kafka"},
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	mech, err := authn.NewOAuthBearer(authn.OAuthConfig{JWKS: jwks, Issuer: "https://idp.example", Audience: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	defer mech.Close()
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m),
		proxy.WithClientAuth(clientauth.New(clientauth.Config{Mechanisms: []authn.Mechanism{mech}, Metrics: m})))
	ctx := testContext(t, 20*time.Second)

	goodToken := token(good)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("t"),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: goodToken}, nil })))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("OAUTHBEARER: %v", err)
	}
	cl.Close()
	p.log.waitFor(t, "principal=User:svc-orders")

	badToken := token(other)
	cl, err = kgo.NewClient(kgo.SeedBrokers(p.Addr()),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: badToken}, nil })))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a token signed by another key: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	p.log.waitFor(t, "client authentication closed the connection")
	if n := counter(t, m, metrics.NameClientAuthentications, "mechanism", "OAUTHBEARER", "result", "failure"); n != 1 {
		t.Errorf("OAUTHBEARER failures counted: %v", n)
	}
	for _, tok := range []string{goodToken, badToken} {
		if strings.Contains(p.log.String(), tok) {
			t.Fatalf("a token in the log:\n%s", p.log.String())
		}
	}
}

// TestClientAuthSNI: in the sni topology, a client authenticates with
// SCRAM on the bootstrap name and on every broker name it is sent to, and
// PLAIN is accepted there since the one port speaks TLS.
func TestClientAuthSNI(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(3, "t0", "t1"))
	m := metrics.New()
	s := startSNIProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, 0, false)))
	ctx := testContext(t, 30*time.Second)
	for i, mech := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism(),
	} {
		produceInOrder(t, ctx, "t"+strconv.Itoa(i), 3, 20, 0, kgo.SeedBrokers(s.Addr()), s.dialer(t), kgo.SASL(mech))
	}
	if n := counter(t, m, metrics.NameClientAuthentications, "result", "failure"); n != 0 {
		t.Fatalf("failures counted: %v", n)
	}
	s.log.waitFor(t, "principal=User:bob")
}
