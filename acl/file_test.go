package acl

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const sampleFile = `# who may do what
acls:
  - principal: User:alice
    resourceType: TOPIC
    resourceName: orders
    operation: WRITE
  - principal: User:alice
    host: 10.0.0.1
    resourceType: topic
    resourceName: ord
    patternType: prefixed
    operation: Read
    permissionType: deny
  - principal: "User:*"
    resourceType: Cluster
    operation: IdempotentWrite
  - principal: User:bob
    host: "*"
    resourceType: TransactionalId
    resourceName: "*"
    operation: describe
`

func TestParse(t *testing.T) {
	s, err := Parse("acls.yaml", []byte(sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Binding{
		{Topic, "orders", Literal, "User:alice", "*", Write, Allow},
		{Topic, "ord", Prefixed, "User:alice", "10.0.0.1", Read, Deny},
		{Cluster, ClusterName, Literal, "User:*", "*", IdempotentWrite, Allow},
		{TransactionalID, "*", Literal, "User:bob", "*", Describe, Allow},
	}
	if got := s.Bindings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
	again, err := Parse("formatted", Format(s))
	if err != nil {
		t.Fatalf("%v\n%s", err, Format(s))
	}
	if !reflect.DeepEqual(again.Bindings(), want) {
		t.Fatalf("formatted and parsed again: %v", again.Bindings())
	}
}

// TestFormatOddNames: group and transactional ids of line breaks alone,
// or with a tab before one, are written so that they read back.
func TestFormatOddNames(t *testing.T) {
	var want []Binding
	for _, name := range []string{"\n", "\n\n", "\t\n", "a\tb", "\u2028"} {
		want = append(want, Binding{Group, name, Literal, "User:alice", "*", Read, Allow})
	}
	s, err := NewSet(want)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("formatted", Format(s))
	if err != nil {
		t.Fatalf("%v\n%s", err, Format(s))
	}
	if !reflect.DeepEqual(again.Bindings(), s.Bindings()) {
		t.Fatalf("formatted and parsed again: %q", again.Bindings())
	}
}

func TestParseNames(t *testing.T) {
	for s, want := range map[string]Operation{
		"ALL": All, "all": All, "IdempotentWrite": IdempotentWrite, "IDEMPOTENT_WRITE": IdempotentWrite,
		"idempotent_write": IdempotentWrite, "DescribeConfigs": DescribeConfigs, "CLUSTER_ACTION": ClusterAction,
		"ClusterAction": ClusterAction, "describe_tokens": DescribeTokens, "any": AnyOperation,
	} {
		if got, ok := ParseOperation(s); !ok || got != want {
			t.Errorf("%q: got %v, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "UNKNOWN", "reed", "_"} {
		if _, ok := ParseOperation(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
	if rt, ok := ParseResourceType("transactional_id"); !ok || rt != TransactionalID {
		t.Error(rt, ok)
	}
	if rt, ok := ParseResourceType("DelegationToken"); !ok || rt != DelegationToken {
		t.Error(rt, ok)
	}
	if IdempotentWrite.String() != "IdempotentWrite" || TransactionalID.String() != "TransactionalId" || Prefixed.String() != "PREFIXED" || Deny.String() != "Deny" {
		t.Error(IdempotentWrite, TransactionalID, Prefixed, Deny)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"", "acls.yaml: invalid ACL: empty file"},
		{"acls: []\n---\nacls: []\n", "acls.yaml:2: invalid ACL: a second YAML document"},
		{"acl: []", "acls.yaml:1: invalid ACL: unknown key \"acl\""},
		{"acls: {}", "acls.yaml:1: invalid ACL: acls: expected a list"},
		{"acls: [1]", "acls.yaml:1: invalid ACL: expected a binding"},
		{"- a", "acls.yaml:1: invalid ACL: expected a mapping"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  colour: red\n", "acls.yaml:6: invalid ACL: unknown key \"colour\""},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  operation: WRITE\n", "acls.yaml:6: invalid ACL: operation given twice"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n", "acls.yaml:2: invalid ACL: missing operation"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  operation: READ\n", "acls.yaml:2: invalid ACL: missing resourceName"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: \"\"\n  operation: READ\n", "acls.yaml:4: invalid ACL: resourceName must not be empty"},
		{"acls:\n- principal: alice\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n", "acls.yaml:2: invalid ACL: principal \"alice\": expected Type:name"},
		{"acls:\n- principal: User:a\n  resourceType: QUEUE\n  resourceName: t\n  operation: READ\n", "acls.yaml:3: invalid ACL: resourceType \"QUEUE\""},
		{"acls:\n- principal: User:a\n  resourceType: ANY\n  resourceName: t\n  operation: READ\n", "acls.yaml:3: invalid ACL: resourceType \"ANY\""},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: ANY\n", "acls.yaml:5: invalid ACL: operation \"ANY\""},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  patternType: MATCH\n", "acls.yaml:6: invalid ACL: patternType \"MATCH\""},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  permissionType: ANY\n", "acls.yaml:6: invalid ACL: permissionType \"ANY\""},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  host: broker.example\n", "acls.yaml:6: invalid ACL: host \"broker.example\": must be * or an IP address"},
		{"acls:\n- principal: User:a\n  resourceType: CLUSTER\n  resourceName: c\n  operation: ALTER\n", "acls.yaml:4: invalid ACL: resourceName \"c\": the only name of the CLUSTER resource"},
		{"acls:\n- principal: User:a\n  resourceType: CLUSTER\n  patternType: PREFIXED\n  operation: ALTER\n", "acls.yaml:2: invalid ACL: resourceName \"kafka-cluster\": the only name of the CLUSTER resource"},
		{"acls:\n- principal: User:a\n  resourceType: GROUP\n  resourceName: g\n  operation: WRITE\n", "acls.yaml:5: invalid ACL: operation Write: resourceType Group supports only All, Read, Describe, Delete"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: [t]\n  operation: READ\n", "acls.yaml:4: invalid ACL: resourceName: expected a value"},
		{"acls:\n- principal: User:a\n  resourceType: TOPIC\n  resourceName: t\n  operation: READ\n  host: *\n", "acls.yaml: invalid ACL: yaml:"},
	} {
		_, err := Parse("acls.yaml", []byte(c.data))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q:\n got %v\nwant %s...", c.data, err, c.want)
		}
	}
	for _, ok := range []string{"acls: []", "acls:", "acls: ~"} {
		s, err := Parse("acls.yaml", []byte(ok))
		if err != nil || s.Len() != 0 {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(p, []byte("acls:\n  - {principal: 'User:a', resourceType: GROUP, resourceName: g, operation: READ}\n  - {principal: 'User:a', resourceType: GROUP, resourceName: g, operation: READ}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil || s.Len() != 1 {
		t.Fatalf("%v, %d bindings; a binding given twice is kept once", err, s.Len())
	}
	if _, err := Load(p + ".missing"); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestNewSetValidates(t *testing.T) {
	if _, err := NewSet([]Binding{b(Group, "g", Literal, "User:a", Write, Allow)}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	var fe *FieldError
	if _, err := NewSet([]Binding{b(Topic, "t", Literal, "User:a", Read, Allow, "nohost")}); !errors.As(err, &fe) || fe.Field != "host" {
		t.Fatal(err)
	}
	if _, err := NewSet([]Binding{b(Topic, "t", Literal, "User:a", Read, Allow, "fe80::1%eth0")}); err != nil {
		t.Fatal(err)
	}
}

func TestExampleFile(t *testing.T) {
	s, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(s, Options{SuperUsers: "User:admin;User:ops"})
	if err != nil {
		t.Fatal(err)
	}
	gateway := netip.MustParseAddr("10.20.0.1")
	check(t, a,
		q("User:orders-svc", Write, Topic, "orders-eu", true),
		q("User:orders-svc", Describe, Topic, "orders-eu", true),
		q("User:orders-svc", Read, Topic, "orders-eu", false),
		q("User:orders-svc", Write, TransactionalID, "orders-tx-1", true),
		q("User:billing", Read, Topic, "orders-eu", true),
		q("User:billing", Read, Group, "billing", true),
		q("User:billing", Read, Group, "other", false),
		q("User:billing", Read, Topic, "orders-pii", true),
		q("User:billing", Read, Topic, "orders-pii", false).at(gateway),
		q("User:admin", Alter, Cluster, ClusterName, true),
		q("User:nobody", Describe, Cluster, ClusterName, true),
		q("User:nobody", Read, Topic, "orders-eu", false),
	)
	if !a.AuthorizeByResourceType("User:orders-svc", anyHost, Write, Topic) || a.AuthorizeByResourceType("User:billing", anyHost, Write, Topic) {
		t.Error("an idempotent producer's InitProducerId")
	}
}
