package authz

import (
	"net/netip"

	"github.com/inorder-proxy/inorder/acl"
)

// decisionsKept bounds the decisions a connection keeps: a client that
// writes more topics than that in turn decides again, as it would with
// none kept.
const decisionsKept = 8

// nameKept bounds the resource names kept: Kafka's names are shorter
// (249 bytes at most), and a client's longer name is decided every time
// rather than held by its connection.
const nameKept = 255

// decisions are a connection's last decisions under one generation of the
// rules, for one principal and host. An Authorizer is immutable, so the
// same question under the same generation has the same answer; a reload
// (a new generation) or a new principal (re-authentication) drops them
// all at the next decision. The client reader alone uses them.
type decisions struct {
	gen       uint64
	principal string
	host      netip.Addr
	n, next   int // entries filled; the one the next decision replaces
	e         [decisionsKept]decision
	// made counts the decisions asked of the rules, kept or not.
	made int
}

type decision struct {
	op      acl.Operation
	rt      acl.ResourceType
	allowed bool
	name    []byte // its capacity reused by the entry's next decision
}

// current reports whether d holds decisions of gen for c.
func (d *decisions) current(gen uint64, c acl.Client) bool {
	return d.gen == gen && d.principal == c.Principal && d.host == c.Host
}

// find returns the decision d keeps for op on the resource of type rt
// named name, if any.
func find[N string | []byte](d *decisions, gen uint64, c acl.Client, op acl.Operation, rt acl.ResourceType, name N) (allowed, ok bool) {
	if !d.current(gen, c) {
		return false, false
	}
	for i := range d.n {
		if e := &d.e[i]; e.op == op && e.rt == rt && string(e.name) == string(name) {
			return e.allowed, true
		}
	}
	return false, false
}

// keep makes d keep a decision made under gen for c, replacing the
// oldest when all are taken, and every one when gen or c changed.
func keep[N string | []byte](d *decisions, gen uint64, c acl.Client, op acl.Operation, rt acl.ResourceType, name N, allowed bool) {
	if len(name) > nameKept {
		return
	}
	if !d.current(gen, c) {
		d.gen, d.principal, d.host, d.n, d.next = gen, c.Principal, c.Host, 0, 0
	}
	e := &d.e[d.next]
	e.op, e.rt, e.allowed, e.name = op, rt, allowed, append(e.name[:0], name...)
	d.next = (d.next + 1) % decisionsKept
	d.n = min(d.n+1, decisionsKept)
}

// allowed reports whether c may perform op on the resource of type rt
// named name under rs: as kept on the connection st, or else asked of
// the rules and kept. A nil st keeps nothing.
func allowed[N string | []byte](st *Conn, rs *rules, c acl.Client, op acl.Operation, rt acl.ResourceType, name N) bool {
	if st == nil {
		return rs.a.Authorize(c.Principal, c.Host, op, rt, string(name))
	}
	if allowed, ok := find(&st.dec, rs.gen, c, op, rt, name); ok {
		return allowed
	}
	allowed := rs.a.Authorize(c.Principal, c.Host, op, rt, string(name))
	st.dec.made++
	keep(&st.dec, rs.gen, c, op, rt, name, allowed)
	return allowed
}

// kept answers Check's decisions from a connection's (acl.Kept).
type kept struct {
	st *Conn
	rs *rules
}

// Authorize is allowed under k's rules; under others (never: Check is
// given them), a's answer.
func (k *kept) Authorize(a *acl.Authorizer, principal string, host netip.Addr, op acl.Operation, rt acl.ResourceType, name string) bool {
	if a != k.rs.a {
		return a.Authorize(principal, host, op, rt, name)
	}
	return allowed(k.st, k.rs, acl.Client{Principal: principal, Host: host}, op, rt, name)
}
