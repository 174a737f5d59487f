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
	for in, want := range map[string]int64{"10": 10, "1KiB": 1024, "100MiB": 100 << 20, "2GB": 2 << 30, " 5 MiB ": 5 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1TiB", "x"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
