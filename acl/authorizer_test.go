package acl

import (
	"fmt"
	"net/netip"
	"testing"
)

var (
	anyHost = netip.MustParseAddr("10.0.0.9")
	host1   = netip.MustParseAddr("192.168.1.1")
	host2   = netip.MustParseAddr("192.168.1.2")
)

// b builds a binding for a test: the host defaults to "*".
func b(rt ResourceType, name string, pt PatternType, principal string, op Operation, perm Permission, host ...string) Binding {
	h := Wildcard
	if len(host) > 0 {
		h = host[0]
	}
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: h, Operation: op, Permission: perm}
}

// authz builds an Authorizer over bindings that are not validated, as
// Kafka's authorizer stores what its controller accepted (some of Kafka's
// own cases name operations kafka-acls refuses, Write on a group).
func authz(t testing.TB, opts Options, bs ...Binding) *Authorizer {
	t.Helper()
	a, err := New(newSet(bs), opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type query struct {
	principal string
	host      netip.Addr
	op        Operation
	rt        ResourceType
	name      string
	want      bool
}

func q(principal string, op Operation, rt ResourceType, name string, want bool) query {
	return query{principal: principal, host: anyHost, op: op, rt: rt, name: name, want: want}
}

func (c query) at(h netip.Addr) query { c.host = h; return c }

func check(t *testing.T, a *Authorizer, qs ...query) {
	t.Helper()
	for _, c := range qs {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s from %s: %s on %s %q: got %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
		if got := reference(a, c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("reference: %s from %s: %s on %s %q: got %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
}

// The cases below re-express the behaviours Kafka's StandardAuthorizer
// tests hold its authorizer to.

func TestImplicationIsForAllowOnly(t *testing.T) {
	for _, op := range []Operation{Describe, Read, Write, Delete, Alter} {
		a := authz(t, Options{}, b(Topic, "foo_", Prefixed, "User:bob", op, Allow))
		check(t, a, q("User:bob", Describe, Topic, "foo_bar", true))
	}
	for _, op := range []Operation{Create, ClusterAction, IdempotentWrite, DescribeConfigs, AlterConfigs} {
		a := authz(t, Options{}, b(Topic, "foo_", Prefixed, "User:bob", op, Allow))
		check(t, a, q("User:bob", Describe, Topic, "foo_bar", false))
	}
	for _, op := range []Operation{Read, Write, Delete, Alter} {
		// A DENY of Read does not deny Describe, which the ALLOW of All grants.
		a := authz(t, Options{},
			b(Topic, "foo_", Prefixed, "User:bob", op, Deny),
			b(Topic, "foo_", Prefixed, "User:bob", All, Allow))
		check(t, a, q("User:bob", Describe, Topic, "foo_bar", true), q("User:bob", op, Topic, "foo_bar", false))
	}
	a := authz(t, Options{}, b(Topic, "foo_", Prefixed, "User:bob", Describe, Deny), b(Topic, "foo_", Prefixed, "User:bob", Read, Allow))
	check(t, a, q("User:bob", Describe, Topic, "foo_bar", false), q("User:bob", Read, Topic, "foo_bar", true))

	for _, op := range []Operation{DescribeConfigs, AlterConfigs} {
		a := authz(t, Options{}, b(Topic, "foo_", Prefixed, "User:bob", op, Allow))
		check(t, a, q("User:bob", DescribeConfigs, Topic, "foo_bar", true), q("User:bob", Describe, Topic, "foo_bar", false))
	}
	a = authz(t, Options{}, b(Topic, "foo_", Prefixed, "User:bob", AlterConfigs, Deny), b(Topic, "foo_", Prefixed, "User:bob", All, Allow))
	check(t, a, q("User:bob", DescribeConfigs, Topic, "foo_bar", true), q("User:bob", AlterConfigs, Topic, "foo_bar", false))
	// Describe implies nothing, and Write does not imply Read.
	a = authz(t, Options{}, b(Topic, "t", Literal, "User:bob", Write, Allow), b(Topic, "u", Literal, "User:bob", Describe, Allow))
	check(t, a, q("User:bob", Read, Topic, "t", false), q("User:bob", Read, Topic, "u", false), q("User:bob", DescribeConfigs, Topic, "t", false))
}

func TestPrincipalMatching(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "foo_", Prefixed, "User:bob", Read, Allow),
		b(Group, "bar", Literal, WildcardPrincipal, Read, Deny),
		b(Group, "bar", Literal, "User:alice", Read, Allow),
		b(Topic, "g", Literal, "Group:*", Read, Allow))
	check(t, a,
		q("User:bob", Read, Topic, "foo_bar", true),
		q("User:alice", Read, Topic, "foo_bar", false),
		q("User:Bob", Read, Topic, "foo_bar", false), // principals compare case-sensitively
		q("User:alice", Read, Group, "bar", false),   // User:* DENY covers alice
		q("Group:x", Read, Topic, "g", false),        // only User:* is a wildcard
		q("Group:*", Read, Topic, "g", true),
	)
}

func TestSimpleAuthorizations(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "foo_", Prefixed, "User:bob", Read, Allow),
		b(Topic, "foo_", Prefixed, "User:bob", Write, Allow),
		b(Group, "bar", Literal, WildcardPrincipal, DescribeConfigs, Allow),
		b(Group, "bar", Literal, WildcardPrincipal, AlterConfigs, Allow))
	check(t, a,
		q("User:bob", Read, Topic, "foo_", true),
		q("User:fred", AlterConfigs, Group, "bar", true),
		q("User:fred", Read, Group, "bar", false),
		q("User:bob", Read, Topic, "foo", false),
	)
}

func TestDenyPrecedenceWithOperationAll(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "foo", Literal, "User:alice", All, Deny),
		b(Topic, "foo", Prefixed, "User:alice", Read, Allow),
		b(Topic, "foo", Literal, WildcardPrincipal, All, Deny),
		b(Topic, "foo", Prefixed, WildcardPrincipal, Describe, Allow))
	check(t, a,
		q("User:alice", Write, Topic, "foo", false),
		q("User:alice", Read, Topic, "foo", false),
		q("User:alice", Describe, Topic, "foo", false),
		q("User:alice", Read, Topic, "foobar", true),
		q("User:bob", Describe, Topic, "foo", false),
		q("User:bob", Read, Topic, "foo", false),
		q("User:bob", Write, Topic, "foo", false),
		q("User:bob", Describe, Topic, "foobaz", true),
		q("User:bob", Read, Topic, "foobaz", false),
	)
}

func TestOperationAll(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "foo", Literal, WildcardPrincipal, All, Allow),
		b(Topic, "bar", Prefixed, "User:alice", All, Allow),
		b(Topic, "baz", Literal, "User:bob", All, Allow))
	check(t, a,
		q("User:alice", Write, Topic, "foo", true),
		q("User:alice", DescribeConfigs, Topic, "bar", true),
		q("User:alice", Describe, Topic, "baz", false),
		q("User:bob", Write, Topic, "foo", true),
		q("User:bob", Read, Topic, "bar", false),
		q("User:bob", Describe, Topic, "baz", true),
		q("User:malory", Describe, Topic, "foo", true),
		q("User:malory", Write, Topic, "bar", false),
		q("User:malory", Read, Topic, "baz", false),
	)
}

func TestHostMatching(t *testing.T) {
	local := netip.MustParseAddr("127.0.0.1")
	a := authz(t, Options{},
		b(Topic, "foo", Literal, "User:alice", Read, Deny, host1.String()),
		b(Topic, "foo", Literal, "User:alice", Read, Allow),
		b(Topic, "bar", Literal, "User:bob", Read, Allow, host2.String()),
		b(Topic, "bar", Literal, WildcardPrincipal, Describe, Allow, local.String()))
	foo := func(p string, want bool) query { return q(p, Read, Topic, "foo", want) }
	bar := func(p string, want bool) query { return q(p, Read, Topic, "bar", want) }
	barD := func(p string, want bool) query { return q(p, Describe, Topic, "bar", want) }
	check(t, a,
		foo("User:alice", true).at(local), bar("User:alice", false).at(local), barD("User:alice", true).at(local),
		foo("User:alice", false).at(host1), bar("User:alice", false).at(host1), barD("User:alice", false).at(host1),
		foo("User:alice", true).at(host2), bar("User:alice", false).at(host2), barD("User:alice", false).at(host2),
		foo("User:bob", false).at(local), bar("User:bob", false).at(local), barD("User:bob", true).at(local),
		foo("User:bob", false).at(host1), bar("User:bob", false).at(host1), barD("User:bob", false).at(host1),
		foo("User:bob", false).at(host2), bar("User:bob", true).at(host2), barD("User:bob", true).at(host2),
	)
	// An address compares as an address: an IPv4 client seen through an
	// IPv6 socket, and an IPv6 binding written in either form.
	a = authz(t, Options{},
		b(Topic, "t", Literal, "User:a", Read, Allow, "192.168.1.1"),
		b(Topic, "t", Literal, "User:b", Read, Allow, "0:0:0:0:0:0:0:1"))
	check(t, a,
		q("User:a", Read, Topic, "t", true).at(netip.MustParseAddr("::ffff:192.168.1.1")),
		q("User:b", Read, Topic, "t", true).at(netip.MustParseAddr("::1")),
		q("User:b", Read, Topic, "t", false).at(netip.MustParseAddr("::2")),
		q("User:b", Read, Topic, "t", false), // a client whose address is unknown matches only "*"
	)
	if a.Authorize("User:b", netip.Addr{}, Read, Topic, "t") {
		t.Error("a binding with a host allowed a client with no address")
	}
}

func TestManyBindings(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "green2", Literal, WildcardPrincipal, Read, Allow),
		b(Topic, "green", Prefixed, "User:bob", Read, Allow),
		b(Topic, "betamax4", Literal, "User:bob", Read, Allow),
		b(Topic, "betamax", Literal, "User:bob", Read, Allow),
		b(Topic, "beta", Prefixed, WildcardPrincipal, Read, Allow),
		b(Topic, "alpha", Prefixed, WildcardPrincipal, Read, Allow),
		b(Topic, "alp", Prefixed, "User:bob", Read, Deny),
		b(Group, "*", Literal, "User:bob", Write, Allow),
		b(Group, "wheel", Literal, WildcardPrincipal, Write, Deny))
	check(t, a,
		q("User:bob", Read, Topic, "green1", true),
		q("User:bob", Write, Group, "wheel", false),
		q("User:bob", Read, Topic, "alpha", false),
		q("User:bob", Write, Group, "arbitrary", true),
		q("User:bob", Read, Topic, "ala", false),
		q("User:alice", Read, Topic, "alpha", true),
		q("User:alice", Read, Topic, "betamax4", true),
		q("User:alice", Read, Topic, "green1", false),
	)
}

func TestPrefixed(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "fooa", Prefixed, "User:alice", All, Allow),
		b(Topic, "foobar", Literal, "User:bob", All, Allow),
		b(Topic, "f", Prefixed, "User:bob", All, Allow),
		b(Topic, "*", Prefixed, "User:carol", Read, Allow))
	check(t, a,
		q("User:bob", Write, Topic, "foobarr", true),
		q("User:bob", Read, Topic, "goobar", false),
		q("User:bob", Read, Topic, "fooa", true),
		q("User:alice", Describe, Topic, "fooa", true),
		q("User:alice", Write, Topic, "bar", false),
		q("User:alice", Read, Topic, "foo", false), // a prefix longer than the name does not match
		q("User:carol", Read, Topic, "*x", true),   // a Prefixed "*" is no wildcard
		q("User:carol", Read, Topic, "x", false),
	)
}

func TestLiteralWildcard(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "*", Literal, "User:bob", Read, Allow),
		b(Topic, "secret", Literal, "User:bob", Read, Deny),
		b(Group, "*", Literal, WildcardPrincipal, All, Deny),
		b(Group, "g", Literal, "User:bob", Read, Allow))
	check(t, a,
		q("User:bob", Read, Topic, "anything", true),
		q("User:bob", Read, Topic, "*", true),
		q("User:bob", Read, Topic, "secret", false),
		q("User:bob", Read, Group, "g", false),
		q("User:bob", Read, Cluster, ClusterName, false), // a wildcard covers its resource type only
	)
}

func TestSuperUsers(t *testing.T) {
	a := authz(t, Options{SuperUsers: " User:alice ; ;User:chris;"},
		b(Topic, "*", Literal, WildcardPrincipal, All, Deny))
	check(t, a,
		q("User:alice", Write, Topic, "t", true),
		q("User:chris", Alter, Cluster, ClusterName, true),
		q("User:bob", Read, Topic, "t", false),
		q("User:Alice", Read, Topic, "t", false),
	)
	if d := a.Decide("User:alice", anyHost, Read, Topic, "t"); d.Reason != SuperUser {
		t.Errorf("reason %v", d.Reason)
	}
	if _, err := New(nil, Options{SuperUsers: "alice"}); err == nil {
		t.Error("a super user without a type was accepted")
	}
}

func TestAllowIfNoACL(t *testing.T) {
	bs := []Binding{b(Topic, "topic1", Literal, "User:Alice", Read, Allow)}
	on := authz(t, Options{AllowIfNoACL: true}, bs...)
	check(t, on,
		q("User:Bob", Read, Topic, "topic1", false),
		q("User:Bob", Read, Topic, "topic2", true),
		q("User:Bob", Read, Group, "g", true),
	)
	off := authz(t, Options{}, bs...)
	check(t, off,
		q("User:Bob", Read, Topic, "topic1", false),
		q("User:Bob", Read, Topic, "topic2", false),
	)
	// A pattern of another principal still makes the resource named.
	on = authz(t, Options{AllowIfNoACL: true}, b(Topic, "to", Prefixed, "User:x", Write, Deny, "10.1.1.1"))
	check(t, on, q("User:Bob", Read, Topic, "topic2", false), q("User:Bob", Read, Topic, "t", true))
}

func TestNilAuthorizerChecksNothing(t *testing.T) {
	var a *Authorizer
	if !a.Authorize("User:x", anyHost, Alter, Cluster, ClusterName) || !a.AuthorizeByResourceType("User:x", anyHost, Write, Topic) {
		t.Fatal("a nil Authorizer refused")
	}
	empty, _ := New(nil, Options{})
	if empty.Authorize("User:x", anyHost, Read, Topic, "t") {
		t.Fatal("an empty ACL file allowed")
	}
}

func TestDecisionNamesTheBinding(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "t", Literal, "User:a", Read, Allow),
		b(Topic, "t", Prefixed, "User:a", Write, Deny))
	d := a.Decide("User:a", anyHost, Write, Topic, "tx")
	if d.Allowed || d.Reason != MatchingACL || d.Binding == nil || d.Binding.Permission != Deny {
		t.Fatalf("%+v", d)
	}
	d = a.Decide("User:a", anyHost, Read, Topic, "t")
	if !d.Allowed || d.Binding == nil || d.Binding.Operation != Read {
		t.Fatalf("%+v", d)
	}
	if d = a.Decide("User:a", anyHost, Read, Topic, "u"); d.Allowed || d.Reason != DefaultDeny {
		t.Fatalf("%+v", d)
	}
}

// The cases below re-express Kafka's tests of authorizeByResourceType.

func byType(t *testing.T, a *Authorizer, principal string, h netip.Addr, op Operation, rt ResourceType, want bool) {
	t.Helper()
	if got := a.AuthorizeByResourceType(principal, h, op, rt); got != want {
		t.Errorf("%s from %s: %s on any %s: got %v, want %v", principal, h, op, rt, got, want)
	}
	if got := referenceByType(a, principal, h, op, rt); got != want {
		t.Errorf("reference: %s from %s: %s on any %s: got %v, want %v", principal, h, op, rt, got, want)
	}
}

func TestByTypeUnrelatedDenyDoesNotDominate(t *testing.T) {
	h1, h2 := host1.String(), host2.String()
	a := authz(t, Options{},
		b(Topic, "sb1", Literal, "User:user1", Read, Deny, h1),
		b(Topic, "sb1", Literal, "User:user2", Read, Deny, h1),
		b(Topic, "sb1", Literal, "User:user1", Write, Deny, h2),
		b(Topic, "sb1", Literal, "User:user2", Read, Deny, h2),
		b(Topic, "sb1", Literal, "User:user1", Read, Allow, h2),
		b(Topic, "sb2", Literal, "User:user1", Read, Deny, h2),
		b(Group, "s", Prefixed, "User:user1", Read, Deny, h2))
	byType(t, a, "User:user1", host1, Read, Topic, false)
	byType(t, a, "User:user1", host1, Read, Group, false)
	byType(t, a, "User:user1", host1, Read, TransactionalID, false)
	byType(t, a, "User:user1", host1, Read, Cluster, false)
	byType(t, a, "User:user1", host2, Read, Topic, true)
}

func TestByTypeDenyTakesPrecedence(t *testing.T) {
	allow := b(Topic, "sb1", Literal, "User:user1", Write, Allow, host1.String())
	deny := allow
	deny.Permission = Deny
	byType(t, authz(t, Options{}, allow), "User:user1", host1, Write, Topic, true)
	byType(t, authz(t, Options{}, allow, deny), "User:user1", host1, Write, Topic, false)
}

func TestByTypePrefixedDenyDominates(t *testing.T) {
	h := host1.String()
	g := func(name string, perm Permission) Binding {
		return b(Group, name, Prefixed, "User:user1", Read, perm, h)
	}
	bs := []Binding{g("abcde", Allow)}
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Group, true)
	bs = append(bs, g("abcd", Deny))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Group, false)
	bs = append(bs, g("abc", Allow))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Group, true)
	bs = append(bs, g("a", Deny))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Group, false)
	bs = append(bs, g("ab", Allow))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Group, false)
}

func TestByTypeWildcardDenyDominates(t *testing.T) {
	h := host1.String()
	bs := []Binding{b(Group, "hello", Prefixed, "User:user1", Write, Allow, h)}
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Write, Group, true)
	bs = append(bs, b(Group, "*", Literal, "User:user1", Write, Deny, h))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Write, Group, false)
	bs = append(bs, b(Group, "*", Literal, "User:user1", Write, Allow, h))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Write, Group, false)
	bs = append(bs, b(Group, "aloha", Literal, "User:user1", Write, Allow, h))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Write, Group, false)
}

func TestByTypeOperationAll(t *testing.T) {
	h := host1.String()
	byType(t, authz(t, Options{}), "User:user1", host1, Read, Topic, false)
	bs := []Binding{b(Topic, "sb1", Literal, "User:user1", Write, Deny, h), b(Topic, "sb1", Literal, "User:user1", All, Allow, h)}
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Topic, true)
	bs = append(bs, b(Topic, "sb1", Literal, "User:user1", All, Deny, h))
	byType(t, authz(t, Options{}, bs...), "User:user1", host1, Read, Topic, false)
}

func TestByTypeHostsPrincipalsSuperUsers(t *testing.T) {
	a := authz(t, Options{SuperUsers: "User:admin"},
		b(Topic, "t", Literal, WildcardPrincipal, Write, Allow),
		b(Topic, "u", Literal, "User:user1", Write, Allow, host1.String()),
		b(Topic, "*", Literal, "User:banned", All, Deny))
	byType(t, a, "User:anyone", host2, Write, Topic, true)
	byType(t, a, "User:banned", host2, Write, Topic, false)
	byType(t, a, "User:anyone", host2, Read, Topic, false) // no implication
	byType(t, a, "User:admin", host2, Alter, Cluster, true)
	// Only Write is asked: an idempotent producer with Write on one topic
	// may have a producer id (KIP-679).
	a = authz(t, Options{}, b(Topic, "orders", Prefixed, "User:p", Write, Allow))
	byType(t, a, "User:p", host1, Write, Topic, true)
	byType(t, a, "User:q", host1, Write, Topic, false)
	// allow.everyone.if.no.acl.found answers for the name "hardcode".
	a = authz(t, Options{AllowIfNoACL: true}, b(Topic, "t", Literal, "User:x", Write, Allow))
	byType(t, a, "User:p", host1, Write, Topic, true)
	a = authz(t, Options{AllowIfNoACL: true}, b(Topic, "h", Prefixed, "User:x", Write, Allow))
	byType(t, a, "User:p", host1, Write, Topic, false)
}

// reference is Kafka's decision written plainly over every binding, with
// no index: the fuzz target holds the indexed Authorizer to it.
func reference(a *Authorizer, principal string, host netip.Addr, op Operation, rt ResourceType, name string) bool {
	if a == nil {
		return true
	}
	if a.IsSuperUser(principal) {
		return true
	}
	host = host.WithZone("").Unmap()
	named, allowed := false, false
	for _, x := range a.set.bindings {
		if x.ResourceType != rt {
			continue
		}
		switch {
		case x.PatternType == Literal && (x.ResourceName == name || x.ResourceName == Wildcard):
		case x.PatternType == Prefixed && len(name) >= len(x.ResourceName) && name[:len(x.ResourceName)] == x.ResourceName:
		default:
			continue
		}
		named = true
		if x.Principal != principal && x.Principal != WildcardPrincipal {
			continue
		}
		if x.Host != Wildcard {
			h, err := netip.ParseAddr(x.Host)
			if err != nil || !host.IsValid() || h.WithZone("").Unmap() != host {
				continue
			}
		}
		if x.Permission == Deny {
			if x.Operation == All || x.Operation == op {
				return false
			}
			continue
		}
		implied := (op == Describe && (x.Operation == Read || x.Operation == Write || x.Operation == Delete || x.Operation == Alter)) ||
			(op == DescribeConfigs && x.Operation == AlterConfigs)
		if x.Operation == All || x.Operation == op || implied {
			allowed = true
		}
	}
	return allowed || (!named && a.allowIfNoACL)
}

// referenceByType is Kafka's authorizeByResourceType over every binding.
func referenceByType(a *Authorizer, principal string, host netip.Addr, op Operation, rt ResourceType) bool {
	if a == nil || reference(a, principal, host, op, rt, "hardcode") {
		return true
	}
	host = host.WithZone("").Unmap()
	type pat struct {
		pt   PatternType
		name string
	}
	var allows, denies []pat
	for _, x := range a.set.bindings {
		if x.ResourceType != rt || (x.Principal != principal && x.Principal != WildcardPrincipal) {
			continue
		}
		if x.Host != Wildcard {
			if h, err := netip.ParseAddr(x.Host); err != nil || !host.IsValid() || h.WithZone("").Unmap() != host {
				continue
			}
		}
		if x.Operation != op && x.Operation != All {
			continue
		}
		if x.Permission == Deny {
			denies = append(denies, pat{x.PatternType, x.ResourceName})
		} else {
			allows = append(allows, pat{x.PatternType, x.ResourceName})
		}
	}
	for _, d := range denies {
		if d == (pat{Literal, Wildcard}) {
			return false
		}
	}
	for _, al := range allows {
		if al == (pat{Literal, Wildcard}) {
			return true
		}
	}
	for _, al := range allows {
		dominated := false
		for _, d := range denies {
			if d.pt == Literal && al.pt == Literal && d.name == al.name {
				dominated = true
			}
			if d.pt == Prefixed && len(al.name) >= len(d.name) && al.name[:len(d.name)] == d.name {
				dominated = true
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}

// TestWorkIsBoundedByTheBindingsThatApply holds a decision's cost to the
// bindings that can apply to it: as unrelated bindings grow from none to
// 10,000 (other topics, literal and prefixed, other principals on the
// same topic, other resource types), the index lookups and the rules
// examined per decision stay the same.
func TestWorkIsBoundedByTheBindingsThatApply(t *testing.T) {
	related := []Binding{
		b(Topic, "orders", Literal, "User:app", Write, Allow),
		b(Topic, "ord", Prefixed, "User:app", Read, Allow),
		b(Topic, "*", Literal, WildcardPrincipal, Describe, Allow),
		b(Group, "app-", Prefixed, "User:app", Read, Allow),
	}
	queries := []query{
		q("User:app", Write, Topic, "orders", true),
		q("User:app", Read, Topic, "orders", true),
		q("User:app", Describe, Topic, "orders", true),
		q("User:app", Delete, Topic, "orders", false),
		q("User:app", Read, Group, "app-1", true),
		q("User:other", Write, Topic, "orders", false),
	}
	cost := func(unrelated int) (w work) {
		bs := append([]Binding(nil), related...)
		for i := 0; len(bs) < len(related)+unrelated; i++ {
			switch i % 5 {
			case 0:
				bs = append(bs, b(Topic, fmt.Sprintf("topic-%d", i), Literal, fmt.Sprintf("User:u%d", i), Read, Allow))
			case 1:
				bs = append(bs, b(Topic, fmt.Sprintf("p%d-", i), Prefixed, "User:app", Write, Allow))
			case 2:
				bs = append(bs, b(Topic, "orders", Literal, fmt.Sprintf("User:u%d", i), Write, Deny))
			case 3:
				bs = append(bs, b(Group, fmt.Sprintf("g%d", i), Literal, "User:app", Read, Deny))
			case 4:
				bs = append(bs, b(TransactionalID, fmt.Sprintf("tx%d", i), Prefixed, WildcardPrincipal, Write, Allow))
			}
		}
		a := authz(t, Options{}, bs...)
		for _, c := range queries {
			if d := a.decide(c.principal, c.host, c.op, c.rt, c.name, &w); d.Allowed != c.want {
				t.Fatalf("with %d unrelated: %+v: got %v", unrelated, c, d.Allowed)
			}
		}
		return w
	}
	base := cost(0)
	for _, n := range []int{100, 1000, 10000} {
		w := cost(n)
		if w.rules != base.rules {
			t.Errorf("with %d unrelated bindings, decisions examined %d rules; with none, %d", n, w.rules, base.rules)
		}
		// Each distinct prefix length no longer than the name costs one
		// lookup: the names here are short, so at most a handful.
		if w.lookups > base.lookups+len(queries)*2*len("orders") {
			t.Errorf("with %d unrelated bindings, decisions made %d lookups; with none, %d", n, w.lookups, base.lookups)
		}
	}
}

func BenchmarkAuthorize1000(b *testing.B) {
	bs := []Binding{}
	for i := 0; i < 1000; i++ {
		bs = append(bs, Binding{ResourceType: Topic, ResourceName: fmt.Sprintf("topic-%d", i), PatternType: Literal,
			Principal: fmt.Sprintf("User:u%d", i%50), Host: Wildcard, Operation: Write, Permission: Allow})
	}
	a, err := New(newSet(bs), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !a.Authorize("User:u7", anyHost, Write, Topic, "topic-507") {
			b.Fatal("denied")
		}
	}
}
