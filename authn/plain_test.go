package authn

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"maps"
	"sync"
	"sync/atomic"
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

// countingPlain gives PLAIN over store with its key derivations counted.
func countingPlain(store *Store) (*plainMechanism, *atomic.Int64) {
	m := NewPlain(store, PlainOptions{}).(*plainMechanism)
	var n atomic.Int64
	m.derive = func(h func() hash.Hash, password, salt []byte, iterations int) ([]byte, error) {
		n.Add(1)
		return saltedPassword(h, password, salt, iterations)
	}
	return m, &n
}

// TestPlainVerifier follows one user through the verifier's life: a key
// derivation until the password is proven, none after, for the right
// password and a wrong one alike; none for an unknown user; every
// verifier dropped when the store swaps in new credentials, so a changed
// password is derived again and the old one refused.
func TestPlainVerifier(t *testing.T) {
	store := credTestStore(t, 4096, "alice", "bob")
	m, derived := countingPlain(store)
	step := func(what, user, password string, want error, derivations int64) {
		t.Helper()
		before := derived.Load()
		x := m.Start(true)
		_, done, err := x.Step([]byte("\x00" + user + "\x00" + password))
		if err != want || done != (want == nil) {
			t.Errorf("%s: %v, done %v; want %v", what, err, done, want)
		}
		if n := derived.Load() - before; n != derivations {
			t.Errorf("%s: %d key derivations, want %d", what, n, derivations)
		}
	}
	step("wrong password, nothing proven yet", "alice", "guess", ErrAuthentication, 1)
	step("first success", "alice", "alice-secret", nil, 1)
	step("second success", "alice", "alice-secret", nil, 0)
	step("wrong password after a success", "alice", "guess", ErrAuthentication, 0)
	step("another user's password", "alice", "bob-secret", ErrAuthentication, 0)
	step("another user, nothing proven yet", "bob", "bob-secret", nil, 1)
	step("unknown user", "carol", "carol-secret", ErrAuthentication, 0)

	// Swapping in the set the store holds changes nothing; a reload, a new
	// set even of the same content, drops the verifiers.
	store.Swap(store.current())
	step("same set swapped in again", "alice", "alice-secret", nil, 0)
	again := &Credentials{users: maps.Clone(store.current().users)}
	store.Swap(again)
	step("after a reload", "alice", "alice-secret", nil, 1)

	// alice's password changes in the file.
	changed := &Credentials{users: maps.Clone(again.users)}
	changed.users["alice"] = nil
	for _, mech := range SCRAMMechanisms() {
		cred, err := NewCredential(mech, []byte("new-secret"), 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := changed.Set("alice", mech, cred); err != nil {
			t.Fatal(err)
		}
	}
	store.Swap(changed)
	step("old password after the change", "alice", "alice-secret", ErrAuthentication, 1)
	step("new password", "alice", "new-secret", nil, 1)
	step("old password, new one proven", "alice", "alice-secret", ErrAuthentication, 0)
	step("bob, after the reload", "bob", "bob-secret", nil, 1)
}

// TestPlainVerifierStale checks that an exchange that looked its user up
// before a reload and proves the password after it leaves no verifier for
// the new credentials.
func TestPlainVerifierStale(t *testing.T) {
	store := credTestStore(t, 4096, "alice")
	m, derived := countingPlain(store)
	old := store.current()
	store.Swap(&Credentials{users: maps.Clone(old.users)})
	m.remember(old, "alice", m.verifier("alice", []byte("alice-secret")))
	if _, ok := m.lookup(store.current(), "alice"); ok {
		t.Error("a verifier proven against replaced credentials is used")
	}
	if _, done, err := m.Start(true).Step([]byte("\x00alice\x00alice-secret")); !done || err != nil || derived.Load() != 1 {
		t.Errorf("%v, done %v, %d derivations", err, done, derived.Load())
	}
}

// TestPlainVerifiersBounded fills the verifiers past their bound.
func TestPlainVerifiersBounded(t *testing.T) {
	store := credTestStore(t, 4096, "alice")
	m, _ := countingPlain(store)
	set := store.current()
	for i := range plainMaxVerifiers + 100 {
		user := fmt.Sprint("user", i)
		m.remember(set, user, m.verifier(user, []byte("pw")))
	}
	if n := len(m.verifiers); n != plainMaxVerifiers {
		t.Errorf("%d verifiers, want %d", n, plainMaxVerifiers)
	}
	last := fmt.Sprint("user", plainMaxVerifiers+99)
	if _, ok := m.lookup(set, last); !ok {
		t.Error("the verifier just remembered is gone")
	}
}

// TestPlainDerivationsBounded runs first authentications of many users at
// once: no more key derivations run together than the mechanism's slots.
func TestPlainDerivationsBounded(t *testing.T) {
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	m := NewPlain(credTestStore(t, 4096, users...), PlainOptions{}).(*plainMechanism)
	var running, most, total atomic.Int64
	m.derive = func(h func() hash.Hash, password, salt []byte, iterations int) ([]byte, error) {
		n := running.Add(1)
		for {
			if prev := most.Load(); n <= prev || most.CompareAndSwap(prev, n) {
				break
			}
		}
		total.Add(1)
		defer running.Add(-1)
		return saltedPassword(h, password, salt, iterations)
	}
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			if _, done, err := m.Start(true).Step([]byte("\x00" + u + "\x00" + u + "-secret")); !done || err != nil {
				t.Errorf("%s: %v", u, err)
			}
		})
	}
	wg.Wait()
	if total.Load() != int64(len(users)) || most.Load() > int64(cap(m.slots)) || most.Load() < 1 {
		t.Errorf("%d derivations, at most %d at once; want %d, at most %d", total.Load(), most.Load(), len(users), cap(m.slots))
	}
}

// BenchmarkPlain is what a PLAIN check costs: a key derivation at the
// default iterations for a user whose password has not been proven since
// start, a keyed digest once it has, nothing for an unknown user.
func BenchmarkPlain(b *testing.B) {
	store := credTestStore(b, DefaultIterations, "alice")
	b.Run("first", func(b *testing.B) {
		token := []byte("\x00alice\x00wrong")
		for b.Loop() {
			NewPlain(store, PlainOptions{}).Start(true).Step(token)
		}
	})
	m := NewPlain(store, PlainOptions{})
	if _, done, err := m.Start(true).Step([]byte("\x00alice\x00alice-secret")); !done || err != nil {
		b.Fatal(err)
	}
	for what, token := range map[string]string{
		"proven/wrong": "\x00alice\x00wrong",
		"proven/right": "\x00alice\x00alice-secret",
		"unknown":      "\x00nobody\x00wrong",
	} {
		b.Run(what, func(b *testing.B) {
			for b.Loop() {
				m.Start(true).Step([]byte(token))
			}
		})
	}
}
