package acl

import "net/netip"

// Authorizer decides with a Set, the super users and the result when no
// binding names a resource. It is immutable: a reload builds a new one and
// swaps it in, so a new rule applies from the next decision on. A nil
// Authorizer allows everything: without an ACL file nothing is checked.
type Authorizer struct {
	set          *Set
	super        map[string]struct{}
	allowIfNoACL bool
}

// Options are an Authorizer's settings beside its bindings.
type Options struct {
	// SuperUsers is Kafka's super.users: principals separated by
	// semicolons, allowed everything. Empty: none.
	SuperUsers string
	// AllowIfNoACL is Kafka's allow.everyone.if.no.acl.found: a resource
	// that no binding's pattern matches, whatever its principal, host or
	// operation, is open to all. False (Kafka's default): it is closed.
	AllowIfNoACL bool
}

// New gives the Authorizer of a set and options. A nil set holds no
// bindings.
func New(set *Set, opts Options) (*Authorizer, error) {
	su, err := ParseSuperUsers(opts.SuperUsers)
	if err != nil {
		return nil, err
	}
	if set == nil {
		set = newSet(nil)
	}
	a := &Authorizer{set: set, super: make(map[string]struct{}, len(su)), allowIfNoACL: opts.AllowIfNoACL}
	for _, p := range su {
		a.super[p] = struct{}{}
	}
	return a, nil
}

// Set is the authorizer's bindings.
func (a *Authorizer) Set() *Set {
	if a == nil {
		return nil
	}
	return a.set
}

// Reason says what decided.
type Reason uint8

// The reasons, with the names Kafka's authorizer log gives them.
const (
	// NotChecked: no Authorizer, nothing is checked.
	NotChecked Reason = iota
	// SuperUser: the principal is a super user.
	SuperUser
	// MatchingACL: a binding decided; a DENY one if any matched.
	MatchingACL
	// DefaultAllow: no binding names the resource, and
	// allow.everyone.if.no.acl.found is set.
	DefaultAllow
	// DefaultDeny: no binding allows it.
	DefaultDeny
)

var reasonNames = [...]string{"NotChecked", "SuperUser", "MatchingAcl", "DefaultAllow", "DefaultDeny"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Unknown"
}

// Decision is one authorization's answer and why, for an audit log.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Binding is the binding that decided when Reason is MatchingACL.
	Binding *Binding
}

// Authorize reports whether principal ("User:alice"), connected from
// host, may perform op on the resource of type rt named name, with
// Kafka's rules: a super user may do anything; otherwise any DENY binding
// that matches denies, then any ALLOW binding that matches allows, else
// no. A binding matches when its pattern matches the name (a Literal name
// exactly, the Literal "*" every name, a Prefixed name every name it
// begins), its principal is the principal or User:*, its host is the
// client's address or "*", and its operation is op or All; an ALLOW of
// Read, Write, Delete or Alter also matches Describe, an ALLOW of
// AlterConfigs also DescribeConfigs, a DENY only what it names.
func (a *Authorizer) Authorize(principal string, host netip.Addr, op Operation, rt ResourceType, name string) bool {
	return a.decide(principal, host, op, rt, name, nil).Allowed
}

// Decide is Authorize with the reason and the binding that decided.
func (a *Authorizer) Decide(principal string, host netip.Addr, op Operation, rt ResourceType, name string) Decision {
	return a.decide(principal, host, op, rt, name, nil)
}

// work counts what a decision examined: index lookups and the rules
// behind them. Tests read it to hold a decision's cost to the bindings
// that can apply, whatever the set's size.
type work struct {
	lookups int
	rules   int
}

func (a *Authorizer) decide(principal string, host netip.Addr, op Operation, rt ResourceType, name string, w *work) Decision {
	if a == nil {
		return Decision{Allowed: true, Reason: NotChecked}
	}
	if _, ok := a.super[principal]; ok {
		return Decision{Allowed: true, Reason: SuperUser}
	}
	host = host.WithZone("").Unmap()
	m := matcher{s: a.set, principal: principal, host: host, op: op, w: w, allow: -1}
	if m.pattern(patternKey{rt, Literal, name}) {
		return m.denied()
	}
	if name != Wildcard && m.pattern(patternKey{rt, Literal, Wildcard}) {
		return m.denied()
	}
	if rt >= 0 && int(rt) < len(a.set.prefixLens) {
		for _, n := range a.set.prefixLens[rt] {
			if n > len(name) {
				break
			}
			if m.pattern(patternKey{rt, Prefixed, name[:n]}) {
				return m.denied()
			}
		}
	}
	switch {
	case m.allow >= 0:
		return Decision{Allowed: true, Reason: MatchingACL, Binding: &a.set.bindings[m.allow]}
	case a.allowIfNoACL && !m.named:
		return Decision{Allowed: true, Reason: DefaultAllow}
	default:
		return Decision{Reason: DefaultDeny}
	}
}

// matcher gathers one decision's matches over the patterns that apply.
type matcher struct {
	s         *Set
	principal string
	host      netip.Addr
	op        Operation
	w         *work
	named     bool  // some binding's pattern matches the resource
	allow     int32 // a matching ALLOW binding, or -1
	deny      int32 // the matching DENY binding once pattern returned true
}

// pattern examines the rules of one resource pattern under the principal
// and User:*; it reports whether a DENY matched.
func (m *matcher) pattern(pk patternKey) bool {
	if m.w != nil {
		m.w.lookups++
	}
	if _, ok := m.s.patterns[pk]; !ok {
		return false
	}
	m.named = true
	if m.entries(m.s.rules[ruleKey{pk, m.principal}]) {
		return true
	}
	if m.principal != WildcardPrincipal {
		return m.entries(m.s.rules[ruleKey{pk, WildcardPrincipal}])
	}
	return false
}

func (m *matcher) entries(rs []rule) bool {
	if m.w != nil {
		m.w.lookups++
		m.w.rules += len(rs)
	}
	for i := range rs {
		r := &rs[i]
		if !r.matchesHost(m.host) {
			continue
		}
		if r.perm == Deny {
			if r.op == All || r.op == m.op {
				m.deny = r.idx
				return true
			}
			continue
		}
		if m.allow < 0 && allows(r.op, m.op) {
			m.allow = r.idx
		}
	}
	return false
}

func (m *matcher) denied() Decision {
	return Decision{Reason: MatchingACL, Binding: &m.s.bindings[m.deny]}
}

// allows reports whether an ALLOW binding of operation bop grants op:
// itself, All, and the operations that imply Describe and
// DescribeConfigs.
func allows(bop, op Operation) bool {
	if bop == All || bop == op {
		return true
	}
	switch op {
	case Describe:
		return bop == Read || bop == Write || bop == Delete || bop == Alter
	case DescribeConfigs:
		return bop == AlterConfigs
	}
	return false
}

// hardcodedName is the resource name Kafka's authorizeByResourceType
// checks first, so that super users, wildcard bindings and
// allow.everyone.if.no.acl.found answer as they would for any name.
const hardcodedName = "hardcode"

// AuthorizeByResourceType reports whether principal may perform op on at
// least one resource of type rt, as Kafka's Authorizer interface defines
// it (authorizeByResourceType; InitProducerId without a transactional id
// asks it for Write on any topic): yes if it may on a resource named
// "hardcode"; otherwise, among the bindings of that type whose principal,
// host and operation (op itself or All, no implication) match, no if a
// DENY names the Literal "*", yes if an ALLOW names the Literal "*", yes
// if an ALLOW names a Literal name that no DENY names literally and that
// no DENY's Prefixed name begins, yes if an ALLOW names a Prefixed name
// that no DENY's Prefixed name begins; else no.
func (a *Authorizer) AuthorizeByResourceType(principal string, host netip.Addr, op Operation, rt ResourceType) bool {
	if a == nil || a.Authorize(principal, host, op, rt, hardcodedName) {
		return true
	}
	host = host.WithZone("").Unmap()
	var allowLit, allowPre []string
	denyLit := map[string]struct{}{}
	denyPre := map[string]struct{}{}
	wildAllow := false
	ps := []string{principal}
	if principal != WildcardPrincipal {
		ps = append(ps, WildcardPrincipal)
	}
	for _, p := range ps {
		for _, i := range a.set.byPrincipal[principalKey{rt, p}] {
			b := &a.set.bindings[i]
			if !hostMatches(b.Host, host) {
				continue
			}
			if b.Operation != op && b.Operation != All {
				continue
			}
			if b.Permission == Deny {
				if b.PatternType == Literal {
					if b.ResourceName == Wildcard {
						return false
					}
					denyLit[b.ResourceName] = struct{}{}
				} else {
					denyPre[b.ResourceName] = struct{}{}
				}
				continue
			}
			switch {
			case b.PatternType == Literal && b.ResourceName == Wildcard:
				wildAllow = true
			case b.PatternType == Literal:
				allowLit = append(allowLit, b.ResourceName)
			default:
				allowPre = append(allowPre, b.ResourceName)
			}
		}
	}
	if wildAllow {
		return true
	}
	dominated := func(name string) bool {
		for n := 1; n <= len(name); n++ {
			if _, ok := denyPre[name[:n]]; ok {
				return true
			}
		}
		return false
	}
	for _, n := range allowLit {
		if _, ok := denyLit[n]; !ok && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPre {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// IsSuperUser reports whether principal is one of the super users.
func (a *Authorizer) IsSuperUser(principal string) bool {
	if a == nil {
		return false
	}
	_, ok := a.super[principal]
	return ok
}
