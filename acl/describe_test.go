package acl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func str(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	s := newSet([]Binding{
		b(Topic, "foo", Literal, "User:a", Read, Allow),              // 0
		b(Topic, "*", Literal, "User:a", Read, Allow),                // 1
		b(Topic, "fo", Prefixed, "User:b", Write, Deny, "10.0.0.1"),  // 2
		b(Topic, "foobar", Prefixed, "User:a", Read, Allow),          // 3
		b(Group, "foo", Literal, "User:a", Read, Allow),              // 4
		b(Cluster, ClusterName, Literal, "User:admin", Alter, Allow), // 5
	})
	all := s.Bindings()
	pick := func(is ...int) []Binding {
		var out []Binding
		for _, i := range is {
			out = append(out, all[i])
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"any", Filter{AnyResource, nil, AnyPattern, nil, nil, AnyOperation, AnyPermission}, all},
		{"topics", Filter{Topic, nil, AnyPattern, nil, nil, AnyOperation, AnyPermission}, pick(0, 1, 2, 3)},
		{"any pattern named foo", Filter{AnyResource, str("foo"), AnyPattern, nil, nil, AnyOperation, AnyPermission}, pick(0, 4)},
		{"match topic foo", Filter{Topic, str("foo"), Match, nil, nil, AnyOperation, AnyPermission}, pick(0, 1, 2)},
		{"match topic foobarbaz", Filter{Topic, str("foobarbaz"), Match, nil, nil, AnyOperation, AnyPermission}, pick(1, 2, 3)},
		{"literal foo", Filter{Topic, str("foo"), Literal, nil, nil, AnyOperation, AnyPermission}, pick(0)},
		{"prefixed", Filter{AnyResource, nil, Prefixed, nil, nil, AnyOperation, AnyPermission}, pick(2, 3)},
		{"principal", Filter{AnyResource, nil, AnyPattern, str("User:b"), nil, AnyOperation, AnyPermission}, pick(2)},
		{"host", Filter{AnyResource, nil, AnyPattern, nil, str("*"), AnyOperation, AnyPermission}, pick(0, 1, 3, 4, 5)},
		{"operation", Filter{AnyResource, nil, AnyPattern, nil, nil, Alter, AnyPermission}, pick(5)},
		{"deny", Filter{AnyResource, nil, AnyPattern, nil, nil, AnyOperation, Deny}, pick(2)},
	} {
		if got := s.Filter(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func TestDescribeACLs(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "foo", Literal, "User:a", Read, Allow),
		b(Topic, "foo", Literal, "User:b", Write, Allow),
		b(Topic, "fo", Prefixed, "User:b", Write, Deny),
		b(Cluster, ClusterName, Literal, "User:admin", Describe, Allow),
		b(Cluster, ClusterName, Literal, "User:admin", Alter, Allow))
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = 3
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny

	resp := a.DescribeACLs(client("User:admin"), req)
	if resp.ErrorCode != 0 || len(resp.Resources) != 3 || len(resp.Resources[0].ACLs) != 2 {
		t.Fatalf("%+v", resp)
	}
	r := resp.Resources[1]
	if r.ResourceType != kmsg.ACLResourceTypeTopic || r.ResourceName != "fo" || r.ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed ||
		r.ACLs[0].Principal != "User:b" || r.ACLs[0].Host != "*" || r.ACLs[0].Operation != kmsg.ACLOperationWrite || r.ACLs[0].PermissionType != kmsg.ACLPermissionTypeDeny {
		t.Fatalf("%+v", r)
	}
	// The answer encodes at the request's version.
	if err := (&kmsg.DescribeACLsResponse{Version: 3}).ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}

	if resp := a.DescribeACLs(client("User:a"), req); resp.ErrorCode != 31 || len(resp.Resources) != 0 {
		t.Fatalf("without Describe on the cluster: %+v", resp)
	}
	v0 := *req
	v0.Version = 0
	if resp := a.DescribeACLs(client("User:admin"), &v0); resp.ErrorCode != 0 || len(resp.Resources) != 2 {
		t.Fatalf("version 0 lists literal patterns only: %+v", resp)
	}
	v0.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	if resp := a.DescribeACLs(client("User:admin"), &v0); resp.ErrorCode != 35 {
		t.Fatalf("version 0 with a prefixed filter: %+v", resp)
	}
	bad := *req
	bad.Operation = 0
	if resp := a.DescribeACLs(client("User:admin"), &bad); resp.ErrorCode != 42 {
		t.Fatalf("unknown operation: %+v", resp)
	}
	var none *Authorizer
	if resp := none.DescribeACLs(client("User:admin"), req); resp.ErrorCode != 54 {
		t.Fatalf("no authorizer: %+v", resp)
	}
}

func TestCreateAndDeleteACLsRefused(t *testing.T) {
	a := authz(t, Options{}, b(Cluster, ClusterName, Literal, "User:admin", Alter, Allow))
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	resp := a.CreateACLs(client("User:admin"), "/etc/inorder/acls.yaml", cr)
	if len(resp.Results) != 2 || resp.Results[1].ErrorCode != 44 || !strings.Contains(*resp.Results[1].ErrorMessage, "/etc/inorder/acls.yaml") {
		t.Fatalf("%+v", resp)
	}
	if resp := a.CreateACLs(client("User:x"), "f", cr); resp.Results[0].ErrorCode != 31 {
		t.Fatalf("%+v", resp)
	}
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.Filters = make([]kmsg.DeleteACLsRequestFilter, 1)
	d := a.DeleteACLs(client("User:admin"), "acls.yaml", dr)
	if len(d.Results) != 1 || d.Results[0].ErrorCode != 44 || !strings.Contains(*d.Results[0].ErrorMessage, "acls.yaml") {
		t.Fatalf("%+v", d)
	}
}
