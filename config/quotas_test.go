package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inorder-proxy/inorder/quota"
)

func resolveFile(t *testing.T, yaml string, args ...string) (Config, string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	fs := flags(&c)
	if err := fs.Parse(append([]string{"--config", file}, args...)); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	return got, file, err
}

func TestQuotasFromFile(t *testing.T) {
	got, _, err := resolveFile(t, `listen: 127.0.0.1:7000
quotas:
  - user: alice
    producer_byte_rate: 1048576
  - client-id: <default>
    consumer_byte_rate: 2048
max-connections-per-ip: 50
max-connections-per-ip-overrides: [10.0.0.1=5, "::1=0"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Quotas == nil || len(got.Quotas.Entries) != 2 || got.Quotas.Entries[0].Limits.ProducerByteRate != 1<<20 ||
		got.Quotas.Entries[1].Entity != (quota.Entity{ClientID: quota.DefaultName}) {
		t.Fatalf("quotas %v", got.Quotas)
	}
	l := got.ConnLimits()
	if l.PerIP != 50 || l.PerIPOverrides[netip.MustParseAddr("10.0.0.1")] != 5 || l.PerIPOverrides[netip.MustParseAddr("::1")] != 0 || len(l.PerIPOverrides) != 2 {
		t.Fatalf("connection limits %+v", l)
	}
	if got.Listen != "127.0.0.1:7000" {
		t.Fatalf("the keys after quotas were lost: listen %q", got.Listen)
	}
	// No quotas key, or an empty list: none.
	for _, doc := range []string{"listen: 127.0.0.1:7000\n", "quotas: []\n", "quotas:\n"} {
		if got, _, err := resolveFile(t, doc); err != nil || got.Quotas != nil {
			t.Errorf("%q: %v, %v; want no quotas", doc, got.Quotas, err)
		}
	}
}

// TestQuotasErrors: a fault in the list names the file and the line of the
// fault, not of the key.
func TestQuotasErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"listen: 127.0.0.1:7000\nquotas:\n  - user: alice\n    producer_byte_rate: 0\n", `:4: quotas: producer_byte_rate "0" is not a positive whole number`},
		{"quotas: 5\n", ":1: quotas: expected a list of quota entries"},
		{"quotas:\n  - user: a\n    producer_bytes_rate: 1\n", `:3: quotas: unknown key "producer_bytes_rate"`},
		{"quota:\n  - user: a\n", `:1: unknown key "quota" (did you mean "quotas"?)`},
	}
	for _, c := range cases {
		_, file, err := resolveFile(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), "config file "+file+c.want) {
			t.Errorf("%q: %v; want %q", c.doc, err, c.want)
		}
		if err != nil && !strings.Contains(c.want, "unknown key") && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v does not wrap ErrInvalid", c.doc, err)
		}
	}
}

func TestMaxConnectionsPerIPFlags(t *testing.T) {
	c := Default()
	fs := flags(&c)
	if err := fs.Parse([]string{"--max-connections-per-ip", "3", "--max-connections-per-ip-overrides", "192.0.2.1=1,::ffff:192.0.2.2=7"}); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxConnectionsPerIP != 3 || got.MaxConnectionsPerIPOverrides.String() != "192.0.2.1=1,192.0.2.2=7" {
		t.Fatalf("got %d, %v", got.MaxConnectionsPerIP, got.MaxConnectionsPerIPOverrides)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--max-connections-per-ip", "-1"}},
		{[]string{"--max-connections-per-ip-overrides", "host.example=1"}},
		{[]string{"--max-connections-per-ip-overrides", "10.0.0.1"}},
		{[]string{"--max-connections-per-ip-overrides", "10.0.0.1=-2"}},
		{[]string{"--max-connections-per-ip-overrides", "10.0.0.1=1,10.0.0.1=2"}},
	} {
		c := Default()
		fs := flags(&c)
		err := fs.Parse(tc.args)
		if err == nil {
			_, err = Resolve(fs, Default())
		}
		if err == nil {
			t.Errorf("%v accepted", tc.args)
		}
	}
}

// TestQuotasChanged: a reload sees a change to the quotas list, Keep keeps
// the running one, Get shows it.
func TestQuotasChanged(t *testing.T) {
	a, b := Default(), Default()
	q, err := quota.Parse([]byte("- user: a\n  producer_byte_rate: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	b.Quotas = q
	if got := Changed(a, b); !slices.Equal(got, []string{KeyQuotas}) {
		t.Fatalf("Changed = %v, want [quotas]", got)
	}
	if v, ok := Get(b, KeyQuotas); !ok || v != "users/a producer_byte_rate=1" {
		t.Fatalf("Get(quotas) = %q, %v", v, ok)
	}
	if err := Keep(&b, a, []string{KeyQuotas}); err != nil || b.Quotas != nil {
		t.Fatalf("Keep: %v, %v", b.Quotas, err)
	}
}
