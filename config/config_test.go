package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func flags(c *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String(FlagConfig, "", "")
	BindFlags(fs, c)
	return fs
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestResolveOrder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("upstream: [a:1, b:2]\nupstream-ordering: connection\nmax-buffered-bytes: 64MiB\nshutdown-grace: 3s\nlisten: 127.0.0.1:7000\n"), 0o600)
	c := Default()
	fs := flags(&c)
	if err := fs.Parse([]string{"--config", file, "--listen", "127.0.0.1:8000"}); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	if got.Listen != "127.0.0.1:8000" {
		t.Errorf("flag did not override file: listen %q", got.Listen)
	}
	if strings.Join(got.Upstreams, ",") != "a:1,b:2" || got.UpstreamOrdering != OrderingConnection ||
		got.MaxBufferedBytes != 64<<20 || got.ShutdownGrace != 3*time.Second {
		t.Errorf("file values not applied: %+v", got)
	}
	if got.MaxInFlight != Default().MaxInFlight {
		t.Errorf("default lost: max-in-flight %d", got.MaxInFlight)
	}
}

func TestBadValuesNameFieldAndValue(t *testing.T) {
	cases := []struct {
		yaml, field, value string
	}{
		{"upstream-ordering: sometimes\n", "upstream-ordering", "sometimes"},
		{"max-in-flight: 0\n", "max-in-flight", "0"},
		{"listen: nowhere\n", "listen", "nowhere"},
		{"node-port-base: 70000\n", "node-port-base", "70000"},
		{"max-request-size: lots\n", "max-request-size", "lots"},
		{"log-level: loud\n", "log-level", "loud"},
		{"shutdown-grace: -1s\n", "shutdown-grace", "-1s"},
		{"no-such-field: 1\n", "no-such-field", ""},
		{"max-memory: 8MiB\n", "max-memory", `"8MiB"`},
		{"max-connections: -1\n", "max-connections", "-1"},
		{"idle-timeout: -1s\n", "idle-timeout", "-1s"},
		{"read-timeout: -2s\n", "read-timeout", "-2s"},
		{"write-timeout: -3s\n", "write-timeout", "-3s"},
		{"allow-upstream: [10.0.0.0/33]\n", "allow-upstream", "10.0.0.0/33"},
		{"allow-upstream: ['*.']\n", "allow-upstream", "*."},
		{"allow-upstream: ['a*b.example']\n", "allow-upstream", "a*b.example"},
	}
	for _, tc := range cases {
		file := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(file, []byte(tc.yaml), 0o600)
		c := Default()
		fs := flags(&c)
		fs.Parse([]string{"--config", file})
		_, err := Resolve(fs, Default())
		if err == nil {
			t.Fatalf("%q accepted", tc.yaml)
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.value) {
			t.Errorf("%q: error %q does not name %s=%s", tc.yaml, err, tc.field, tc.value)
		}
	}
}

// TestMemoryAlone: --max-memory needs no other setting changed, down to
// 16MiB, with the frame caps at their defaults (100MiB and 256MiB) or any
// size; below 16MiB it is refused with the floor in the message.
func TestMemoryAlone(t *testing.T) {
	for _, args := range [][]string{
		{"--max-memory", "16MiB"},
		{"--max-memory", "32MiB"},
		{"--max-memory", "16MiB", "--max-request-size", "1GiB", "--max-response-size", "1GiB"},
		{"--max-memory", "0"},
	} {
		c := Default()
		fs := flags(&c)
		if err := fs.Parse(append([]string{"--upstream", "k:9092"}, args...)); err != nil {
			t.Fatal(err)
		}
		if _, err := Resolve(fs, Default()); err != nil {
			t.Errorf("%v refused: %v", args, err)
		}
	}
	c := Default()
	fs := flags(&c)
	if err := fs.Parse([]string{"--max-memory", "16383KiB"}); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve(fs, Default())
	if err == nil || !strings.Contains(err.Error(), "--max-memory") || !strings.Contains(err.Error(), "at least 16MiB") {
		t.Fatalf("--max-memory 16383KiB: %v, want it refused below 16MiB", err)
	}
}

func TestAllowUpstreamPatterns(t *testing.T) {
	c := Default()
	fs := flags(&c)
	if err := fs.Parse([]string{"--allow-upstream", "kafka-1.internal, *.kafka.internal,10.0.0.0/8,::1,fd00::/8", "--expose-controllers"}); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.AllowUpstream) != 5 || !got.ExposeControllers {
		t.Fatalf("resolved %q, expose-controllers %v", got.AllowUpstream, got.ExposeControllers)
	}
	d := Default()
	if d.ExposeControllers || len(d.AllowUpstream) != 0 || d.Memory() != 1<<30 || d.Connections() != 10000 ||
		d.IdleTimeout != 10*time.Minute || d.ReadTimeout != 30*time.Second {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestBadFlagValue(t *testing.T) {
	c := Default()
	fs := flags(&c)
	err := fs.Parse([]string{"--upstream-ordering", "maybe"})
	if err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Fatalf("flag parse: %v", err)
	}
	var fe *FieldError
	c2 := Default()
	c2.MaxInFlight = -3
	if err := c2.Validate(); !errors.As(err, &fe) || fe.Field != "max-in-flight" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("validate: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"10": 10, "10B": 10, "1KiB": 1024, "100MiB": 100 << 20, "2GiB": 2 << 30, " 5 MiB ": 5 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1TiB", "x", "1GB", "5 MB", "3kb"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	if _, err := ParseSize("2GB"); err == nil || !strings.Contains(err.Error(), "write 2GiB") {
		t.Errorf("ParseSize(2GB): %v, want a pointer to 2GiB", err)
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 1023: "1023", 1024: "1KiB", 128 << 20: "128MiB", 100 << 20: "100MiB", 3 << 30: "3GiB", 1536: "1536", 1<<20 + 1024: "1025KiB"} {
		got := FormatSize(n)
		if got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(got); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func TestHelpShowsSizesAsWritten(t *testing.T) {
	c := Default()
	usage := flags(&c).FlagUsages()
	for _, want := range []string{"(default 128MiB)", "(default 100MiB)", "(default 256MiB)"} {
		if !strings.Contains(usage, want) {
			t.Errorf("--help lacks %q:\n%s", want, usage)
		}
	}
	if strings.Contains(usage, "134217728") {
		t.Errorf("--help shows a size in bytes:\n%s", usage)
	}
}

// writeFile writes a config file named x.yaml and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestFileValueErrors checks the message for a bad value of every value
// type a key can have: it names the file, the key, the value and what was
// expected, and shows no flag syntax or parser internals.
func TestFileValueErrors(t *testing.T) {
	var (
		i   int
		u   uint
		i64 int64
		f   float64
		b   bool
		d   time.Duration
		sz  sizeValue
		s32 size32Value
		m   orderingValue
		l   listValue
	)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.IntVar(&i, "an-int", 0, "")
	fs.UintVar(&u, "a-uint", 0, "")
	fs.Int64Var(&i64, "an-int64", 0, "")
	fs.Float64Var(&f, "a-float", 0, "")
	fs.BoolVar(&b, "a-bool", false, "")
	fs.DurationVar(&d, "a-duration", 0, "")
	fs.Var(&sz, "a-size", "")
	fs.Var(&s32, "a-size32", "")
	fs.Var(&m, "a-mode", "")
	fs.Var(&l, "a-list", "")
	for _, tc := range []struct{ yaml, want string }{
		{"an-int: lots", `an-int: "lots" is not a whole number`},
		{"an-int: 99999999999999999999", `an-int: "99999999999999999999" is out of range for a int`},
		{"a-uint: -1", `a-uint: "-1" is not a whole number of zero or more`},
		{"an-int64: 1.5", `an-int64: "1.5" is not a whole number`},
		{"a-float: half", `a-float: "half" is not a number`},
		{"a-bool: sometimes", `a-bool: "sometimes" is not true or false`},
		{"a-duration: 10", `a-duration: "10" is not a duration (like 500ms, 30s, 5m or 1h)`},
		{"a-size: big", `a-size: "big" is not a size (a number of bytes, or one with a B, KiB, MiB or GiB suffix, like 128MiB)`},
		{"a-size: 1GB", `a-size: "1GB" is ambiguous: write 1GiB (powers of 1024) or the number of bytes`},
		{"a-size32: 3GiB", `a-size32: "3GiB" is too large`},
		{"a-mode: conection", `a-mode: "conection" must be none or connection`},
		{"a-list: {a: 1}", `a-list: expected a value or a list`},
		{"a-list: [a, [b]]", `a-list: list items must be plain values`},
	} {
		file := writeFile(t, tc.yaml+"\n")
		_, err := loadFile(file, fs, nil, &Config{})
		want := "config file " + file + ":1: " + tc.want
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.yaml, err, want)
			continue
		}
		for _, internal := range []string{"--", "flag", "strconv", "invalid argument", "Parse"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("%s: error %q shows %q", tc.yaml, err, internal)
			}
		}
	}
}

func TestResolveErrorsSayWhereTheValueCameFrom(t *testing.T) {
	file := writeFile(t, "max-in-flight: lots\n")
	c := Default()
	fs := flags(&c)
	fs.Parse([]string{"--config", file})
	_, err := Resolve(fs, Default())
	if want := "config file " + file + `:1: max-in-flight: "lots" is not a whole number`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}

	file = writeFile(t, "max-in-flight: 0\n")
	c = Default()
	fs = flags(&c)
	fs.Parse([]string{"--config", file})
	_, err = Resolve(fs, Default())
	if want := "config file " + file + `:1: max-in-flight: "0" must be between 1 and 1048576`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v does not wrap ErrInvalid", err)
	}

	c = Default()
	fs = flags(&c)
	fs.Parse([]string{"--config", file, "--max-in-flight", "-2"})
	_, err = Resolve(fs, Default())
	if want := `--max-in-flight: "-2" must be between 1 and 1048576`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestFlagErrorIsOneSentence(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream-ordering", "conection"}, `--upstream-ordering: "conection" must be none or connection`},
		{[]string{"--max-in-flight", "lots"}, `--max-in-flight: "lots" is not a whole number`},
		{[]string{"--dial-timeout", "5"}, `--dial-timeout: "5" is not a duration (like 500ms, 30s, 5m or 1h)`},
		{[]string{"--max-buffered-bytes", "1MB"}, `--max-buffered-bytes: "1MB" is ambiguous: write 1MiB (powers of 1024) or the number of bytes`},
	} {
		c := Default()
		err := FlagError(flags(&c).Parse(tc.args))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v:\n got %v\nwant %s", tc.args, err, tc.want)
		}
	}
	unknown := errors.New("unknown flag: --nope")
	if got := FlagError(unknown); got != unknown {
		t.Errorf("FlagError changed an unrelated error: %v", got)
	}
}

// TestYAMLSyntaxErrorLine checks that a syntax error names the line where
// the mistake is, not the line where the enclosing block starts.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		line string
	}{
		{"listen: 127.0.0.1:9092\nupstream:\n  - a:1\n - b:2\nmax-in-flight: 4\n", `:4 (" - b:2")`},
		{"listen: 127.0.0.1:9092\nupstream: a:1\n  max-in-flight: 4\n", `:3 ("  max-in-flight: 4")`},
		{"listen: 127.0.0.1:9092\n  upstream: a:1\nmax-in-flight: 4\n", `:2 ("  upstream: a:1")`},
		{"listen: 127.0.0.1:9092\nmax-in-flight: 4\n\tlog-level: debug\n", `:3 ("\tlog-level: debug")`},
	} {
		file := writeFile(t, tc.yaml)
		c := Default()
		fs := flags(&c)
		fs.Parse([]string{"--config", file})
		_, err := Resolve(fs, Default())
		if want := "config file " + file + tc.line + ": "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s...", tc.yaml, err, want)
		}
	}
}

func TestAPIVersionCap(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var c Config
	BindFlags(fs, &c)
	if err := fs.Parse([]string{"--api-version-cap", "fetch=15, Produce=9"}); err != nil {
		t.Fatal(err)
	}
	if len(c.APIVersionCap) != 2 || c.APIVersionCap[1] != 15 || c.APIVersionCap[0] != 9 {
		t.Fatalf("caps %v", c.APIVersionCap)
	}
	if got := c.APIVersionCap.String(); got != "Produce=9,Fetch=15" {
		t.Fatalf("String() = %q", got)
	}
	for _, bad := range []string{"Fetch", "Fetchh=15", "Fetch=-1", "Fetch=x"} {
		if err := fs.Set("api-version-cap", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestFileSetsCommandFlags checks that a key naming one of the command's
// own flags (not a Config field) is set from the file, that the command
// line still wins, and that a bad value names the file and the key.
func TestFileSetsCommandFlags(t *testing.T) {
	file := writeFile(t, "data-dir: /from/file\nbrokers: 5\nmax-in-flight: 7\n")
	c := Default()
	fs := flags(&c)
	dataDir := fs.String("data-dir", "default", "")
	brokers := fs.Int("brokers", 3, "")
	if err := fs.Parse([]string{"--config", file, "--brokers", "2"}); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	if *dataDir != "/from/file" || *brokers != 2 || got.MaxInFlight != 7 {
		t.Errorf("data-dir %q (want /from/file), brokers %d (want 2, the flag), max-in-flight %d (want 7)", *dataDir, *brokers, got.MaxInFlight)
	}

	file = writeFile(t, "brokers: many\n")
	c = Default()
	fs = flags(&c)
	fs.Int("brokers", 3, "")
	fs.Parse([]string{"--config", file})
	if _, err := Resolve(fs, Default()); err == nil || err.Error() != "config file "+file+`:1: brokers: "many" is not a whole number` {
		t.Errorf("bad command flag value in the file: %v", err)
	}

	file = writeFile(t, "config: other.yaml\n")
	c = Default()
	fs = flags(&c)
	fs.Parse([]string{"--config", file})
	if _, err := Resolve(fs, Default()); err == nil || !strings.Contains(err.Error(), `unknown key "config"`) {
		t.Errorf("a file naming another file: %v", err)
	}
}

// TestFileErrorsNameTheLine checks that every error about a key of the
// config file names the file and the key's line as path:line, the line
// of the item at fault in a list, and that an unknown key close to a
// known one says which.
func TestFileErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string // after "config file PATH"
	}{
		{"# limits\nlisten: 127.0.0.1:9092\nmax-in-flight: lots\n", `:3: max-in-flight: "lots" is not a whole number`},
		{"listen: 127.0.0.1:9092\nmax-in-flight: 0\n", `:2: max-in-flight: "0" must be between 1 and 1048576`},
		{"listen: 127.0.0.1:9092\nupstream:\n  - a:1\n  - [b, c]\n", `:4: upstream: list items must be plain values`},
		{"listen: 127.0.0.1:9092\nmax-inflight: 4\n", `:2: unknown key "max-inflight" (did you mean "max-in-flight"?)`},
		{"listen: 127.0.0.1:9092\n\nupstrem: [a:1]\n", `:3: unknown key "upstrem" (did you mean "upstream"?)`},
		{"listen: 127.0.0.1:9092\nbogus: 1\n", `:2: unknown key "bogus"`},
		{"upstream-ordering: sideways\nmax-in-flight: lots\n", `:1: upstream-ordering: "sideways" must be none or connection`}, // the first mistake in the file
	} {
		file := writeFile(t, tc.yaml)
		c := Default()
		fs := flags(&c)
		fs.Parse([]string{"--config", file})
		_, err := Resolve(fs, Default())
		if want := "config file " + file + tc.want; err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", tc.yaml, err, want)
		}
	}
}

// TestUnknownKeySuggestsOnlyWhatTheCommandTakes checks that a misspelt
// key is matched against the command's own flags too, and never against
// a setting the command refuses.
func TestUnknownKeySuggestsOnlyWhatTheCommandTakes(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"data-dri: /tmp/x\n", `:1: unknown key "data-dri" (did you mean "data-dir"?)`},
		{"upstrem: a:1\n", `:1: unknown key "upstrem"`},
	} {
		file := writeFile(t, tc.yaml)
		c := Default()
		fs := flags(&c)
		fs.String("data-dir", "", "")
		Refuse(fs, "is not used here", "upstream")
		fs.Parse([]string{"--config", file})
		_, err := Resolve(fs, Default())
		if want := "config file " + file + tc.want; err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", tc.yaml, err, want)
		}
	}
}
