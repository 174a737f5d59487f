package upauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writePrincipals writes doc and a password file pw (holding "secret-pw")
// in a directory of their own; doc's PWFILE stands for pw's path.
func writePrincipals(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "principals.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(doc, "PWFILE", pw)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(k string) string {
	if k == "BOB_SECRET" {
		return "bob-env-pw"
	}
	return ""
}

func TestPrincipalsLoad(t *testing.T) {
	path := writePrincipals(t, `principals:
  User:alice:
    mechanism: SCRAM-SHA-512
    username: app-alice
    passwordFile: PWFILE
  User:bob:
    mechanism: PLAIN
    username: app-bob
    passwordEnv: BOB_SECRET
  User:reports:
    mechanism: OAUTHBEARER
    tokenFile: PWFILE
`)
	m, err := LoadPrincipals(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 3 {
		t.Fatalf("%d principals, want 3", m.Len())
	}
	for principal, want := range map[string][2]string{
		"User:alice": {"SCRAM-SHA-512", "app-alice"}, "User:bob": {"PLAIN", "app-bob"}, "User:reports": {"OAUTHBEARER", ""},
	} {
		a := m.For(principal)
		if a == nil || a.Mechanism() != want[0] || a.User() != want[1] {
			t.Errorf("%s: %v, want %v", principal, a, want)
		}
	}
	if pw, err := m.For("User:bob").password(); err != nil || pw != "bob-env-pw" {
		t.Errorf("bob's password from the environment: %q, %v", pw, err)
	}
	if pw, err := m.For("User:alice").password(); err != nil || pw != "secret-pw" {
		t.Errorf("alice's password from its file: %q, %v", pw, err)
	}
	if m.For("User:carol") != nil {
		t.Error("an unmapped principal has credentials")
	}

	// A reload that fails keeps the mapping; one that reads replaces it.
	if err := os.WriteFile(path, []byte("principals: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if m.For("User:alice") == nil {
		t.Fatal("a failed reload dropped the mapping")
	}
	if err := os.WriteFile(path, []byte("principals:\n  User:carol:\n    mechanism: PLAIN\n    username: c\n    passwordEnv: BOB_SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if m.For("User:alice") != nil || m.For("User:carol") == nil {
		t.Error("the reload did not replace the mapping")
	}
}

func TestPrincipalsRefused(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"inline password", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    password: hunter2-inline\n", ":5: User:a: password: secrets are not written in this file"},
		{"inline token", "principals:\n  User:a:\n    mechanism: OAUTHBEARER\n    token: eyJ-inline\n", "token: secrets are not written in this file"},
		{"unknown key", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    passwordEnv: BOB_SECRET\n    pasword: x\n", `unknown key "pasword"`},
		{"no principal type", "principals:\n  alice:\n    mechanism: PLAIN\n    username: a\n    passwordEnv: BOB_SECRET\n", "want Type:name"},
		{"mechanism", "principals:\n  User:a:\n    mechanism: GSSAPI\n    username: a\n    passwordEnv: BOB_SECRET\n", `mechanism "GSSAPI"`},
		{"two secrets", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    passwordEnv: BOB_SECRET\n    passwordFile: PWFILE\n", "exactly one of passwordFile and passwordEnv"},
		{"no secret", "principals:\n  User:a:\n    mechanism: SCRAM-SHA-256\n    username: a\n", "exactly one of passwordFile and passwordEnv"},
		{"unset env", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    passwordEnv: NOT_SET\n", "$NOT_SET is not set"},
		{"token file for plain", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    tokenFile: PWFILE\n", "tokenFile is for OAUTHBEARER"},
		{"user for oauth", "principals:\n  User:a:\n    mechanism: OAUTHBEARER\n    username: a\n    tokenFile: PWFILE\n", "OAUTHBEARER takes tokenFile only"},
		{"top key", "users:\n  User:a: {}\n", `unknown key "users"`},
		{"twice", "principals:\n  User:a:\n    mechanism: PLAIN\n    username: a\n    passwordEnv: BOB_SECRET\n  User:a:\n    mechanism: PLAIN\n    username: b\n    passwordEnv: BOB_SECRET\n", "mapped twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPrincipals(writePrincipals(t, tc.doc), env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			for _, secret := range []string{"hunter2-inline", "eyJ-inline", "secret-pw", "bob-env-pw"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes a secret: %v", err)
				}
			}
		})
	}
}
