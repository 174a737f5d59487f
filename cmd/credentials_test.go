package cmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inorder-proxy/inorder/authn"
)

// runCLIInput is runCLI with stdin.
func runCLIInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString("inorder: " + err.Error() + "\n")
	}
	return exitCode(err), out.String(), errOut.String()
}

// plainAccepts reports whether the credential file at path accepts user
// with password through PLAIN, which derives the key as SCRAM does.
func plainAccepts(t *testing.T, path, user, password string) bool {
	t.Helper()
	var s authn.Store
	if err := s.Load(path); err != nil {
		t.Fatal(err)
	}
	_, done, _ := authn.NewPlain(&s, authn.PlainOptions{AllowWithoutTLS: true}).Start(false).Step([]byte("\x00" + user + "\x00" + password))
	return done
}

func TestCredentialsAddAndList(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clients.yaml")
	pwFile := filepath.Join(dir, "bob.password")
	os.WriteFile(pwFile, []byte("bob-pw\n"), 0o600)

	if code, out, stderr := runCLIInput(t, "alice-pw\n", "credentials", "add", "--file", file, "--user", "alice"); code != 0 || !strings.Contains(out, "alice: SCRAM-SHA-256 (4096 iterations)") {
		t.Fatalf("add alice: exit %d, %s%s", code, out, stderr)
	}
	if code, _, stderr := runCLIInput(t, "", "credentials", "add", "--file", file, "--user", "bob", "--password-file", pwFile,
		"--mechanism", "SCRAM-SHA-512", "--mechanism", "SCRAM-SHA-256", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192"); code != 0 {
		t.Fatalf("add bob: exit %d, %s", code, stderr)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v", fi, err)
	}
	// One trailing newline is not the password's.
	if !plainAccepts(t, file, "alice", "alice-pw") || !plainAccepts(t, file, "bob", "bob-pw") || plainAccepts(t, file, "bob", "bob-pw\n") {
		t.Error("the passwords added do not verify as they should")
	}

	code, out, stderr := runCLIInput(t, "", "credentials", "list", "--file", file)
	want := "USER   MECHANISM      ITERATIONS\n" +
		"alice  SCRAM-SHA-256  4096\n" +
		"bob    SCRAM-SHA-256  8192\n" +
		"bob    SCRAM-SHA-512  8192\n"
	if code != 0 || out != want {
		t.Errorf("list: exit %d\n%s%s\nwant\n%s", code, out, stderr, want)
	}
	// No salt or key of the file shows in the listing.
	raw, _ := os.ReadFile(file)
	for _, line := range strings.Split(string(raw), "\n") {
		_, v, ok := strings.Cut(line, ": ")
		if b, err := base64.StdEncoding.DecodeString(v); ok && err == nil && len(b) >= 16 && strings.Contains(out+stderr, v) {
			t.Errorf("list shows a secret: %s", line)
		}
	}

	// Replacing a user's password keeps the others.
	if code, _, stderr := runCLIInput(t, "alice-new\r\n", "credentials", "add", "--file", file, "--user", "alice"); code != 0 {
		t.Fatalf("replace alice: exit %d, %s", code, stderr)
	}
	if plainAccepts(t, file, "alice", "alice-pw") || !plainAccepts(t, file, "alice", "alice-new") || !plainAccepts(t, file, "bob", "bob-pw") {
		t.Error("after replacing alice's password")
	}
}

// TestCredentialsRefusals checks the exit statuses: 2 for a command asked
// wrongly, 1 for one that failed, and that no password shows.
func TestCredentialsRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clients.yaml")
	add := func(extra ...string) []string {
		return append([]string{"credentials", "add", "--file", file, "--user", "alice"}, extra...)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"pw", []string{"credentials", "add", "--file", file}, exitUsage, `required flag(s) "user" not set`},
		{"pw", []string{"credentials", "add", "--user", "alice"}, exitUsage, `required flag(s) "file" not set`},
		{"pw", []string{"credentials", "add", "--file", file, "--user", "alice", "--password", "pw"}, exitUsage, "unknown flag: --password"},
		{"pw", add("--mechanism", "PLAIN"), exitUsage, `--mechanism: "PLAIN" must be SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"pw", add("--iterations", "4095"), exitUsage, `--iterations: "4095" must be between 4096 and 16384`},
		{"pw", add("--iterations", "16385"), exitUsage, `--iterations: "16385" must be between 4096 and 16384`},
		{"pw", add("extra"), exitUsage, "takes flags only"},
		{"\n", add(), exitUsage, "the password from standard input is empty"},
		{"pw", []string{"credentials", "add", "--file", file, "--user", "a\x01b"}, exitUsage, "--user: "},
		{"pw", []string{"credentials", "bogus"}, exitUsage, `unknown command "bogus"`},
		{"", add("--password-file", filepath.Join(dir, "missing")), exitFailed, "missing: no such file"},
		{"", []string{"credentials", "list", "--file", filepath.Join(dir, "missing")}, exitFailed, "no such file"},
		{"", []string{"credentials", "list"}, exitUsage, `required flag(s) "file" not set`},
	} {
		code, _, stderr := runCLIInput(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %s; want %d, %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a refused add wrote the file")
	}

	// A malformed file is not overwritten, and its error shows no key.
	os.WriteFile(file, []byte("users:\n  alice:\n    SCRAM-SHA-256:\n      salt: c2VjcmV0\n      iterations: 4096\n      stored_key: c2VjcmV0\n      server_key: c2VjcmV0\n"), 0o600)
	code, _, stderr := runCLIInput(t, "secret-pw", add()...)
	if code != exitFailed || !strings.Contains(stderr, `user "alice", SCRAM-SHA-256: stored_key: 6 bytes, want 32`) || strings.Contains(stderr, "c2VjcmV0") || strings.Contains(stderr, "secret-pw") {
		t.Errorf("a malformed file: exit %d, %s", code, stderr)
	}
}
