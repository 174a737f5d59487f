package authn

import (
	"bytes"
	"errors"
	"hash"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// allocated is the number of bytes the heap handed out while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// refusedCheaply checks that step refuses big, a message of about 1 MiB,
// without allocating anything near its size: it is refused before it is
// copied or parsed.
func refusedCheaply(t *testing.T, what string, big []byte, step func([]byte) error) {
	t.Helper()
	const runs = 10
	var errs []error
	n := allocated(func() {
		for range runs {
			errs = append(errs, step(big))
		}
	})
	for _, err := range errs {
		if !errors.Is(err, ErrAuthentication) {
			t.Fatalf("%s: %v, want a refusal", what, err)
		}
	}
	if n >= 1<<20 {
		t.Errorf("%s: %d runs on a 1 MiB message allocated %d bytes", what, runs, n)
	}
}

// within says whether s lies in the memory of t.
func within(s, t string) bool {
	if len(s) == 0 || len(t) == 0 {
		return false
	}
	sp, tp := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(t)))
	return sp >= tp && sp < tp+uintptr(len(t))
}

func TestScramMessageBounds(t *testing.T) {
	mech, err := NewSCRAM(MechanismSCRAMSHA256, credTestStore(t, 4096, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	head := "n,,n=alice,r="
	atBound := head + strings.Repeat("x", scramMaxClientFirst-len(head))
	if _, _, err := mech.Start(false).Step([]byte(atBound + "x")); !errors.Is(err, errFirstTooLong) || !errors.Is(err, ErrAuthentication) {
		t.Errorf("client-first of %d bytes: %v", len(atBound)+1, err)
	}
	refusedCheaply(t, "SCRAM client-first", bytes.Repeat([]byte("a"), 1<<20), func(b []byte) error {
		_, _, err := mech.Start(false).Step(b)
		return err
	})

	// A message at the bound is read; what the exchange keeps is its own
	// memory, none of it the client's message.
	x := mech.Start(false).(*scramExchange)
	reply, err := x.first(atBound)
	if err != nil {
		t.Fatal(err)
	}
	for name, kept := range map[string]string{"user": x.user, "gs2": x.gs2, "authPrefix": x.authPrefix, "nonce": x.nonce} {
		if within(kept, atBound) {
			t.Errorf("%s is held in the client's message", name)
		}
	}
	if !within(x.nonce, x.authPrefix) || !strings.HasPrefix(string(reply), "r="+x.nonce+",") {
		t.Errorf("nonce %d bytes, not the server-first's", len(x.nonce))
	}
	if want := len(atBound) - len("n,,") + 1 + len(reply) + 1; len(x.authPrefix) != want {
		t.Errorf("authPrefix of %d bytes, want %d", len(x.authPrefix), want)
	}
	if kept := len(x.user) + len(x.gs2) + len(x.authPrefix); kept > 5<<10 {
		t.Errorf("the exchange keeps %d bytes between its rounds", kept)
	}
	x.state = scramFinal
	final := "c=biws,r=" + x.nonce + ",p=" + strings.Repeat("A", scramMaxClientFinal)
	if reply, _, err := x.Step([]byte(final)); !errors.Is(err, errFinalTooLong) || string(reply) != "e=invalid-encoding" {
		t.Errorf("client-final of %d bytes: %q, %v", len(final), reply, err)
	}
	if x.authPrefix != "" || x.nonce != "" {
		t.Error("a refused exchange keeps its messages")
	}
}

func TestPlainMessageBound(t *testing.T) {
	m := NewPlain(credTestStore(t, 4096, "alice"), PlainOptions{}).(*plainMechanism)
	derived := 0
	m.derive = func(h func() hash.Hash, password, salt []byte, iterations int) ([]byte, error) {
		derived++
		return saltedPassword(h, password, salt, iterations)
	}
	longest := "\x00alice\x00" + strings.Repeat("p", plainMaxPassword)
	if _, _, err := m.Start(true).Step([]byte(longest)); err != ErrAuthentication || derived != 1 {
		t.Errorf("password of %d bytes: %v after %d derivations", plainMaxPassword, err, derived)
	}
	tooLong := strings.Repeat("a", MaxUserName) + "\x00" + strings.Repeat("b", MaxUserName) + "\x00" + strings.Repeat("p", plainMaxPassword+1)
	if _, _, err := m.Start(true).Step([]byte(tooLong)); !errors.Is(err, errPlainTooLong) || derived != 1 {
		t.Errorf("message of %d bytes: %v after %d derivations", len(tooLong), err, derived)
	}
	refusedCheaply(t, "PLAIN", bytes.Repeat([]byte("a"), 1<<20), func(b []byte) error {
		_, _, err := m.Start(true).Step(b)
		return err
	})
}

func TestOAuthMessageBound(t *testing.T) {
	m := newFileMech(t, jwksOf(t, "ec256"), OAuthConfig{})
	big := append(append([]byte("n,,\x01auth=Bearer "), bytes.Repeat([]byte("a"), 1<<20)...), 1, 1)
	refusedCheaply(t, "OAUTHBEARER", big, func(b []byte) error {
		_, _, err := m.Start(true).Step(b)
		return err
	})
}

func TestUserNameBound(t *testing.T) {
	if err := ValidUserName(strings.Repeat("a", MaxUserName)); err != nil {
		t.Errorf("a name of %d bytes: %v", MaxUserName, err)
	}
	if err := ValidUserName(strings.Repeat("a", MaxUserName+1)); err == nil {
		t.Errorf("a name of %d bytes accepted", MaxUserName+1)
	}
}
