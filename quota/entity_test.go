package quota

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const sampleList = `
- user: alice
  client-id: app
  producer_byte_rate: 1048576
- user: <default>
  consumer_byte_rate: 2097152
  request_percentage: 12.5
- user: bob
  max_connections: 10
- client-id: <default>
  producer_byte_rate: 500
- ip: 10.0.0.5
  connection_creation_rate: 3
- ip: <default>
  connection_creation_rate: 20
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(sampleList))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Entity: Entity{User: "alice", ClientID: "app"}, Limits: Limits{ProducerByteRate: 1 << 20}, Line: 2},
		{Entity: Entity{User: DefaultName}, Limits: Limits{ConsumerByteRate: 2 << 20, RequestPercentage: 12.5}, Line: 5},
		{Entity: Entity{User: "bob"}, Limits: Limits{MaxConnections: 10}, Line: 8},
		{Entity: Entity{ClientID: DefaultName}, Limits: Limits{ProducerByteRate: 500}, Line: 10},
		{IP: "10.0.0.5", Limits: Limits{ConnectionCreationRate: 3}, Line: 12},
		{IP: DefaultName, Limits: Limits{ConnectionCreationRate: 20}, Line: 14},
	}
	if !reflect.DeepEqual(c.Entries, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", c.Entries, want)
	}
	assertRoundTrip(t, c)
}

// TestRoundTripOddNames: names made only of line breaks, or with a tab
// before one, are written back so that they read back as themselves.
func TestRoundTripOddNames(t *testing.T) {
	for _, name := range []string{"\n", "\n\n", "\t\n", " \n", "a\tb", "\u0085", "\x00"} {
		c := &Config{Entries: []Entry{
			{Entity: Entity{User: name}, Limits: Limits{MaxConnections: 1}},
			{Entity: Entity{User: name, ClientID: name}, Limits: Limits{ProducerByteRate: 1}},
		}}
		assertRoundTrip(t, c)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "~\n", "[]\n"} {
		c, err := Parse([]byte(doc))
		if err != nil || !c.Empty() {
			t.Errorf("%q: %v, %v; want no quota", doc, c, err)
		}
	}
	var nilc *Config
	if !nilc.Empty() {
		t.Error("a nil Config is not empty")
	}
}

// TestParseErrors: every refusal names the line of the fault and says what
// is wrong, and wraps ErrInvalid.
func TestParseErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"user: alice\n", "line 1: expected a list"},
		{"- alice\n", "line 1: a quota entry must be a mapping"},
		{"- {}\n", "line 1: an empty quota entry"},
		{"- user: alice\n  producer_byte_rat: 5\n", `line 2: unknown key "producer_byte_rat"`},
		{"- user: alice\n  producer_byte_rate: 5\n  producer_byte_rate: 6\n", "line 3: producer_byte_rate given twice"},
		{"- user: alice\n  producer_byte_rate: 0\n", `line 2: producer_byte_rate "0" is not a positive whole number`},
		{"- user: alice\n  producer_byte_rate: -1\n", `line 2: producer_byte_rate "-1" is not`},
		{"- user: alice\n  producer_byte_rate: 1.5\n", `line 2: producer_byte_rate "1.5" is not`},
		{"- user: alice\n  producer_byte_rate: 1MiB\n", `line 2: producer_byte_rate "1MiB" is not`},
		{"- user: alice\n  request_percentage: 0\n", `line 2: request_percentage "0" is not a positive number`},
		{"- user: alice\n  request_percentage: NaN\n", `line 2: request_percentage "NaN" is not`},
		{"- user: alice\n  request_percentage: .inf\n", `line 2: request_percentage ".inf" is not`},
		{"- user: alice\n", "line 1: the entry for users/alice sets no quota"},
		{"- producer_byte_rate: 5\n", "line 1: an entry names its entity"},
		{"- user: ''\n  producer_byte_rate: 5\n", "line 1: user is empty"},
		{"- user: alice\n  ip: 1.2.3.4\n  producer_byte_rate: 5\n", "line 1: an entry names ip, or user and client-id, not both"},
		{"- ip: 1.2.3\n  connection_creation_rate: 5\n", `line 1: ip "1.2.3" is not an IP address`},
		{"- ip: 1.2.3.4\n  producer_byte_rate: 5\n", "line 2: producer_byte_rate applies to user and client-id entities"},
		{"- user: alice\n  connection_creation_rate: 5\n", "line 2: connection_creation_rate applies to ip entries only"},
		{"- client-id: app\n  max_connections: 5\n", "line 2: max_connections applies to entries naming a user and no client-id"},
		{"- user: a\n  client-id: b\n  max_connections: 5\n", "line 3: max_connections applies to entries naming a user"},
		{"- user: a\n  max_connections: 3000000000\n", "line 2: max_connections \"3000000000\" is too large"},
		{"- user: alice\n  controller_mutation_rate: 5\n", "line 2: controller_mutation_rate is the controller's quota"},
		{"- user: alice\n  producer_byte_rate: [1]\n", "line 2: producer_byte_rate needs a plain value"},
		{"- user: alice\n  producer_byte_rate:\n", "line 2: producer_byte_rate needs a plain value"},
		{"- user: alice\n  producer_byte_rate: 5\n- user: alice\n  consumer_byte_rate: 5\n", "line 3: a second entry for users/alice (the first is on line 1)"},
		{"- ip: ::ffff:1.2.3.4\n  connection_creation_rate: 5\n- ip: 1.2.3.4\n  connection_creation_rate: 6\n", "line 3: a second entry for ip 1.2.3.4"},
		{"- user: alice\n  producer_byte_rate: 5\n  [a]: 1\n", "line 3: a key must be a plain word"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if err == nil {
			t.Errorf("%q accepted", c.doc)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v; want %q wrapping ErrInvalid", c.doc, err, c.want)
		}
	}
}

// assertRoundTrip checks that c written back as YAML parses to c again.
func assertRoundTrip(t *testing.T, c *Config) {
	t.Helper()
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("written back %q: %v", out, err)
	}
	if len(back.Entries) != len(c.Entries) {
		t.Fatalf("round trip: %d entries, want %d", len(back.Entries), len(c.Entries))
	}
	for i := range c.Entries {
		a, b := c.Entries[i], back.Entries[i]
		a.Line, b.Line = 0, 0
		if a != b {
			t.Fatalf("round trip of %q: entry %d is %+v, want %+v", out, i, b, a)
		}
	}
}

// levels are Kafka's eight levels, most specific first, for a user u and
// a client id c.
func levels(u, c string) []Entity {
	return []Entity{
		{User: u, ClientID: c},
		{User: u, ClientID: DefaultName},
		{User: u},
		{User: DefaultName, ClientID: c},
		{User: DefaultName, ClientID: DefaultName},
		{User: DefaultName},
		{ClientID: c},
		{ClientID: DefaultName},
	}
}

// TestPrecedence configures every subset's most specific level for
// (alice, app) by removing levels from the top one at a time, and checks
// that the level in force is the most specific left, its bound applies,
// and the rate is keyed as Kafka's metric tags are (ClientQuotaManager's
// quotaMetricTags): by user and client id for levels 1, 2, 4 and 5, by
// user for 3 and 6, by client id for 7 and 8.
func TestPrecedence(t *testing.T) {
	all := levels("alice", "app")
	keys := []Entity{
		{User: "alice", ClientID: "app"}, {User: "alice", ClientID: "app"}, {User: "alice"},
		{User: "alice", ClientID: "app"}, {User: "alice", ClientID: "app"}, {User: "alice"},
		{ClientID: "app"}, {ClientID: "app"},
	}
	for top := range all {
		c := &Config{}
		for i, e := range all[top:] {
			c.Entries = append(c.Entries, Entry{Entity: e, Limits: Limits{ProducerByteRate: int64(100 * (top + i + 1))}})
		}
		r := NewResolver(c)
		got, ok := r.Resolve(Produce, "alice", "app")
		want := Resolution{Bound: float64(100 * (top + 1)), Configured: all[top], Key: keys[top]}
		if !ok || got != want {
			t.Errorf("levels %d..8: %+v, %v; want %+v", top+1, got, ok, want)
		}
		if _, ok := r.Resolve(Fetch, "alice", "app"); ok {
			t.Errorf("levels %d..8: a fetch quota resolved with none configured", top+1)
		}
	}
}

// TestPrecedenceOthers: entries for other users and client ids do not
// apply; a default applies to each user or client id on its own.
func TestPrecedenceOthers(t *testing.T) {
	c, err := Parse([]byte(`
- user: alice
  client-id: app
  producer_byte_rate: 1
- user: alice
  producer_byte_rate: 2
- user: <default>
  producer_byte_rate: 3
- client-id: app
  producer_byte_rate: 4
`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(c)
	cases := []struct {
		user, client string
		want         Resolution
	}{
		{"alice", "app", Resolution{1, Entity{"alice", "app"}, Entity{"alice", "app"}}},
		{"alice", "other", Resolution{2, Entity{User: "alice"}, Entity{User: "alice"}}},
		{"bob", "app", Resolution{3, Entity{User: DefaultName}, Entity{User: "bob"}}},
		{"carol", "x", Resolution{3, Entity{User: DefaultName}, Entity{User: "carol"}}},
	}
	for _, c := range cases {
		if got, ok := r.Resolve(Produce, c.user, c.client); !ok || got != c.want {
			t.Errorf("(%s, %s): %+v, %v; want %+v", c.user, c.client, got, ok, c.want)
		}
	}
	// Without the user default, client-id entities apply.
	c.Entries = c.Entries[:2]
	c.Entries = append(c.Entries, Entry{Entity: Entity{ClientID: "app"}, Limits: Limits{ProducerByteRate: 4}})
	r = NewResolver(c)
	if got, ok := r.Resolve(Produce, "bob", "app"); !ok || got.Bound != 4 || got.Key != (Entity{ClientID: "app"}) {
		t.Errorf("(bob, app): %+v, %v; want clients/app", got, ok)
	}
	if _, ok := r.Resolve(Produce, "bob", "other"); ok {
		t.Error("(bob, other): a quota applies with no entry for it")
	}
}

// TestEmptyClientID: Kafka keys a client with an empty client id by the
// level found, then looks the bound up for that key, which for a
// (user, client-id) level with no client id is users/<user> or
// users/<default>. A users/<user>/clients/<default> entry alone therefore
// sets no quota on a client that sends no client id, as in Kafka.
func TestEmptyClientID(t *testing.T) {
	r := NewResolver(&Config{Entries: []Entry{{Entity: Entity{User: "alice", ClientID: DefaultName}, Limits: Limits{ProducerByteRate: 7}}}})
	if got, ok := r.Resolve(Produce, "alice", ""); ok {
		t.Errorf("(alice, \"\"): %+v; Kafka applies no quota", got)
	}
	if got, ok := r.Resolve(Produce, "alice", "x"); !ok || got.Bound != 7 {
		t.Errorf("(alice, x): %+v, %v; want 7", got, ok)
	}
	// And clients/<default> does not apply to an empty client id either.
	r = NewResolver(&Config{Entries: []Entry{{Entity: Entity{ClientID: DefaultName}, Limits: Limits{ProducerByteRate: 7}}}})
	if got, ok := r.Resolve(Produce, "alice", ""); ok {
		t.Errorf("clients/<default> for an empty client id: %+v; Kafka applies no quota", got)
	}
}

// TestResolveCostIsConstant counts the map lookups of one resolution with
// 8 entries and with 100,000: the same, whatever the number of entries.
func TestResolveCostIsConstant(t *testing.T) {
	count := func(n int) int {
		c := &Config{}
		for i := range n {
			c.Entries = append(c.Entries, Entry{Entity: Entity{User: fmt.Sprint("u", i), ClientID: fmt.Sprint("c", i)}, Limits: Limits{ProducerByteRate: 1}})
		}
		c.Entries = append(c.Entries, Entry{Entity: Entity{ClientID: DefaultName}, Limits: Limits{ProducerByteRate: 1}})
		r := NewResolver(c)
		lookups := 0
		r.lookups = &lookups
		if _, ok := r.Resolve(Produce, "nobody", "nothing"); !ok {
			t.Fatal("clients/<default> did not apply")
		}
		return lookups
	}
	small, large := count(8), count(100_000)
	if small != large || small > 8 {
		t.Fatalf("lookups: %d with 8 entries, %d with 100000; want the same, at most 8", small, large)
	}
}

func TestConnectionEntries(t *testing.T) {
	c, err := Parse([]byte(sampleList))
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(c)
	if got := r.ConnectionRate(netip.MustParseAddr("10.0.0.5")); got != 3 {
		t.Errorf("10.0.0.5: %d, want 3", got)
	}
	if got := r.ConnectionRate(netip.MustParseAddr("::ffff:10.0.0.5")); got != 3 {
		t.Errorf("::ffff:10.0.0.5: %d, want 3 (the same address)", got)
	}
	if got := r.ConnectionRate(netip.MustParseAddr("10.0.0.6")); got != 20 {
		t.Errorf("10.0.0.6: %d, want the default 20", got)
	}
	if got := r.MaxConnections("bob"); got != 10 {
		t.Errorf("bob: %d, want 10", got)
	}
	if got := r.MaxConnections("alice"); got != 0 {
		t.Errorf("alice: %d, want no cap", got)
	}
}
