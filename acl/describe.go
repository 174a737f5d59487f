package acl

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filter selects bindings as Kafka's AclBindingFilter does, for
// DescribeAcls: AnyResource, AnyOperation and AnyPermission match every
// value, a nil ResourceName, Principal or Host every string.
// PatternType AnyPattern matches every pattern whose name is ResourceName
// exactly; Match matches the bindings that apply to the resource named
// ResourceName (its Literal, the Literal "*", each Prefixed name that
// begins it); Literal and Prefixed match that pattern type and name.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses the filters Kafka refuses: an unknown resource type,
// pattern type, operation or permission.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < AnyResource || f.ResourceType > User:
		return invalid("resourceType", "%s: unknown in a filter", f.ResourceType)
	case f.PatternType < AnyPattern || f.PatternType > Prefixed:
		return invalid("patternType", "%s: unknown in a filter", f.PatternType)
	case f.Operation < AnyOperation || f.Operation > TwoPhaseCommit:
		return invalid("operation", "%s: unknown in a filter", f.Operation)
	case f.Permission < AnyPermission || f.Permission > Allow:
		return invalid("permissionType", "%s: unknown in a filter", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects x.
func (f Filter) Matches(x Binding) bool {
	if f.ResourceType != AnyResource && f.ResourceType != x.ResourceType {
		return false
	}
	if f.PatternType != AnyPattern && f.PatternType != Match && f.PatternType != x.PatternType {
		return false
	}
	if f.ResourceName != nil {
		n := *f.ResourceName
		switch {
		case f.PatternType == AnyPattern || f.PatternType == x.PatternType:
			if n != x.ResourceName {
				return false
			}
		case x.PatternType == Literal:
			if n != x.ResourceName && x.ResourceName != Wildcard {
				return false
			}
		default:
			if len(n) < len(x.ResourceName) || n[:len(x.ResourceName)] != x.ResourceName {
				return false
			}
		}
	}
	if f.Principal != nil && *f.Principal != x.Principal {
		return false
	}
	if f.Host != nil && *f.Host != x.Host {
		return false
	}
	if f.Operation != AnyOperation && f.Operation != x.Operation {
		return false
	}
	return f.Permission == AnyPermission || f.Permission == x.Permission
}

// Filter gives the bindings f selects, in the set's order.
func (s *Set) Filter(f Filter) []Binding {
	var out []Binding
	if s == nil {
		return out
	}
	for _, x := range s.bindings {
		if f.Matches(x) {
			out = append(out, x)
		}
	}
	return out
}

// Kafka's error codes in the answers built here.
const (
	errUnsupportedVersion              int16 = 35
	errClusterAuthorizationFailed      int16 = 31
	errInvalidRequest                  int16 = 42
	errPolicyViolation                 int16 = 44
	errSecurityDisabled                int16 = 54
	msgClusterAuthorizationFailed            = "Cluster authorization failed."
	msgSecurityDisabled                      = "No Authorizer is configured on the broker"
	msgDescribeACLsVersion0OnlyLiteral       = "Version 0 only supports literal resource pattern types"
)

// DescribeFilter reads a DescribeAcls request's filter as Kafka does: at
// version 0, which knows only literal patterns, AnyPattern means Literal
// and any other pattern type but Literal is an unsupported version.
func DescribeFilter(req *kmsg.DescribeACLsRequest) (Filter, int16, error) {
	f := Filter{
		ResourceType: ResourceType(req.ResourceType),
		ResourceName: req.ResourceName,
		PatternType:  PatternType(req.ResourcePatternType),
		Principal:    req.Principal,
		Host:         req.Host,
		Operation:    Operation(req.Operation),
		Permission:   Permission(req.PermissionType),
	}
	if req.Version == 0 {
		switch f.PatternType {
		case AnyPattern:
			f.PatternType = Literal
		case Literal:
		default:
			return f, errUnsupportedVersion, fmt.Errorf("%w: %s", ErrInvalid, msgDescribeACLsVersion0OnlyLiteral)
		}
	}
	if err := f.Validate(); err != nil {
		return f, errInvalidRequest, err
	}
	return f, 0, nil
}

// DescribeACLs answers a DescribeAcls from the authorizer's bindings, as
// a broker answers from its own: the filter read and checked, Describe on
// the cluster required, the bindings grouped by resource pattern. A nil
// Authorizer answers as a broker without an authorizer does.
func (a *Authorizer) DescribeACLs(c Client, req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(code int16, msg string) *kmsg.DescribeACLsResponse {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	f, code, err := DescribeFilter(req)
	if err != nil {
		return fail(code, err.Error())
	}
	if a == nil {
		return fail(errSecurityDisabled, msgSecurityDisabled)
	}
	if !a.Authorize(c.Principal, c.Host, Describe, Cluster, ClusterName) {
		return fail(errClusterAuthorizationFailed, msgClusterAuthorizationFailed)
	}
	index := map[patternKey]int{}
	for _, x := range a.set.Filter(f) {
		k := patternKey{x.ResourceType, x.PatternType, x.ResourceName}
		i, ok := index[k]
		if !ok {
			i = len(resp.Resources)
			index[k] = i
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = kmsg.ACLResourceType(x.ResourceType)
			r.ResourceName = x.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(x.PatternType)
			resp.Resources = append(resp.Resources, r)
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal = x.Principal
		acl.Host = x.Host
		acl.Operation = kmsg.ACLOperation(x.Operation)
		acl.PermissionType = kmsg.ACLPermissionType(x.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return resp
}

// refusal is the message of a CreateAcls or DeleteAcls refused because the
// bindings come from a file.
func refusal(file string) string {
	return fmt.Sprintf("ACLs at this proxy are read from its ACL file %s; change that file, the proxy reloads it", file)
}

// CreateACLs refuses a CreateAcls: the bindings are the file's, and a
// client cannot change them. A client without Alter on the cluster is
// told so first, as a broker would tell it; the others read a
// POLICY_VIOLATION whose message names the file.
func (a *Authorizer) CreateACLs(c Client, file string, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code, msg := a.alterRefusal(c, file)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, &msg
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// DeleteACLs refuses a DeleteAcls as CreateACLs refuses a CreateAcls.
func (a *Authorizer) DeleteACLs(c Client, file string, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code, msg := a.alterRefusal(c, file)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, &msg
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func (a *Authorizer) alterRefusal(c Client, file string) (int16, string) {
	switch {
	case a == nil:
		return errSecurityDisabled, msgSecurityDisabled
	case !a.Authorize(c.Principal, c.Host, Alter, Cluster, ClusterName):
		return errClusterAuthorizationFailed, msgClusterAuthorizationFailed
	default:
		return errPolicyViolation, refusal(file)
	}
}
