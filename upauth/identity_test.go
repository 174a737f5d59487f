package upauth

import (
	"context"
	"errors"
	"testing"
)

type identities map[string]*Authenticator

func (m identities) For(principal string) *Authenticator { return m[principal] }

func TestAs(t *testing.T) {
	own := &Authenticator{o: Options{Mechanism: "PLAIN", Username: "proxy"}}
	alice := &Authenticator{o: Options{Mechanism: "PLAIN", Username: "alice"}}
	ids := identities{"User:alice": alice}
	for _, c := range []struct {
		name string
		ids  Identities
		own  *Authenticator
		who  string
		want *Authenticator
		err  error
	}{
		{"no mapping", nil, own, "User:alice", own, nil},
		{"no mapping, no SASL", nil, nil, "User:alice", nil, nil},
		{"mapped", ids, own, "User:alice", alice, nil},
		{"unmapped, the proxy's own", ids, own, "User:bob", own, nil},
		{"unmapped, none of its own", ids, nil, "User:bob", nil, ErrNoIdentity},
	} {
		got, err := As(c.ids, c.own, c.who)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, err, c.want, c.err)
		}
	}
}

func TestIdentityInContext(t *testing.T) {
	own := &Authenticator{o: Options{Mechanism: "PLAIN", Username: "proxy"}}
	alice := &Authenticator{o: Options{Mechanism: "PLAIN", Username: "alice"}}
	ctx := context.Background()
	if got := Identity(ctx, own); got != own {
		t.Fatalf("no identity carried: %v", got)
	}
	if got := Identity(WithIdentity(ctx, nil), own); got != own {
		t.Fatalf("nil identity carried: %v", got)
	}
	if got := Identity(WithIdentity(ctx, alice), own); got != alice {
		t.Fatalf("carried %v, want alice", got)
	}
}
