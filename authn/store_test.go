package authn

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestDeriveCredentialRFC7677 checks the stored values for RFC 7677's
// example against what its exchange needs: the server accepts the RFC's
// proof and answers the RFC's signature only with the right StoredKey and
// ServerKey (TestScramRFCVectors), and they are the hash's size.
func TestDeriveCredentialRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, err := DeriveCredential(MechanismSCRAMSHA256, []byte("pencil"), salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.StoredKey) != 32 || len(c.ServerKey) != 32 || !bytes.Equal(c.Salt, salt) || c.Iterations != 4096 {
		t.Errorf("credential %+v", c)
	}
	again, _ := DeriveCredential(MechanismSCRAMSHA256, []byte("pencil"), salt, 4096)
	if !bytes.Equal(c.StoredKey, again.StoredKey) {
		t.Error("the derivation is not deterministic")
	}
	for _, bad := range []struct {
		mech  string
		iters int
		salt  []byte
	}{
		{"SCRAM-SHA-1", 4096, salt},
		{MechanismSCRAMSHA256, MinIterations - 1, salt},
		{MechanismSCRAMSHA512, MaxIterations + 1, salt},
		{MechanismSCRAMSHA256, 4096, nil},
	} {
		if _, err := DeriveCredential(bad.mech, []byte("pencil"), bad.salt, bad.iters); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestCredentialFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.yaml")
	if _, err := ReadCredentials(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	c := &Credentials{}
	for _, u := range []string{"bob", "alice", "a,b=c"} {
		for _, m := range SCRAMMechanisms() {
			cred, err := NewCredential(m, []byte("hunter2-"+u), 4096)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Set(u, m, cred); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(path)
	for _, want := range []string{"users:\n", "    alice:\n        SCRAM-SHA-256:\n            salt: ", "iterations: 4096\n", "stored_key: ", "server_key: "} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("the file lacks %q:\n%s", want, raw)
		}
	}
	if bytes.Contains(raw, []byte("hunter2")) {
		t.Error("the file holds a password")
	}
	if bytes.Index(raw, []byte("alice:")) > bytes.Index(raw, []byte("bob:")) {
		t.Errorf("users not sorted:\n%s", raw)
	}
	back, err := ReadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(back.Users(), " ") != "a,b=c alice bob" || strings.Join(back.Mechanisms("bob"), " ") != "SCRAM-SHA-256 SCRAM-SHA-512" {
		t.Errorf("read back %v, %v", back.Users(), back.Mechanisms("bob"))
	}
	for _, u := range c.Users() {
		for _, m := range SCRAMMechanisms() {
			a, _ := c.Lookup(u, m)
			b, ok := back.Lookup(u, m)
			if !ok || !bytes.Equal(a.Salt, b.Salt) || !bytes.Equal(a.StoredKey, b.StoredKey) || !bytes.Equal(a.ServerKey, b.ServerKey) || a.Iterations != b.Iterations {
				t.Errorf("%s %s differs after the round trip", u, m)
			}
		}
	}
	// Writing again leaves no temporary file behind and keeps the mode
	// of a file someone loosened.
	os.Chmod(path, 0o644)
	if err := back.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries", len(entries))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after a rewrite %v", fi.Mode())
	}
}

// TestCredentialFileWriteFails checks that a write that cannot finish
// leaves the old file whole and no temporary file.
func TestCredentialFileWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.yaml")
	c := &Credentials{}
	cred, _ := NewCredential(MechanismSCRAMSHA256, []byte("pw"), 4096)
	c.Set("alice", MechanismSCRAMSHA256, cred)
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	// A directory in the way of the rename.
	if err := c.WriteFile(dir); err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	after, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	if !bytes.Equal(before, after) || len(entries) != 1 {
		t.Errorf("after a failed write: %d entries, file changed %v", len(entries), !bytes.Equal(before, after))
	}
}

// TestParseErrorsShowNoSecret checks that a malformed file is refused with
// the user, mechanism and field named and no value shown.
func TestParseErrorsShowNoSecret(t *testing.T) {
	const key = "c2VjcmV0LWtleS1ieXRlcw=="
	good := func(mech string) string {
		c, _ := NewCredential(mech, []byte("pw"), 4096)
		return "salt: " + base64.StdEncoding.EncodeToString(c.Salt) +
			"\n      iterations: 4096\n      stored_key: " + base64.StdEncoding.EncodeToString(c.StoredKey) +
			"\n      server_key: " + base64.StdEncoding.EncodeToString(c.ServerKey)
	}
	g := good(MechanismSCRAMSHA256)
	for _, c := range []struct{ what, body, want string }{
		{"unknown field", "users:\n  alice:\n    SCRAM-SHA-256:\n      " + strings.Replace(g, "stored_key: ", "stored_key: "+key+"\n      x: ", 1), "malformed"},
		{"wrong key size", "users:\n  alice:\n    SCRAM-SHA-512:\n      " + g, `user "alice", SCRAM-SHA-512: stored_key: 32 bytes, want 64`},
		{"unknown mechanism", "users:\n  alice:\n    SCRAM-SHA-1:\n      " + g, `"SCRAM-SHA-1"`},
		{"few iterations", "users:\n  alice:\n    SCRAM-SHA-256:\n      " + strings.Replace(g, "4096", "1000", 1), "iterations 1000: want 4096 to 16384"},
		{"not base64", "users:\n  alice:\n    SCRAM-SHA-256:\n      " + strings.Replace(g, "server_key: ", "server_key: $$"+key, 1), "server_key: not base64"},
		{"a key as a user", "users:\n  " + key + "\n", "malformed"},
		{"duplicate user", "users:\n  alice:\n    SCRAM-SHA-256:\n      " + g + "\n  alice:\n    SCRAM-SHA-256:\n      " + g, "malformed"},
		{"no credential", "users:\n  alice: {}\n", `user "alice": no credential`},
	} {
		_, err := ParseCredentials([]byte(c.body))
		if err == nil {
			t.Errorf("%s: accepted", c.what)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.what, err, c.want)
		}
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: the error shows a key: %v", c.what, err)
		}
	}
	if c, err := ParseCredentials([]byte("# nothing yet\n")); err != nil || len(c.Users()) != 0 {
		t.Errorf("an empty file: %v, %v", c.Users(), err)
	}
}

// TestStoreLoadAndSwap checks that Load swaps a good file in and keeps the
// old credentials on a bad one, and that lookups race with swaps safely.
func TestStoreLoadAndSwap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.yaml")
	var s Store
	if _, ok := s.Lookup("alice", MechanismSCRAMSHA256); ok {
		t.Error("the zero store holds alice")
	}
	if err := s.Load(path); err == nil {
		t.Error("a missing file loaded")
	}
	c := &Credentials{}
	cred, _ := NewCredential(MechanismSCRAMSHA256, []byte("pw"), 4096)
	c.Set("alice", MechanismSCRAMSHA256, cred)
	c.WriteFile(path)
	if err := s.Load(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup("alice", MechanismSCRAMSHA256); !ok {
		t.Error("alice not loaded")
	}
	os.WriteFile(path, []byte("users: [\n"), 0o600)
	if err := s.Load(path); err == nil {
		t.Error("a malformed file loaded")
	}
	if _, ok := s.Lookup("alice", MechanismSCRAMSHA256); !ok {
		t.Error("a bad file dropped alice")
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				s.Lookup("alice", MechanismSCRAMSHA256)
			}
		})
	}
	for range 100 {
		s.Swap(c)
		s.Swap(&Credentials{})
	}
	wg.Wait()
}

func TestValidUser(t *testing.T) {
	for _, u := range []string{"", "a\x00b", "tab\there", "\xff"} {
		if ValidUserName(u) == nil {
			t.Errorf("%q accepted", u)
		}
	}
	for _, u := range []string{"alice", "a,b=c", "Zoë", "User:x"} {
		if err := ValidUserName(u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
}
