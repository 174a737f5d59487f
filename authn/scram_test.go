package authn

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"hash"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramVector is one of the RFCs' example exchanges, user "user" with
// password "pencil".
type scramVector struct {
	name        string
	h           func() hash.Hash
	salt        string
	serverNonce string
	clientFirst string
	serverFirst string
	clientFinal string
	serverFinal string
}

var scramVectors = []scramVector{{
	// RFC 5802 section 5, SCRAM-SHA-1: the steps are the same for every
	// hash, so the hash the product does not offer still checks them.
	name:        "RFC 5802 SCRAM-SHA-1",
	h:           sha1.New,
	salt:        "QSXCR+Q6sek8bf92",
	serverNonce: "3rfcNHYJY1ZVvWVs7j",
	clientFirst: "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
	serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
	clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
	serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
}, {
	// RFC 7677 section 3, SCRAM-SHA-256, the vector Kafka's
	// ScramFormatterTest checks too.
	name:        "RFC 7677 SCRAM-SHA-256",
	salt:        "W22ZaJ0SNY7soEsUEjb6gQ==",
	serverNonce: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
	clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
	serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
	clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
	serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}}

// vectorMechanism is the mechanism of v with the RFC's server nonce and a
// store holding "user" with the credential derived from "pencil".
func vectorMechanism(t testing.TB, v scramVector) *scramMechanism {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString(v.salt)
	if err != nil {
		t.Fatal(err)
	}
	var cred Credential
	name := MechanismSCRAMSHA256
	if v.h == nil {
		// The credential `credentials add` derives.
		if cred, err = DeriveCredential(MechanismSCRAMSHA256, []byte("pencil"), salt, 4096); err != nil {
			t.Fatal(err)
		}
	} else {
		name = "SCRAM-SHA-1"
		salted, err := saltedPassword(v.h, []byte("pencil"), salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		cred = Credential{Salt: salt, Iterations: 4096, StoredKey: storedKey(v.h, salted), ServerKey: scramHMAC(v.h, salted, []byte("Server Key"))}
	}
	c := &Credentials{users: map[string]map[string]Credential{"user": {name: cred}}}
	mech, err := NewSCRAM(MechanismSCRAMSHA256, NewStore(c))
	if err != nil {
		t.Fatal(err)
	}
	m := mech.(*scramMechanism)
	m.name = name
	if v.h != nil {
		m.h = v.h
	}
	m.nonce = func() string { return v.serverNonce }
	return m
}

func TestScramRFCVectors(t *testing.T) {
	for _, v := range scramVectors {
		t.Run(v.name, func(t *testing.T) {
			x := vectorMechanism(t, v).Start(false)
			reply, done, err := x.Step([]byte(v.clientFirst))
			if err != nil || done || string(reply) != v.serverFirst {
				t.Fatalf("server-first: %q, %v, %v; want %q", reply, done, err, v.serverFirst)
			}
			reply, done, err = x.Step([]byte(v.clientFinal))
			if err != nil || !done || string(reply) != v.serverFinal {
				t.Fatalf("server-final: %q, %v, %v; want %q", reply, done, err, v.serverFinal)
			}
			if p := x.Principal(); p.String() != "User:user" {
				t.Errorf("principal %v", p)
			}
			if _, _, err := x.Step(nil); !errors.Is(err, ErrAuthentication) {
				t.Errorf("a step after the end: %v", err)
			}

			// One bit of the proof off fails, with the RFC's error.
			x = vectorMechanism(t, v).Start(false)
			x.Step([]byte(v.clientFirst))
			bad := []byte(v.clientFinal)
			bad[len(bad)-3] ^= 1
			reply, done, err = x.Step(bad)
			if !errors.Is(err, ErrAuthentication) || done || string(reply) != "e=invalid-proof" {
				t.Errorf("a wrong proof: %q, %v, %v", reply, done, err)
			}
			if p := x.Principal(); p != (Principal{}) {
				t.Errorf("principal after a refusal: %v", p)
			}
		})
	}
}

// scramRun drives a franz-go client session against an exchange until
// one side ends; it returns the server's error, or the client's.
func scramRun(t *testing.T, client sasl.Mechanism, x Exchange) error {
	t.Helper()
	sess, token, err := client.Authenticate(context.Background(), "proxy:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		reply, done, err := x.Step(token)
		if err != nil {
			return err
		}
		clientDone, next, cerr := sess.Challenge(reply)
		if cerr != nil {
			return cerr
		}
		if done {
			if !clientDone {
				t.Fatal("the server ended, the client did not")
			}
			return nil
		}
		token = next
	}
	t.Fatal("no end after 10 rounds")
	return nil
}

func credTestStore(t testing.TB, iterations int, users ...string) *Store {
	t.Helper()
	c := &Credentials{}
	for _, u := range users {
		for _, m := range SCRAMMechanisms() {
			cred, err := NewCredential(m, []byte(u+"-secret"), iterations)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Set(u, m, cred); err != nil {
				t.Fatal(err)
			}
		}
	}
	return NewStore(c)
}

// TestScramWithFranzGo runs the franz-go client, which kgo uses, against
// the server over both hashes.
func TestScramWithFranzGo(t *testing.T) {
	store := credTestStore(t, 4096, "alice", "a,b=c")
	for _, name := range SCRAMMechanisms() {
		mech, err := NewSCRAM(name, store)
		if err != nil {
			t.Fatal(err)
		}
		client := func(a scram.Auth) sasl.Mechanism {
			if name == MechanismSCRAMSHA512 {
				return a.AsSha512Mechanism()
			}
			return a.AsSha256Mechanism()
		}
		for _, c := range []struct {
			what      string
			auth      scram.Auth
			principal string
			err       error
		}{
			{"right password", scram.Auth{User: "alice", Pass: "alice-secret"}, "User:alice", nil},
			{"a name to escape", scram.Auth{User: "a,b=c", Pass: "a,b=c-secret"}, "User:a,b=c", nil},
			{"authzid the user", scram.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}, "User:alice", nil},
			{"wrong password", scram.Auth{User: "alice", Pass: "alice-secreT"}, "", ErrAuthentication},
			{"unknown user", scram.Auth{User: "bob", Pass: "bob-secret"}, "", ErrAuthentication},
			{"authzid another user", scram.Auth{Zid: "root", User: "alice", Pass: "alice-secret"}, "", errAuthzid},
			{"delegation token", scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}, "", errTokenAuth},
		} {
			x := mech.Start(false)
			err := scramRun(t, client(c.auth), x)
			switch {
			case c.err == nil && err != nil:
				t.Errorf("%s, %s: %v", name, c.what, err)
			case c.err == nil && x.Principal().String() != c.principal:
				t.Errorf("%s, %s: principal %v", name, c.what, x.Principal())
			case c.err != nil && !errors.Is(err, c.err):
				t.Errorf("%s, %s: %v, want %v", name, c.what, err, c.err)
			case c.err != nil && !errors.Is(err, ErrAuthentication):
				t.Errorf("%s, %s: %v does not wrap ErrAuthentication", name, c.what, err)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Errorf("%s, %s: the error shows the password: %v", name, c.what, err)
			}
		}
	}
}

// TestScramUnknownUserLooksKnown checks that the first round does not tell
// an unknown user from a known one: both get a salt and Kafka's default
// iterations, the same salt on every attempt, and fail only at the proof
// with the same answer as a wrong password.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	mech, _ := NewSCRAM(MechanismSCRAMSHA256, credTestStore(t, 4096, "alice"))
	first := func(user string) string {
		reply, _, err := mech.Start(false).Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(reply), ",")
		return rest
	}
	a, b := first("nobody"), first("nobody")
	if a != b || !strings.HasSuffix(a, ",i=4096") || len(a) != len(first("alice")) {
		t.Errorf("unknown user: %q then %q; known user: %q", a, b, first("alice"))
	}
	if first("nobody") == first("nobody2") {
		t.Error("two unknown users share a salt")
	}
}

func TestScramRefusals(t *testing.T) {
	v := scramVectors[1]
	for _, c := range []struct {
		what         string
		first, final string
		want         error
		reply        string
	}{
		{"channel binding required", "p=tls-server-end-point,,n=user,r=abc", "", errChannelBinding, ""},
		{"mandatory extension", "n,,m=x,n=user,r=abc", "", errMandatoryExt, ""},
		{"no gs2 header", "n=user,r=abc", "", errMalformed, ""},
		{"bad escape", "n,,n=us=er,r=abc", "", errMalformed, ""},
		{"empty nonce", "n,,n=user,r=", "", errMalformed, ""},
		{"nonce with a space", "n,,n=user,r=a b", "", errMalformed, ""},
		{"token, any case", "n,,n=user,r=abc,tokenauth=TRUE", "", errTokenAuth, ""},
		{"authzid not the user", "n,a=admin,n=user,r=abc", "", errAuthzid, ""},
		{"gs2 header y kept in c=", "y,,n=user,r=rOprNGfwEbeRWgbNEkqO", v.clientFinal, errBindingMismatch, "e=channel-bindings-dont-match"},
		{"another nonce", v.clientFirst, strings.Replace(v.clientFinal, "k0,", "k1,", 1), errNonce, "e=other-error"},
		{"no proof", v.clientFirst, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", errMalformed, "e=invalid-encoding"},
		{"short proof", v.clientFirst, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzb", ErrAuthentication, "e=invalid-proof"},
	} {
		x := vectorMechanism(t, v).Start(false)
		reply, done, err := x.Step([]byte(c.first))
		if err == nil && c.final != "" {
			reply, done, err = x.Step([]byte(c.final))
		}
		if !errors.Is(err, c.want) || !errors.Is(err, ErrAuthentication) || done || string(reply) != c.reply {
			t.Errorf("%s: %q, %v, %v; want %q, %v", c.what, reply, done, err, c.reply, c.want)
		}
		if _, _, err := x.Step([]byte(v.clientFinal)); !errors.Is(err, errExchangeOver) {
			t.Errorf("%s: a step after a refusal: %v", c.what, err)
		}
	}
	// Unknown extensions are ignored, as Kafka does, and y is accepted
	// when c= repeats it.
	x := vectorMechanism(t, v).Start(false)
	if _, _, err := x.Step([]byte("y,,n=user,r=abc,foo=bar")); err != nil {
		t.Errorf("gs2 flag y and an extension: %v", err)
	}
}

func TestNewSCRAMRefusesOtherNames(t *testing.T) {
	if _, err := NewSCRAM("SCRAM-SHA-1", &Store{}); err == nil {
		t.Error("SCRAM-SHA-1 accepted")
	}
}

// FuzzScramServer feeds random client-first and client-final messages: the
// server never panics, every refusal is an authentication failure, and no
// exchange succeeds without the proof, which needs the server's random
// nonce. The second exchange starts from a valid client-first-message, so
// that the final message's parser is reached whatever the first input.
func FuzzScramServer(f *testing.F) {
	v := scramVectors[1]
	f.Add([]byte(v.clientFirst), []byte(v.clientFinal))
	f.Add([]byte("y,a=user,n=user,r=x,tokenauth=false,ext=1"), []byte("c=eSxhPXVzZXIs,r=x,e=1,p=AAAA"))
	f.Add([]byte("n,,n=nobody,r=abc"), []byte("c=biws,r=abc,p="))
	store := credTestStore(f, 4096, "user")
	mech, err := NewSCRAM(MechanismSCRAMSHA256, store)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, start := range [][]byte{first, []byte("n,,n=user,r=abc")} {
			x := mech.Start(false)
			_, done, err := x.Step(start)
			if err == nil && !done {
				_, done, err = x.Step(final)
			}
			if done {
				t.Fatalf("succeeded without the proof: %q, %q", start, final)
			}
			if err != nil && !errors.Is(err, ErrAuthentication) {
				t.Fatalf("%v is not an authentication failure", err)
			}
		}
	})
}

// TestSaslName decodes the user names of Kafka's ScramFormatterTest as
// its clients escape them, and refuses an "=" that escapes nothing.
func TestSaslName(t *testing.T) {
	escape := strings.NewReplacer("=", "=3D", ",", "=2C")
	for _, u := range []string{"user1", "123", "1,2", "user=A", "user==B", "user,1", "user 1", ",", "=", ",=", "==", "Zoë"} {
		if got, ok := saslName(escape.Replace(u)); !ok || got != u {
			t.Errorf("%q: %q, %v", u, got, ok)
		}
	}
	for _, bad := range []string{"", "a=", "a=2", "a=2c", "a=41", "a\x00b", "\xff"} {
		if got, ok := saslName(bad); ok {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}
