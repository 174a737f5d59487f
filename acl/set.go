package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalid is wrapped by every refusal of a binding, a super user or a
// filter; its message names the field and the value.
var ErrInvalid = errors.New("invalid ACL")

// FieldError is a refusal of one field of a binding, named as the ACL
// file names it (principal, host, resourceType, ...).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.Field + " " + e.Msg }

// Unwrap makes every FieldError an ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Set is an immutable set of bindings, indexed so that a decision looks
// only at the bindings whose resource pattern and principal can apply to
// it: the Literal name itself, the Literal "*", each Prefixed name that
// begins it (one map lookup per distinct prefix length, at most the
// name's length), each under the principal and User:*. However many
// bindings name other resources or other principals, a decision never
// examines them. A reload builds a new Set; a decision in flight keeps the
// one it started with.
type Set struct {
	bindings []Binding
	rules    map[ruleKey][]rule
	// patterns holds every resource pattern that some binding names,
	// whoever its principal: with allow.everyone.if.no.acl.found, a
	// resource no pattern matches is open to all.
	patterns map[patternKey]struct{}
	// prefixLens holds, per resource type, the distinct lengths of its
	// Prefixed names in ascending order.
	prefixLens [User + 1][]int
	// byPrincipal lists, per resource type and principal, the indexes of
	// its bindings, for the checks over every resource of a type.
	byPrincipal map[principalKey][]int
}

type patternKey struct {
	rt   ResourceType
	pt   PatternType
	name string
}

type ruleKey struct {
	patternKey
	principal string
}

type principalKey struct {
	rt        ResourceType
	principal string
}

// rule is a binding as a decision reads it: the host parsed, and the
// binding it came from.
type rule struct {
	anyHost bool
	host    netip.Addr
	op      Operation
	perm    Permission
	idx     int32
}

// matchesHost reports whether a rule applies to a client at h: its host
// is "*", or an address equal to h. A client whose address is unknown
// matches only "*".
func (r *rule) matchesHost(h netip.Addr) bool {
	return r.anyHost || (r.host.IsValid() && r.host == h)
}

// hostMatches is matchesHost for a binding's host as written.
func hostMatches(bindingHost string, h netip.Addr) bool {
	r := rule{anyHost: bindingHost == Wildcard, host: parseHost(bindingHost)}
	return r.matchesHost(h)
}

// NewSet checks every binding as Kafka does when it creates ACLs, and as
// kafka-acls does (the operations a resource type supports, a host that
// is an address), and indexes them. A binding given twice is kept once.
func NewSet(bindings []Binding) (*Set, error) {
	for i := range bindings {
		if err := bindings[i].Validate(); err != nil {
			return nil, err
		}
	}
	return newSet(bindings), nil
}

// newSet indexes bindings that are valid.
func newSet(bindings []Binding) *Set {
	s := &Set{
		rules:       make(map[ruleKey][]rule),
		patterns:    make(map[patternKey]struct{}),
		byPrincipal: make(map[principalKey][]int),
	}
	seen := make(map[Binding]struct{}, len(bindings))
	type lenKey struct {
		rt ResourceType
		n  int
	}
	lens := make(map[lenKey]struct{})
	for _, b := range bindings {
		b.Host = strings.TrimSpace(b.Host)
		if _, dup := seen[b]; dup {
			continue
		}
		seen[b] = struct{}{}
		idx := len(s.bindings)
		s.bindings = append(s.bindings, b)
		pk := patternKey{b.ResourceType, b.PatternType, b.ResourceName}
		s.patterns[pk] = struct{}{}
		r := rule{anyHost: b.Host == Wildcard, op: b.Operation, perm: b.Permission, idx: int32(idx)}
		if !r.anyHost {
			r.host = parseHost(b.Host)
		}
		rk := ruleKey{pk, b.Principal}
		s.rules[rk] = append(s.rules[rk], r)
		if b.PatternType == Prefixed {
			lk := lenKey{b.ResourceType, len(b.ResourceName)}
			if _, ok := lens[lk]; !ok {
				lens[lk] = struct{}{}
				s.prefixLens[b.ResourceType] = insertSorted(s.prefixLens[b.ResourceType], len(b.ResourceName))
			}
		}
		prk := principalKey{b.ResourceType, b.Principal}
		s.byPrincipal[prk] = append(s.byPrincipal[prk], idx)
	}
	return s
}

func insertSorted(s []int, v int) []int {
	i := 0
	for i < len(s) && s[i] < v {
		i++
	}
	s = append(s, 0)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// parseHost reads a binding's host address; the zero Addr, which matches
// no client, for one that is not an address.
func parseHost(h string) netip.Addr {
	a, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// Bindings gives the set's bindings in the order they were given, each
// once.
func (s *Set) Bindings() []Binding {
	if s == nil {
		return nil
	}
	return append([]Binding(nil), s.bindings...)
}

// Len is the number of distinct bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.bindings)
}

// Validate checks a binding as Kafka's controller does before it stores
// one (a concrete resource type, pattern type, operation and permission, a
// resource name, kafka-cluster as the cluster's only name, a principal of
// the form Type:name) and as kafka-acls does (the operations the resource
// type supports). A host must be "*" or an IP address: Kafka compares it
// with the client's address, so a host name would never match.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < Topic || b.ResourceType > User:
		return invalid("resourceType", "%s: must be one of TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER", b.ResourceType)
	case b.PatternType != Literal && b.PatternType != Prefixed:
		return invalid("patternType", "%s: must be LITERAL or PREFIXED", b.PatternType)
	case b.Operation < All || b.Operation > TwoPhaseCommit:
		return invalid("operation", "%s: not an operation a binding can name", b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return invalid("permissionType", "%s: must be ALLOW or DENY", b.Permission)
	case b.ResourceName == "":
		return invalid("resourceName", "must not be empty")
	case b.ResourceType == Cluster && (b.ResourceName != ClusterName || b.PatternType != Literal):
		return invalid("resourceName", "%q: the only name of the CLUSTER resource is the LITERAL %s", b.ResourceName, ClusterName)
	case !Supported(b.ResourceType, b.Operation):
		return invalid("operation", "%s: resourceType %s supports only All, %s", b.Operation, b.ResourceType, opList(supported[b.ResourceType]))
	}
	if err := CheckPrincipal(b.Principal); err != nil {
		return err
	}
	if h := strings.TrimSpace(b.Host); h != Wildcard {
		if _, err := netip.ParseAddr(h); err != nil {
			return invalid("host", "%q: must be * or an IP address (Kafka compares it with the client's address)", b.Host)
		}
	}
	return nil
}

func opList(ops []Operation) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.String()
	}
	return strings.Join(s, ", ")
}

// CheckPrincipal checks a principal is written as Kafka parses one:
// Type:name, both parts non-empty, split at the first colon.
func CheckPrincipal(p string) error {
	t, n, ok := strings.Cut(p, ":")
	if !ok || t == "" || n == "" {
		return invalid("principal", "%q: expected Type:name, e.g. User:alice or User:*", p)
	}
	return nil
}

// ParseSuperUsers reads Kafka's super.users: principals separated by
// semicolons, each trimmed, empty ones skipped.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(s, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if err := CheckPrincipal(v); err != nil {
			return nil, fmt.Errorf("super users: %w", err)
		}
		out = append(out, v)
	}
	return out, nil
}
