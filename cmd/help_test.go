package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpFlags runs `inorder <command> --help` and returns the flags it
// lists, each with the rest of its line.
func helpFlags(t *testing.T, command string) map[string]string {
	t.Helper()
	code, out, stderr := runCLI(t, command, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d\n%s", command, code, stderr)
	}
	flags := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)(.*)$`).FindAllStringSubmatch(out, -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) == 0 {
		t.Fatalf("%s --help lists no flags:\n%s", command, out)
	}
	return flags
}

// devRefuses are the settings that mean nothing in front of dev's own
// brokers.
var devRefuses = []string{
	"upstream", "upstream-tls", "upstream-tls-ca", "upstream-tls-cert", "upstream-tls-key",
	"upstream-tls-server-name", "upstream-tls-insecure-skip-verify", "upstream-sasl-mechanism",
	"upstream-sasl-username", "upstream-sasl-password-file", "upstream-sasl-token-file",
	"allow-unauthenticated-clients", "allow-upstream",
}

// TestHelpShowsWhatEachCommandTakes checks that dev --help lists none of
// the settings dev refuses, that each of them is refused from the command
// line and from the file with the way out, that serve lists them all, and
// that dev shows its own default for --admin-listen.
func TestHelpShowsWhatEachCommandTakes(t *testing.T) {
	dev, serve := helpFlags(t, "dev"), helpFlags(t, "serve")
	for _, name := range devRefuses {
		if _, ok := dev[name]; ok {
			t.Errorf("dev --help lists --%s, which dev refuses", name)
		}
		if _, ok := serve[name]; !ok {
			t.Errorf("serve --help does not list --%s", name)
		}
		args := []string{"dev", "--data-dir", ""}
		switch typ := strings.Fields(serve[name])[0]; typ {
		case "string", "list":
			args = append(args, "--"+name+"=x:1")
		default:
			args = append(args, "--"+name) // a switch; typ is its usage
		}
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "--"+name+":") || !strings.Contains(stderr, "use serve") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	file := t.TempDir() + "/dev.yaml"
	os.WriteFile(file, []byte("upstream-sasl-mechanism: PLAIN\n"), 0o600)
	if code, _, stderr := runCLI(t, "dev", "--data-dir", "", "--config", file); code != exitUsage ||
		!strings.Contains(stderr, "config file "+file+`:1: upstream-sasl-mechanism: "PLAIN" does not apply to dev`) {
		t.Errorf("a refused key in the file: exit %d, %s", code, stderr)
	}
	if got := dev["admin-listen"]; !strings.Contains(got, `(default "127.0.0.1:0")`) {
		t.Errorf("dev --help: --admin-listen%s; want dev's default, a free loopback port", got)
	}
	if got := serve["admin-listen"]; strings.Contains(got, "(default") {
		t.Errorf("serve --help: --admin-listen%s; want no default", got)
	}
}

// TestREADMENamesEveryFlag checks that README.md mentions, as `--name`,
// every flag that serve, dev and check list in --help.
func TestREADMENamesEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{"serve", "dev", "check"} {
		names := helpFlags(t, command)
		var missing []string
		for name := range names {
			if name != "help" && !regexp.MustCompile("--"+regexp.QuoteMeta(name)+`\b`).Match(readme) {
				missing = append(missing, "--"+name)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%s --help lists flags README.md does not mention: %v", command, missing)
		}
	}
}

// TestREADMECommands checks the commands README.md shows: every run of the
// binary is ./inorder, which the quick start builds (a bare inorder runs
// whatever is on the PATH, if anything), and every `cd DIR && go test
// ./...` names a module of its own, since from inside another module's
// directory ./... skips a nested module without a word.
func TestREADMECommands(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cdTest := regexp.MustCompile(`cd (\S+) && go test \./\.\.\.`)
	for i, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "    ") {
			continue // commands are indented code blocks
		}
		cmdline := strings.TrimSpace(line)
		if strings.HasPrefix(cmdline, "inorder ") {
			t.Errorf("README.md:%d runs a bare inorder, not the ./inorder the quick start builds: %s", i+1, cmdline)
		}
		if m := cdTest.FindStringSubmatch(cmdline); m != nil {
			if _, err := os.Stat(filepath.Join("..", m[1], "go.mod")); err != nil {
				t.Errorf("README.md:%d: %s is not a module of its own, so go test ./... there tests part of another module: %s", i+1, m[1], cmdline)
			}
		}
	}
}
