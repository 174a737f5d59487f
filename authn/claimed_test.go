package authn

import (
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// claimedOf is what x says the client claimed, "(none)" for nothing.
func claimedOf(t *testing.T, x Exchange) string {
	t.Helper()
	c, ok := x.(Claimant)
	if !ok {
		t.Fatalf("%T does not tell whom the client claimed", x)
	}
	p, ok := c.Claimed()
	if !ok {
		return "(none)"
	}
	return p.String()
}

// TestClaimedSCRAMPlain: a refused SCRAM or PLAIN exchange tells the user
// name the client sent (SCRAM's unescaped), never the password.
func TestClaimedSCRAMPlain(t *testing.T) {
	store := credTestStore(t, 4096, "alice")
	mech, err := NewSCRAM(MechanismSCRAMSHA256, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, pass, want string }{
		{"mallory", "mallory-pw", "User:mallory"},
		{"alice", "wrong", "User:alice"},
		{"a,b=c", "pw", "User:a,b=c"},
	} {
		x := mech.Start(false)
		if err := scramRun(t, scram.Auth{User: tc.user, Pass: tc.pass}.AsSha256Mechanism(), x); err == nil {
			t.Fatalf("SCRAM %s/%s accepted", tc.user, tc.pass)
		}
		if got := claimedOf(t, x); got != tc.want {
			t.Errorf("SCRAM %s: claimed %s, want %s", tc.user, got, tc.want)
		}
	}
	// A client-first-message that does not parse names no one.
	x := mech.Start(false)
	if _, _, err := x.Step([]byte("q,,n=eve,r=abc")); err == nil {
		t.Fatal("malformed client-first accepted")
	}
	if got := claimedOf(t, x); got != "(none)" {
		t.Errorf("malformed SCRAM message: claimed %s", got)
	}

	pm := NewPlain(store, PlainOptions{})
	for _, tc := range []struct{ user, pass, want string }{
		{"mallory", "mallory-pw", "User:mallory"},
		{"alice", "wrong", "User:alice"},
	} {
		x, err := plainRun(t, pm, true, plain.Auth{User: tc.user, Pass: tc.pass})
		if err == nil {
			t.Fatalf("PLAIN %s/%s accepted", tc.user, tc.pass)
		}
		if got := claimedOf(t, x); got != tc.want {
			t.Errorf("PLAIN %s: claimed %s, want %s", tc.user, got, tc.want)
		}
	}
}

// TestClaimedOAuth: a refused token tells its principal claim when it
// parses as a JWT, whatever its signature, and nothing when it does not.
func TestClaimedOAuth(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "rsa1"), OAuthConfig{Issuer: "https://idp.example", Audience: "kafka"})
	// Signed by another key under rsa1's id: the signature fails.
	forged := signJWT(t, "rsa2", "rsa1", jose.RS256, with(goodClaims(), "sub", "admin"))
	for _, tc := range []struct{ name, token, want string }{
		{"bad signature", forged, "User:admin"},
		{"expired", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "exp", oauthTestNow.Add(-time.Minute).Unix())), "User:alice"},
		{"no sub", signJWT(t, "rsa1", "rsa1", jose.RS256, with(goodClaims(), "sub", nil)), "(none)"},
		{"not a JWT", "not-a-jwt", "(none)"},
		{"alg none", noneToken(goodClaims()), "(none)"},
	} {
		x := m.Start(true)
		reply, done, err := x.Step(clientFirst("", tc.token))
		if done {
			t.Fatalf("%s: accepted", tc.name)
		}
		if err == nil && reply != nil {
			if _, _, err = x.Step([]byte{1}); err == nil {
				t.Fatalf("%s: accepted after the acknowledgement", tc.name)
			}
		}
		if got := claimedOf(t, x); got != tc.want {
			t.Errorf("%s: claimed %s, want %s", tc.name, got, tc.want)
		}
		if x.Principal() != Anonymous {
			t.Errorf("%s: refused exchange has principal %v", tc.name, x.Principal())
		}
	}
}
