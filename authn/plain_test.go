package authn

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func plainRun(t *testing.T, m Mechanism, tls bool, a plain.Auth) (Exchange, error) {
	t.Helper()
	_, token, err := a.AsMechanism().Authenticate(context.Background(), "proxy:9092")
	if err != nil {
		t.Fatal(err)
	}
	x := m.Start(tls)
	reply, done, err := x.Step(token)
	if err == nil && (!done || reply == nil || len(reply) != 0) {
		t.Fatalf("success: %q, done %v", reply, done)
	}
	return x, err
}

// TestPlainWithFranzGo checks passwords from franz-go's PLAIN client
// against both kinds of stored credential.
func TestPlainWithFranzGo(t *testing.T) {
	c := &Credentials{}
	for user, mech := range map[string]string{"alice": MechanismSCRAMSHA256, "bob": MechanismSCRAMSHA512} {
		cred, err := NewCredential(mech, []byte(user+"-secret"), 4096)
		if err != nil {
			t.Fatal(err)
		}
		c.Set(user, mech, cred)
	}
	m := NewPlain(NewStore(c), PlainOptions{})
	if m.Name() != "PLAIN" {
		t.Errorf("name %q", m.Name())
	}
	for _, tc := range []struct {
		what string
		auth plain.Auth
		want error
	}{
		{"SHA-256 credential", plain.Auth{User: "alice", Pass: "alice-secret"}, nil},
		{"SHA-512 credential", plain.Auth{User: "bob", Pass: "bob-secret"}, nil},
		{"authzid the user", plain.Auth{Zid: "bob", User: "bob", Pass: "bob-secret"}, nil},
		{"wrong password", plain.Auth{User: "alice", Pass: "bob-secret"}, ErrAuthentication},
		{"unknown user", plain.Auth{User: "carol", Pass: "carol-secret"}, ErrAuthentication},
		{"authzid another user", plain.Auth{Zid: "alice", User: "bob", Pass: "bob-secret"}, errAuthzid},
	} {
		x, err := plainRun(t, m, true, tc.auth)
		switch {
		case tc.want == nil && (err != nil || x.Principal().String() != "User:"+tc.auth.User):
			t.Errorf("%s: %v, principal %v", tc.what, err, x.Principal())
		case tc.want != nil && (!errors.Is(err, tc.want) || !errors.Is(err, ErrAuthentication)):
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		case tc.want != nil && x.Principal() != (Principal{}):
			t.Errorf("%s: principal %v after a refusal", tc.what, x.Principal())
		}
		if _, _, err := x.Step(nil); !errors.Is(err, errExchangeOver) {
			t.Errorf("%s: a second step: %v", tc.what, err)
		}
	}
}

func TestPlainNeedsTLS(t *testing.T) {
	store := credTestStore(t, 4096, "alice")
	a := plain.Auth{User: "alice", Pass: "alice-secret"}
	if _, err := plainRun(t, NewPlain(store, PlainOptions{}), false, a); !errors.Is(err, errPlainTLS) || !errors.Is(err, ErrAuthentication) {
		t.Errorf("without TLS: %v", err)
	}
	if _, err := plainRun(t, NewPlain(store, PlainOptions{AllowWithoutTLS: true}), false, a); err != nil {
		t.Errorf("without TLS, allowed: %v", err)
	}
}

func TestPlainMalformed(t *testing.T) {
	m := NewPlain(credTestStore(t, 4096, "alice"), PlainOptions{})
	for token, want := range map[string]error{
		"alice\x00alice-secret":             errPlainMalformed,
		"\x00alice\x00alice-secret\x00":     errPlainMalformed,
		"\x00\x00alice-secret":              errPlainEmpty,
		"\x00alice\x00":                     errPlainEmpty,
		"":                                  errPlainMalformed,
		"\x00alice\x00alice-secret\x00\x00": errPlainMalformed,
	} {
		_, done, err := m.Start(true).Step([]byte(token))
		if done || !errors.Is(err, want) || !errors.Is(err, ErrAuthentication) {
			t.Errorf("%q: %v, %v; want %v", token, done, err, want)
		}
	}
}

// BenchmarkPlain shows that an unknown user costs what a known one does:
// one key derivation at the default iterations.
func BenchmarkPlain(b *testing.B) {
	m := NewPlain(credTestStore(b, DefaultIterations, "alice"), PlainOptions{})
	for _, user := range []string{"alice", "nobody"} {
		b.Run(user, func(b *testing.B) {
			token := []byte("\x00" + user + "\x00wrong")
			for b.Loop() {
				m.Start(true).Step(token)
			}
		})
	}
}
