// Package acl authorizes clients with Apache Kafka's ACL model and rules:
// bindings of a principal, a host, a resource pattern, an operation and
// ALLOW or DENY, read from a YAML file; super users; DENY over ALLOW;
// the operations that imply Describe and DescribeConfigs, for ALLOW only;
// what each API key requires, as Kafka's brokers check it. It holds no
// sockets: a Set answers a decision over plain values, so every rule here
// is tested as Kafka's StandardAuthorizerData is, without a connection.
//
// The codes of operations, resource types, pattern types and permissions
// are Kafka's, the values kmsg carries in DescribeAcls.
package acl

import (
	"fmt"
	"strings"
)

// Operation is an ACL operation, with Kafka's AclOperation codes.
type Operation int8

// The operations. AnyOperation only filters (DescribeAcls); All, in a
// binding, matches every operation.
const (
	UnknownOperation Operation = 0
	AnyOperation     Operation = 1
	All              Operation = 2
	Read             Operation = 3
	Write            Operation = 4
	Create           Operation = 5
	Delete           Operation = 6
	Alter            Operation = 7
	Describe         Operation = 8
	ClusterAction    Operation = 9
	DescribeConfigs  Operation = 10
	AlterConfigs     Operation = 11
	IdempotentWrite  Operation = 12
	CreateTokens     Operation = 13
	DescribeTokens   Operation = 14
	// TwoPhaseCommit, on a transactional id, lets a producer take part in
	// a two-phase commit (KIP-939, Kafka 4.1).
	TwoPhaseCommit Operation = 15
)

// ResourceType is the kind of resource a binding names, with Kafka's
// ResourceType codes.
type ResourceType int8

// The resource types. AnyResource only filters.
const (
	UnknownResource ResourceType = 0
	AnyResource     ResourceType = 1
	Topic           ResourceType = 2
	Group           ResourceType = 3
	Cluster         ResourceType = 4
	TransactionalID ResourceType = 5
	DelegationToken ResourceType = 6
	User            ResourceType = 7
)

// PatternType says how a binding's resource name matches, with Kafka's
// PatternType codes. A Literal name matches itself, and the Literal name
// "*" every name; a Prefixed name matches every name it begins. AnyPattern
// and Match only filter.
type PatternType int8

// The pattern types.
const (
	UnknownPattern PatternType = 0
	AnyPattern     PatternType = 1
	Match          PatternType = 2
	Literal        PatternType = 3
	Prefixed       PatternType = 4
)

// Permission is ALLOW or DENY, with Kafka's AclPermissionType codes.
type Permission int8

// The permissions. AnyPermission only filters.
const (
	UnknownPermission Permission = 0
	AnyPermission     Permission = 1
	Deny              Permission = 2
	Allow             Permission = 3
)

// Names Kafka gives these values: the enum constant (IDEMPOTENT_WRITE),
// and the Pascal case its tools print (IdempotentWrite).
var (
	operationNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}
	resourceNames   = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	patternNames    = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	permissionNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

// pascal gives Kafka's Pascal case of an enum constant, as
// SecurityUtils.toPascalCase does: IDEMPOTENT_WRITE is IdempotentWrite.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, c := range s {
		switch {
		case c == '_':
			up = true
		case up:
			b.WriteRune(c)
			up = false
		default:
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return b.String()
}

func name(names []string, v int8) string {
	if v < 0 || int(v) >= len(names) {
		return fmt.Sprintf("Unknown(%d)", v)
	}
	return pascal(names[v])
}

// lookup finds s among names in any case, with or without the
// underscores, so that IDEMPOTENT_WRITE, IdempotentWrite and
// idempotent_write all name one operation, as Kafka's tools accept them.
func lookup(names []string, s string) (int8, bool) {
	key := strings.ToUpper(strings.ReplaceAll(s, "_", ""))
	if key == "" {
		return 0, false
	}
	for i, n := range names {
		if strings.ReplaceAll(n, "_", "") == key {
			return int8(i), true
		}
	}
	return 0, false
}

func (o Operation) String() string    { return name(operationNames[:], int8(o)) }
func (r ResourceType) String() string { return name(resourceNames[:], int8(r)) }
func (p PatternType) String() string  { return strings.ToUpper(name(patternNames[:], int8(p))) }
func (p Permission) String() string   { return name(permissionNames[:], int8(p)) }

// ParseOperation reads an operation in any case, with or without
// underscores; an unknown name gives UnknownOperation and false.
func ParseOperation(s string) (Operation, bool) {
	v, ok := lookup(operationNames[:], s)
	return Operation(v), ok && v != 0
}

// ParseResourceType reads a resource type as ParseOperation does.
func ParseResourceType(s string) (ResourceType, bool) {
	v, ok := lookup(resourceNames[:], s)
	return ResourceType(v), ok && v != 0
}

// ParsePatternType reads a pattern type as ParseOperation does.
func ParsePatternType(s string) (PatternType, bool) {
	v, ok := lookup(patternNames[:], s)
	return PatternType(v), ok && v != 0
}

// ParsePermission reads a permission as ParseOperation does.
func ParsePermission(s string) (Permission, bool) {
	v, ok := lookup(permissionNames[:], s)
	return Permission(v), ok && v != 0
}

// ClusterName is the only name of the Cluster resource (Kafka's
// CLUSTER_NAME): bindings on the cluster name it, and so do checks.
const ClusterName = "kafka-cluster"

// Wildcard is the Literal resource name that matches every name, and the
// host that matches every host.
const Wildcard = "*"

// WildcardPrincipal is the principal of a binding that applies to every
// principal. No other principal is a wildcard: Kafka compares the rest as
// strings.
const WildcardPrincipal = "User:*"

// Binding is one ACL, with the fields of Kafka's AclBinding: a resource
// pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string // "Type:name", e.g. User:alice, or User:*
	Host         string // an IP address, or "*"
	Operation    Operation
	Permission   Permission
}

// String writes a binding as Kafka's tools list one.
func (b Binding) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s) on ResourcePattern(resourceType=%s, name=%s, patternType=%s)",
		b.Principal, b.Host, strings.ToUpper(operationNames[clamp(int8(b.Operation), len(operationNames))]),
		strings.ToUpper(permissionNames[clamp(int8(b.Permission), len(permissionNames))]),
		resourceNames[clamp(int8(b.ResourceType), len(resourceNames))], b.ResourceName, b.PatternType)
}

func clamp(v int8, n int) int {
	if v < 0 || int(v) >= n {
		return 0
	}
	return int(v)
}

// toolOperations gives the operations kafka-acls accepts on each resource
// type (AclEntry.supportedOperations), All aside: the operations a broker
// reports in a resource's authorized operations.
var toolOperations = map[ResourceType][]Operation{
	Topic:           {Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete, DescribeConfigs, AlterConfigs},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write, TwoPhaseCommit},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// supported gives the operations a binding may name on each type: those
// of kafka-acls, and Delete on the cluster, which kafka-acls does not
// offer but Kafka's controller honours (DeleteTopics of any topic) and its
// Admin API creates.
var supported = func() map[ResourceType][]Operation {
	m := make(map[ResourceType][]Operation, len(toolOperations))
	for rt, ops := range toolOperations {
		m[rt] = ops
	}
	m[Cluster] = append(append([]Operation(nil), toolOperations[Cluster]...), Delete)
	return m
}()

// Supported reports whether a binding may name op on resources of type
// rt: the operations Kafka checks on that type.
func Supported(rt ResourceType, op Operation) bool {
	if op == All {
		_, ok := supported[rt]
		return ok
	}
	for _, s := range supported[rt] {
		if s == op {
			return true
		}
	}
	return false
}
