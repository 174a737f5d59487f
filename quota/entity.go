package quota

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/inorder-proxy/inorder/internal/yamlout"
)

// DefaultName names a default entity, as Kafka writes it
// (/config/users/<default>): the quota every user, or every client id,
// without a more specific entry gets, each on its own.
const DefaultName = "<default>"

// Entity is a quota entity as Kafka names one: a user, a client id, or
// both. An empty field is not part of the entity; DefaultName stands for
// the default of its kind.
type Entity struct {
	User     string
	ClientID string
}

// String writes e as Kafka's configuration path does: users/alice/clients/app.
func (e Entity) String() string {
	switch {
	case e.User != "" && e.ClientID != "":
		return "users/" + e.User + "/clients/" + e.ClientID
	case e.User != "":
		return "users/" + e.User
	case e.ClientID != "":
		return "clients/" + e.ClientID
	}
	return ""
}

// Limits are the quotas of one entry. A zero field sets no quota.
type Limits struct {
	// ProducerByteRate bounds the bytes of Produce requests per second
	// (Kafka's producer_byte_rate).
	ProducerByteRate int64
	// ConsumerByteRate bounds the bytes of Fetch responses per second
	// (consumer_byte_rate).
	ConsumerByteRate int64
	// RequestPercentage bounds the proxy's own time spent on a client's
	// requests, as a percentage of one core over the window
	// (request_percentage; see the package comment for what the proxy
	// counts).
	RequestPercentage float64
	// MaxConnections bounds the connections open at once by one user;
	// only an entry naming a user and no client id takes it.
	MaxConnections int
	// ConnectionCreationRate bounds the connections accepted per second
	// from one IP address; only an ip entry takes it, as in Kafka.
	ConnectionCreationRate int
}

// Entry is one item of the quotas list: a user and client-id entity, or
// an IP address, and its limits. Line is where it starts in the file.
type Entry struct {
	Entity Entity
	// IP is the address of an ip entry ("" for a user or client-id entry),
	// or DefaultName for the default of every address.
	IP     string
	Limits Limits
	Line   int
}

// Config is the parsed quotas list. The zero Config, like a nil one,
// sets no quota.
type Config struct {
	Entries []Entry
}

// Empty reports whether c sets no quota at all.
func (c *Config) Empty() bool { return c == nil || len(c.Entries) == 0 }

// ParseError says which line of the quotas list is wrong and why.
type ParseError struct {
	Line   int
	Reason string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return e.Reason
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *ParseError) Unwrap() error { return ErrInvalid }

func bad(n *yaml.Node, format string, args ...any) error {
	return &ParseError{Line: n.Line, Reason: fmt.Sprintf(format, args...)}
}

// The keys of an entry: the entity's and Kafka's quota keys.
const (
	keyUser                   = "user"
	keyClientID               = "client-id"
	keyIP                     = "ip"
	keyProducerByteRate       = "producer_byte_rate"
	keyConsumerByteRate       = "consumer_byte_rate"
	keyRequestPercentage      = "request_percentage"
	keyConnectionCreationRate = "connection_creation_rate"
	keyMaxConnections         = "max_connections"
)

// Kafka keys the proxy knows and does not enforce, with the reason.
var unsupported = map[string]string{
	"controller_mutation_rate": "is the controller's quota on topic and partition creations and deletions; the proxy does not enforce it (set it on the cluster)",
}

var entryKeys = []string{keyUser, keyClientID, keyIP, keyProducerByteRate, keyConsumerByteRate, keyRequestPercentage, keyConnectionCreationRate, keyMaxConnections}

// Parse reads a YAML document whose root is the quotas list.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ParseError{Reason: err.Error()}
	}
	if doc.Kind == 0 {
		return &Config{}, nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, bad(&doc, "expected a list of quota entries")
	}
	return ParseNode(doc.Content[0])
}

// ParseNode reads the quotas list from the value node of the `quotas:`
// key: a list of mappings, each naming an entity with user and client-id
// (either or both) or ip, and one or more of Kafka's quota keys. It is
// strict: an unknown or repeated key, a value that is not a positive
// whole number (a positive number for request_percentage), a key the
// entity cannot take, or a second entry for one entity is an error that
// names the line.
func ParseNode(n *yaml.Node) (*Config, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return &Config{}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, bad(n, "expected a list of quota entries, each a mapping like {user: alice, producer_byte_rate: 1048576}")
	}
	c := &Config{Entries: make([]Entry, 0, len(n.Content))}
	seen := map[Entity]int{}
	seenIP := map[string]int{}
	for _, item := range n.Content {
		e, err := parseEntry(item)
		if err != nil {
			return nil, err
		}
		if e.IP != "" {
			if l, dup := seenIP[e.IP]; dup {
				return nil, bad(item, "a second entry for ip %s (the first is on line %d)", e.IP, l)
			}
			seenIP[e.IP] = e.Line
		} else {
			if l, dup := seen[e.Entity]; dup {
				return nil, bad(item, "a second entry for %s (the first is on line %d)", e.Entity, l)
			}
			seen[e.Entity] = e.Line
		}
		c.Entries = append(c.Entries, e)
	}
	return c, nil
}

func parseEntry(item *yaml.Node) (Entry, error) {
	e := Entry{Line: item.Line}
	if item.Kind != yaml.MappingNode {
		return e, bad(item, "a quota entry must be a mapping like {user: alice, producer_byte_rate: 1048576}")
	}
	if len(item.Content) == 0 {
		return e, bad(item, "an empty quota entry: name user, client-id or ip, and a quota")
	}
	keys := map[string]*yaml.Node{}
	for i := 0; i+1 < len(item.Content); i += 2 {
		k, v := item.Content[i], item.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return e, bad(k, "a key must be a plain word")
		}
		if why, ok := unsupported[k.Value]; ok {
			return e, bad(k, "%s %s", k.Value, why)
		}
		if !isEntryKey(k.Value) {
			return e, bad(k, "unknown key %q (known: %s)", k.Value, strings.Join(entryKeys, ", "))
		}
		if _, dup := keys[k.Value]; dup {
			return e, bad(k, "%s given twice in one entry", k.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return e, bad(v, "%s needs a plain value", k.Value)
		}
		keys[k.Value] = v
	}
	name := func(key string) (string, error) {
		v, ok := keys[key]
		if !ok {
			return "", nil
		}
		if v.Value == "" {
			return "", bad(v, "%s is empty: name one, or write %s for the default", key, DefaultName)
		}
		return v.Value, nil
	}
	var err error
	if e.Entity.User, err = name(keyUser); err != nil {
		return e, err
	}
	if e.Entity.ClientID, err = name(keyClientID); err != nil {
		return e, err
	}
	if e.IP, err = name(keyIP); err != nil {
		return e, err
	}
	switch {
	case e.IP != "" && (e.Entity.User != "" || e.Entity.ClientID != ""):
		return e, bad(item, "an entry names ip, or user and client-id, not both (Kafka's ip entities stand alone)")
	case e.IP == "" && e.Entity.User == "" && e.Entity.ClientID == "":
		return e, bad(item, "an entry names its entity: user, client-id (either or both) or ip")
	case e.IP != "" && e.IP != DefaultName:
		a, perr := netip.ParseAddr(e.IP)
		if perr != nil || a.Zone() != "" {
			return e, bad(keys[keyIP], "ip %q is not an IP address (or %s)", e.IP, DefaultName)
		}
		e.IP = a.Unmap().String()
	}
	quotas := 0
	for _, k := range []string{keyProducerByteRate, keyConsumerByteRate, keyRequestPercentage, keyConnectionCreationRate, keyMaxConnections} {
		v, ok := keys[k]
		if !ok {
			continue
		}
		quotas++
		if err := e.setLimit(k, v); err != nil {
			return e, err
		}
	}
	if quotas == 0 {
		return e, bad(item, "the entry for %s sets no quota (%s)", e.name(), strings.Join(entryKeys[3:], ", "))
	}
	return e, nil
}

func (e *Entry) name() string {
	if e.IP != "" {
		return "ip " + e.IP
	}
	return e.Entity.String()
}

func isEntryKey(k string) bool {
	for _, x := range entryKeys {
		if k == x {
			return true
		}
	}
	return false
}

// setLimit sets the quota k from v, checking that the entry's kind of
// entity takes it.
func (e *Entry) setLimit(k string, v *yaml.Node) error {
	switch k {
	case keyConnectionCreationRate:
		if e.IP == "" {
			return bad(v, "%s applies to ip entries only, as in Kafka (the rate of new connections from one address)", k)
		}
	case keyMaxConnections:
		if e.IP != "" || e.Entity.User == "" || e.Entity.ClientID != "" {
			return bad(v, "%s applies to entries naming a user and no client-id: a connection's user is known once it authenticates, its client id only with each request", k)
		}
	default:
		if e.IP != "" {
			return bad(v, "%s applies to user and client-id entities; an ip entry takes %s only", k, keyConnectionCreationRate)
		}
	}
	if k == keyRequestPercentage {
		f, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return bad(v, "%s %q is not a positive number (a percentage of one core; 100 is one whole core)", k, v.Value)
		}
		e.Limits.RequestPercentage = f
		return nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil || n < 1 {
		return bad(v, "%s %q is not a positive whole number", k, v.Value)
	}
	switch k {
	case keyProducerByteRate:
		e.Limits.ProducerByteRate = n
	case keyConsumerByteRate:
		e.Limits.ConsumerByteRate = n
	case keyConnectionCreationRate, keyMaxConnections:
		if n > math.MaxInt32 {
			return bad(v, "%s %q is too large (at most %d)", k, v.Value, math.MaxInt32)
		}
		if k == keyMaxConnections {
			e.Limits.MaxConnections = int(n)
		} else {
			e.Limits.ConnectionCreationRate = int(n)
		}
	}
	return nil
}

// MarshalYAML writes c as the quotas list ParseNode reads, so that a
// parsed list written back parses to the same Config.
func (c *Config) MarshalYAML() (any, error) {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	if c == nil {
		return seq, nil
	}
	str := yamlout.Str
	for _, e := range c.Entries {
		m := &yaml.Node{Kind: yaml.MappingNode}
		add := func(k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }
		num := func(k, s string) { add(k, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s}) }
		if e.IP != "" {
			add(keyIP, str(e.IP))
		}
		if e.Entity.User != "" {
			add(keyUser, str(e.Entity.User))
		}
		if e.Entity.ClientID != "" {
			add(keyClientID, str(e.Entity.ClientID))
		}
		l := e.Limits
		if l.ProducerByteRate > 0 {
			num(keyProducerByteRate, strconv.FormatInt(l.ProducerByteRate, 10))
		}
		if l.ConsumerByteRate > 0 {
			num(keyConsumerByteRate, strconv.FormatInt(l.ConsumerByteRate, 10))
		}
		if l.RequestPercentage > 0 {
			add(keyRequestPercentage, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(l.RequestPercentage, 'g', -1, 64)})
		}
		if l.ConnectionCreationRate > 0 {
			num(keyConnectionCreationRate, strconv.Itoa(l.ConnectionCreationRate))
		}
		if l.MaxConnections > 0 {
			num(keyMaxConnections, strconv.Itoa(l.MaxConnections))
		}
		seq.Content = append(seq.Content, m)
	}
	return seq, nil
}

// String writes c on one line, entries in file order, for logs and for
// comparing two configurations.
func (c *Config) String() string {
	if c.Empty() {
		return ""
	}
	parts := make([]string, 0, len(c.Entries))
	for _, e := range c.Entries {
		l := e.Limits
		var q []string
		for _, kv := range []struct {
			k string
			v int64
		}{
			{keyProducerByteRate, l.ProducerByteRate},
			{keyConsumerByteRate, l.ConsumerByteRate},
			{keyConnectionCreationRate, int64(l.ConnectionCreationRate)},
			{keyMaxConnections, int64(l.MaxConnections)},
		} {
			if kv.v > 0 {
				q = append(q, kv.k+"="+strconv.FormatInt(kv.v, 10))
			}
		}
		if l.RequestPercentage > 0 {
			q = append(q, keyRequestPercentage+"="+strconv.FormatFloat(l.RequestPercentage, 'g', -1, 64))
		}
		parts = append(parts, e.name()+" "+strings.Join(q, " "))
	}
	return strings.Join(parts, "; ")
}

// Kind is a client quota the Resolver and Manager keep apart, as Kafka
// keeps one quota manager per kind.
type Kind uint8

const (
	// Produce is producer_byte_rate: the bytes of Produce requests.
	Produce Kind = iota
	// Fetch is consumer_byte_rate: the bytes of Fetch responses.
	Fetch
	// Request is request_percentage: the proxy's time on the requests.
	Request
	kinds
)

// String returns Kafka's key for k.
func (k Kind) String() string {
	switch k {
	case Produce:
		return keyProducerByteRate
	case Fetch:
		return keyConsumerByteRate
	case Request:
		return keyRequestPercentage
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (l *Limits) of(k Kind) float64 {
	switch k {
	case Produce:
		return float64(l.ProducerByteRate)
	case Fetch:
		return float64(l.ConsumerByteRate)
	case Request:
		return l.RequestPercentage
	}
	return 0
}

// Resolver finds the quota of a (user, client id) pair by Kafka's
// precedence, with a fixed number of map lookups however many entries
// there are. It is immutable and safe for concurrent use.
type Resolver struct {
	// byKind holds, per kind, the bound of each entity that sets one.
	byKind [kinds]map[Entity]float64
	// maxConns holds the max_connections of user entities.
	maxConns map[string]int
	// ipRate holds the connection_creation_rate of ip entries.
	ipRate map[string]int
	// lookups counts map lookups, for the test that lookups do not grow
	// with the number of entries; nil outside that test.
	lookups *int
}

// NewResolver indexes c. A nil or empty c resolves no quota.
func NewResolver(c *Config) *Resolver {
	r := &Resolver{maxConns: map[string]int{}, ipRate: map[string]int{}}
	for k := range r.byKind {
		r.byKind[k] = map[Entity]float64{}
	}
	if c == nil {
		return r
	}
	for _, e := range c.Entries {
		if e.IP != "" {
			r.ipRate[e.IP] = e.Limits.ConnectionCreationRate
			continue
		}
		for k := Kind(0); k < kinds; k++ {
			if b := e.Limits.of(k); b > 0 {
				r.byKind[k][e.Entity] = b
			}
		}
		if e.Limits.MaxConnections > 0 {
			r.maxConns[e.Entity.User] = e.Limits.MaxConnections
		}
	}
	return r
}

// Has reports whether any entry sets a quota of kind k.
func (r *Resolver) Has(k Kind) bool { return r != nil && len(r.byKind[k]) > 0 }

func (r *Resolver) has(k Kind, e Entity) (float64, bool) {
	if r.lookups != nil {
		*r.lookups++
	}
	b, ok := r.byKind[k][e]
	return b, ok
}

// Resolution is the quota in force for a client: the bound, the
// configured entity that set it (a bounded set of values, for metric
// labels), and Key, the entity whose clients share one measured rate.
// Key holds the client's own user and client id, as Kafka's metric tags
// do: a default entity's quota applies to each user (or client id) on
// its own.
type Resolution struct {
	Bound      float64
	Configured Entity
	Key        Entity
}

// Resolve returns the quota of kind k for a client authenticated as user
// (Kafka's ANONYMOUS when the proxy does not authenticate) sending
// clientID, and false when no entry applies. It follows Kafka's two steps
// (ClientQuotaManager's DefaultQuotaCallback): the most specific level
// present in the eight-level order picks which of the user and client id
// key the shared rate; the bound is then looked up for that key. The two
// agree whenever user and client id are not empty; with an empty client
// id, a (user, client-id) level keys the rate by user alone and the
// bound comes from users/<user> or users/<default>, as in Kafka.
func (r *Resolver) Resolve(k Kind, user, clientID string) (Resolution, bool) {
	if !r.Has(k) {
		return Resolution{}, false
	}
	key := r.key(k, user, clientID)
	return r.bound(k, key)
}

// key is Kafka's quotaMetricTags: which of user and clientID key the
// rate, from the most specific level that has an entry.
func (r *Resolver) key(k Kind, user, clientID string) Entity {
	both := Entity{User: user, ClientID: clientID}
	userOnly := Entity{User: user}
	levels := [...]struct {
		e   Entity
		key Entity
	}{
		{Entity{User: user, ClientID: clientID}, both},           // users/<user>/clients/<client-id>
		{Entity{User: user, ClientID: DefaultName}, both},        // users/<user>/clients/<default>
		{Entity{User: user}, userOnly},                           // users/<user>
		{Entity{User: DefaultName, ClientID: clientID}, both},    // users/<default>/clients/<client-id>
		{Entity{User: DefaultName, ClientID: DefaultName}, both}, // users/<default>/clients/<default>
		{Entity{User: DefaultName}, userOnly},                    // users/<default>
	}
	for _, l := range levels {
		if _, ok := r.has(k, l.e); ok {
			return l.key
		}
	}
	// clients/<client-id>, clients/<default>
	return Entity{ClientID: clientID}
}

// bound is Kafka's quotaLimit for the rate's key.
func (r *Resolver) bound(k Kind, key Entity) (Resolution, bool) {
	try := func(e Entity) (Resolution, bool) {
		if b, ok := r.has(k, e); ok {
			return Resolution{Bound: b, Configured: e, Key: key}, true
		}
		return Resolution{}, false
	}
	var order [4]Entity
	n := 0
	switch {
	case key.User != "" && key.ClientID != "":
		order = [4]Entity{
			key,
			{User: key.User, ClientID: DefaultName},
			{User: DefaultName, ClientID: key.ClientID},
			{User: DefaultName, ClientID: DefaultName},
		}
		n = 4
	case key.User != "":
		order[0], order[1], n = Entity{User: key.User}, Entity{User: DefaultName}, 2
	case key.ClientID != "":
		order[0], order[1], n = Entity{ClientID: key.ClientID}, Entity{ClientID: DefaultName}, 2
	}
	for _, e := range order[:n] {
		if res, ok := try(e); ok {
			return res, true
		}
	}
	return Resolution{}, false
}

// MaxConnections returns the cap on user's open connections:
// users/<user>'s max_connections, else users/<default>'s, else 0 (none).
func (r *Resolver) MaxConnections(user string) int {
	if r == nil {
		return 0
	}
	if n, ok := r.maxConns[user]; ok {
		return n
	}
	return r.maxConns[DefaultName]
}

// ConnectionRate returns the connection_creation_rate for ip: its own
// entry's, else the <default> entry's, else 0 (none).
func (r *Resolver) ConnectionRate(ip netip.Addr) int {
	if r == nil || len(r.ipRate) == 0 {
		return 0
	}
	if n, ok := r.ipRate[ip.Unmap().String()]; ok {
		return n
	}
	return r.ipRate[DefaultName]
}

// ownConnectionRate reports whether ip has an entry of its own.
func (r *Resolver) ownConnectionRate(ip netip.Addr) bool {
	_, ok := r.ipRate[ip.Unmap().String()]
	return ok
}

// Entities returns the configured entities of kind k, sorted, for a
// metrics exporter to know every label value in advance.
func (r *Resolver) Entities(k Kind) []Entity {
	out := make([]Entity, 0, len(r.byKind[k]))
	for e := range r.byKind[k] {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].ClientID < out[j].ClientID
	})
	return out
}
