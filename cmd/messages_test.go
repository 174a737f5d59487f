package cmd

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestErrorMessages checks the words of the errors a user meets first:
// every setting named as given (`--flag`, or the config file and its
// key), its value as typed (a size as written, not re-rendered in bytes),
// what was expected and, where there is one, the way out. A message the
// test gives only a prefix of is one whose rule is not this test's
// business, only its style.
func TestErrorMessages(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		f, err := os.CreateTemp(dir, "*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(body)
		f.Close()
		return f.Name()
	}
	cert := filepath.Join(dir, "cert.pem")
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	absent := filepath.Join(dir, "absent.pem")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	memFile := file("upstream: 127.0.0.1:1\nmax-memory: 8MiB\n")
	brokersFile := file("brokers: 0\n")
	typoFile := file("upstream: 127.0.0.1:1\nmax-inflight: 4\n")
	lotsFile := file("upstream: 127.0.0.1:1\nlisten: 127.0.0.1:0\nmax-in-flight: lots\n")
	up := []string{"serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}

	for _, tc := range []struct {
		args   []string
		want   string
		prefix bool // want is the start of the message
	}{
		// Sizes as typed, whichever way they were written.
		{append(up, "--max-memory", "8388608"), `--max-memory: "8388608" `, true},
		{append(up, "--max-memory", "8MiB"), `--max-memory: "8MiB" `, true},
		{[]string{"serve", "--config", absent}, `--config: "` + absent + `" cannot be read: no such file or directory`, false},
		{[]string{"serve", "--config", memFile}, "config file " + memFile + `:2: max-memory: "8MiB" `, true},
		{append(up, "--max-memory", "16383KiB"), `--max-memory: "16383KiB" must be at least 16MiB`, false},
		{append(up, "--max-memory", "64MB"), `--max-memory: "64MB" is ambiguous: write 64MiB (powers of 1024) or the number of bytes`, false},
		// Other values as typed.
		{append(up, "--read-timeout", "-90s"), `--read-timeout: "-90s" must not be negative (0 disables it)`, false},
		{append(up, "--max-in-flight", "0x0"), `--max-in-flight: "0x0" must be between 1 and 1048576`, false},
		{append(up, "--listen", "127.0.0.1:99999"), `--listen: "127.0.0.1:99999" has no port between 0 and 65535 (0 picks a free one)`, false},
		// Settings that go together, named the way they were given.
		{append(up, "--tls-cert", cert), `--tls-cert: "` + cert + `" needs --tls-key, its private key`, false},
		{append(up, "--tls-key", cert), `--tls-key: "` + cert + `" needs --tls-cert, the certificate it is the key of`, false},
		{append(up, "--tls-cert", absent, "--tls-key", absent+".key"), `--tls-cert: "` + absent + `" cannot be read: no such file or directory`, false},
		{append(up, "--upstream-tls-ca", absent), `--upstream-tls-ca: "` + absent + `" cannot be read: no such file or directory`, false},
		{append(up, "--upstream-tls-ca", cert), `--upstream-tls-ca: "` + cert + `" holds no certificate: no PEM certificate found (it needs -----BEGIN CERTIFICATE----- blocks)`, false},
		{append(up, "--report", "r.json"), `--report: "r.json" needs --verify`, false},
		{append(up, "--upstream-sasl-username", "u"), `--upstream-sasl-username: "u" needs --upstream-sasl-mechanism`, false},
		// A port in use names its flag and the way out.
		{[]string{"serve", "--listen", busy, "--upstream", "127.0.0.1:1"}, "--listen " + busy + ": address already in use (choose another --listen)", false},
		{[]string{"dev", "--listen", busy, "--data-dir", ""}, "--listen " + busy + ": address already in use (is inorder dev running? choose another --listen)", false},
		{append(up, "--admin-listen", busy), "--admin-listen " + busy + ": address already in use (choose another --admin-listen)", false},
		// A command's own flags, from the command line and from the file.
		{[]string{"dev", "--brokers", "00", "--data-dir", ""}, `--brokers: "00" must be at least 1`, false},
		{[]string{"dev", "--config", brokersFile, "--data-dir", ""}, "config file " + brokersFile + `:1: brokers: "0" must be at least 1`, false},
		{[]string{"check", "--window", "-0x1"}, `--window: "-0x1" must be at least 1`, false},
		{[]string{"check", "--format", "xml"}, `--format: "xml" must be text, json or junit`, false},
		{[]string{"check", "--bootstrap", "127.0.0.1"}, `--bootstrap: "127.0.0.1" is not HOST:PORT (for example 127.0.0.1:9092)`, false},
		{[]string{"check", "-b", "127.0.0.1:"}, `--bootstrap: "127.0.0.1:" is not HOST:PORT (for example 127.0.0.1:9092)`, false},
		{[]string{"bench", "--compression", "brotli"}, `--compression: "brotli" must be none, gzip, snappy, lz4 or zstd`, false},
		{[]string{"bench", "--acks", "2"}, `--acks: "2" must be -1 (all), 1 or 0`, false},
		{[]string{"bench", "--produce=false"}, `--produce: "false" and --consume false leave nothing to measure`, false},
		{[]string{"bench", "--ratio-to", "nobody"}, `--ratio-to: "nobody" names no target`, false},
		{[]string{"bench", "relay"}, "--to is required: the HOST:PORT to relay to", false},
		// What cobra refuses points at the help.
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus (inorder serve --help lists the flags)", false},
		// A typo of a flag the command takes names it.
		{[]string{"serve", "--upstrem", "127.0.0.1:1"}, "unknown flag: --upstrem (did you mean --upstream?)", false},
		{[]string{"serve", "--max-inflight=4"}, "unknown flag: --max-inflight (did you mean --max-in-flight?)", false},
		{[]string{"dev", "--data-dri", ""}, "unknown flag: --data-dri (did you mean --data-dir?)", false},
		{[]string{"dev", "--upstrem", "127.0.0.1:1"}, "unknown flag: --upstrem (inorder dev --help lists the flags)", false},
		{[]string{"serve", "-Z"}, "unknown shorthand flag: 'Z' in -Z (inorder serve --help lists the flags)", false},
		// A misspelt file key names its line and the key meant.
		{[]string{"serve", "--config", typoFile}, "config file " + typoFile + `:2: unknown key "max-inflight" (did you mean "max-in-flight"?)`, false},
		{[]string{"serve", "--config", lotsFile}, "config file " + lotsFile + `:3: max-in-flight: "lots" is not a whole number`, false},
		{[]string{"check", "extra"}, `"extra": inorder check takes flags only, no arguments (inorder check --help lists them)`, false},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		msg := strings.TrimSpace(stderr[strings.LastIndex(stderr, "inorder: ")+len("inorder: "):])
		ok := msg == tc.want || tc.prefix && strings.HasPrefix(msg, tc.want)
		if !ok || code == 0 {
			t.Errorf("%v: exit %d, message\n\t%s\nwant\n\t%s", tc.args, code, msg, tc.want)
		}
		if bare := bareFlagNames(msg); len(bare) > 0 {
			t.Errorf("%v: %q names %v without --", tc.args, msg, bare)
		}
	}
}

// bareFlagNames returns the flags of any command that msg names without
// their --, outside a config file's key. Only names of two words or more
// are looked for; one-word names (listen, upstream) are ordinary words.
func bareFlagNames(msg string) []string {
	msg = regexp.MustCompile(`^config file \S+:\d+: ([a-z-]+:|unknown key "[a-z-]+" \(did you mean "[a-z-]+"\?\))`).ReplaceAllString(msg, "")
	var bare []string
	seen := map[string]bool{}
	eachCommand(newRootCommand(), func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if seen[f.Name] || !strings.Contains(f.Name, "-") {
				return
			}
			seen[f.Name] = true
			re := regexp.MustCompile(`(^|[^-a-z])` + regexp.QuoteMeta(f.Name) + `($|[^-a-z])`)
			if re.MatchString(msg) {
				bare = append(bare, f.Name)
			}
		})
	})
	return bare
}
