package acl

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParse: the file parser never panics, and a set it accepts, written
// out by Format and parsed again, holds the same bindings and so gives the
// same decisions.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleFile))
	if example, err := os.ReadFile("testdata/example.yaml"); err == nil {
		f.Add(example)
	}
	f.Add([]byte("acls: []"))
	f.Add([]byte("acls:\n- {principal: 'User:*', host: '::1', resourceType: topic, resourceName: '*', operation: all, permissionType: deny}\n"))
	f.Add([]byte("acls:\n- {principal: 'User:a', resourceType: CLUSTER, operation: IDEMPOTENT_WRITE}\n- {principal: 'User:b', resourceType: GROUP, resourceName: 'g-', patternType: PREFIXED, operation: Read}\n"))
	f.Add([]byte("acls: &x [*x]"))
	f.Add([]byte("acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: \"caf\\u00e9\"\n  operation: READ\n"))
	f.Add([]byte("acls:\n- {principal: 'User:a', resourceType: GROUP, resourceName: \"\\n\", operation: READ}\n- {principal: 'User:a', resourceType: GROUP, resourceName: \"\\t\\n\", operation: READ}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, x := range s.Bindings() {
			if err := x.Validate(); err != nil {
				t.Fatalf("accepted an invalid binding %v: %v", x, err)
			}
		}
		out := Format(s)
		again, err := Parse("formatted", out)
		if err != nil {
			t.Fatalf("formatted set did not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(s.Bindings(), again.Bindings()) {
			t.Fatalf("bindings changed:\n%v\n%v", s.Bindings(), again.Bindings())
		}
		a1, _ := New(s, Options{})
		a2, _ := New(again, Options{})
		for _, x := range s.Bindings() {
			for _, p := range []string{x.Principal, "User:other"} {
				h := parseHost(x.Host)
				if !h.IsValid() {
					h = anyHost
				}
				if a1.Authorize(p, h, x.Operation, x.ResourceType, x.ResourceName) != a2.Authorize(p, h, x.Operation, x.ResourceType, x.ResourceName) {
					t.Fatalf("decisions differ for %s on %v", p, x)
				}
			}
		}
	})
}

// fuzzReader hands out small choices from the fuzzer's bytes.
type fuzzReader struct{ data []byte }

func (r *fuzzReader) pick(n int) int {
	if len(r.data) == 0 {
		return 0
	}
	v := int(r.data[0]) % n
	r.data = r.data[1:]
	return v
}

var (
	fuzzNames      = []string{"a", "ab", "abc", "abd", "b", "*", "*a", "a*", "hardcode", "h", "hard", "kafka-cluster", "é", "\xff"}
	fuzzPrincipals = []string{"User:a", "User:b", WildcardPrincipal, "Group:a", "User:A"}
	fuzzHosts      = []string{Wildcard, "10.0.0.1", "10.0.0.2", "::1", "::ffff:10.0.0.1", "not-an-address"}
	fuzzAddrs      = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("::1"), {}}
	fuzzTypes      = []ResourceType{Topic, Group, Cluster, TransactionalID}
)

// FuzzAuthorize holds the indexed Authorizer to the plain reference over
// every binding, for random bindings, options and queries: both answers
// of Authorize and of AuthorizeByResourceType must agree.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 0, 1, 1, 1, 0, 2, 5, 1, 0, 1, 2, 1, 1, 0, 9, 9, 2, 0, 1, 1, 3, 1})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps over the lazy dog"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data: data}
		opts := Options{AllowIfNoACL: r.pick(2) == 1}
		if r.pick(3) == 0 {
			opts.SuperUsers = "User:b"
		}
		n := r.pick(12)
		var bs []Binding
		for i := 0; i < n; i++ {
			bs = append(bs, Binding{
				ResourceType: fuzzTypes[r.pick(len(fuzzTypes))],
				ResourceName: fuzzNames[r.pick(len(fuzzNames))],
				PatternType:  Literal + PatternType(r.pick(2)),
				Principal:    fuzzPrincipals[r.pick(len(fuzzPrincipals))],
				Host:         fuzzHosts[r.pick(len(fuzzHosts))],
				Operation:    All + Operation(r.pick(int(TwoPhaseCommit-All+1))),
				Permission:   Deny + Permission(r.pick(2)),
			})
		}
		a, err := New(newSet(bs), opts)
		if err != nil {
			t.Fatal(err)
		}
		for len(r.data) > 0 {
			p := fuzzPrincipals[r.pick(len(fuzzPrincipals))]
			h := fuzzAddrs[r.pick(len(fuzzAddrs))]
			op := Read + Operation(r.pick(int(TwoPhaseCommit-Read+1)))
			rt := fuzzTypes[r.pick(len(fuzzTypes))]
			name := fuzzNames[r.pick(len(fuzzNames))]
			if got, want := a.Authorize(p, h, op, rt, name), reference(a, p, h, op, rt, name); got != want {
				t.Fatalf("%v\n%s from %s: %s on %s %q: got %v, reference %v", bs, p, h, op, rt, name, got, want)
			}
			if got, want := a.AuthorizeByResourceType(p, h, op, rt), referenceByType(a, p, h, op, rt); got != want {
				t.Fatalf("%v\n%s from %s: %s on any %s: got %v, reference %v", bs, p, h, op, rt, got, want)
			}
		}
	})
}

// FuzzCheck decodes any request body of any key and checks it: Check
// never panics, a super user is refused nothing, a nil Authorizer allows
// everything, and every topic denied for authorization is one that
// Authorize denies.
func FuzzCheck(f *testing.F) {
	for _, k := range []int16{0, 1, 3, 8, 9, 10, 22, 24, 28, 32, 68, 88} {
		req := kmsg.RequestForKey(k)
		req.SetVersion(req.MaxVersion())
		f.Add(k, req.MaxVersion(), req.AppendTo(nil))
	}
	p := produce(kmsg.StringPtr("tx"), batch(0x10), "orders", "audit")
	f.Add(int16(0), p.Version, p.AppendTo(nil))
	a, err := New(newSet([]Binding{
		b(Topic, "ord", Prefixed, "User:c", All, Allow),
		b(Group, "*", Literal, "User:c", Read, Allow),
		b(TransactionalID, "tx", Literal, "User:c", Write, Allow),
	}), Options{SuperUsers: "User:root"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		c := client("User:c")
		c.TopicName = func(id [16]byte) (string, bool) { return fmt.Sprintf("ord-%x", id[0]), id[0]%2 == 0 }
		v := a.Check(c, req)
		for _, d := range v.Denied {
			if d.Code == TopicAuthorizationFailed && d.Name != "" && a.Authorize(c.Principal, c.Host, Read, Topic, d.Name) &&
				a.Authorize(c.Principal, c.Host, Describe, Topic, d.Name) && a.Authorize(c.Principal, c.Host, Write, Topic, d.Name) {
				t.Fatalf("%s: topic %q denied though every operation is allowed on it: %+v", kmsg.NameForKey(key), d.Name, v)
			}
		}
		if v := a.Check(client("User:root"), req); v.Code != 0 || len(v.Denied) != 0 {
			// A topic named only by an id nobody resolved is unknown, not refused.
			for _, d := range v.Denied {
				if d.Code != UnknownTopicID {
					t.Fatalf("%s: a super user refused: %+v", kmsg.NameForKey(key), v)
				}
			}
			if v.Code != 0 {
				t.Fatalf("%s: a super user refused: %+v", kmsg.NameForKey(key), v)
			}
		}
		var none *Authorizer
		if v := none.Check(c, req); !v.Allowed() {
			t.Fatalf("nil Authorizer: %+v", v)
		}
	})
}
