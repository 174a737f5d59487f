package acl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/inorder-proxy/inorder/internal/yamlout"
)

// The ACL file is YAML: a list under `acls:`, each entry with the field
// names of Kafka's ACL bindings:
//
//	acls:
//	  - principal: User:alice
//	    host: "*"                # default
//	    resourceType: TOPIC      # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
//	    resourceName: orders     # kafka-cluster for CLUSTER, its default
//	    patternType: LITERAL     # default; or PREFIXED
//	    operation: WRITE
//	    permissionType: ALLOW    # default; or DENY
//
// Values are read in any case, with or without underscores (WRITE,
// Write, IdempotentWrite, IDEMPOTENT_WRITE), as Kafka's tools accept them.
// An unknown key, a key given twice, a missing field or a bad value is an
// error naming the file and line.

// Load reads and parses the ACL file at path.
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ACL file: %w", err)
	}
	return Parse(path, data)
}

// Parse reads an ACL file's contents; name is the file's name, for the
// errors. An empty document is an error, not an empty set, so that a file
// caught half written never denies everyone: `acls: []` says that.
func Parse(name string, data []byte) (*Set, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrInvalid, err)
	}
	// A second document would be ignored; say so instead.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return nil, fmt.Errorf("%s:%d: %w: a second YAML document; an ACL file holds one", name, line, ErrInvalid)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: %w: empty file; an ACL file holds a list under acls: (acls: [] denies everyone)", name, ErrInvalid)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, at(name, root, "expected a mapping with the key acls")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "acls" || k.Kind != yaml.ScalarNode {
			return nil, at(name, k, "unknown key %q: the file's only key is acls", k.Value)
		}
		if list != nil {
			return nil, at(name, k, "acls given twice")
		}
		list = v
	}
	if list == nil {
		return nil, at(name, root, "no acls: key")
	}
	if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return newSet(nil), nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, at(name, list, "acls: expected a list of bindings")
	}
	bindings := make([]Binding, 0, len(list.Content))
	for _, n := range list.Content {
		b, err := parseBinding(name, n)
		if err != nil {
			return nil, err
		}
		bindings = append(bindings, b)
	}
	return newSet(bindings), nil
}

func at(name string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %w: %s", name, n.Line, ErrInvalid, fmt.Sprintf(format, args...))
}

// The keys of a binding in the file.
const (
	keyPrincipal      = "principal"
	keyHost           = "host"
	keyResourceType   = "resourceType"
	keyResourceName   = "resourceName"
	keyPatternType    = "patternType"
	keyOperation      = "operation"
	keyPermissionType = "permissionType"
)

func parseBinding(name string, n *yaml.Node) (Binding, error) {
	if n.Kind != yaml.MappingNode {
		return Binding{}, at(name, n, "expected a binding: a mapping with principal, resourceType, resourceName, operation")
	}
	vals := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case keyPrincipal, keyHost, keyResourceType, keyResourceName, keyPatternType, keyOperation, keyPermissionType:
		default:
			return Binding{}, at(name, k, "unknown key %q: a binding's keys are principal, host, resourceType, resourceName, patternType, operation, permissionType", k.Value)
		}
		if _, dup := vals[k.Value]; dup {
			return Binding{}, at(name, k, "%s given twice", k.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return Binding{}, at(name, v, "%s: expected a value", k.Value)
		}
		vals[k.Value] = v
	}
	b := Binding{Host: Wildcard, PatternType: Literal, Permission: Allow}
	for _, req := range []string{keyPrincipal, keyResourceType, keyOperation} {
		if vals[req] == nil {
			return Binding{}, at(name, n, "missing %s", req)
		}
	}
	var ok bool
	v := vals[keyResourceType]
	if b.ResourceType, ok = ParseResourceType(v.Value); !ok || b.ResourceType == AnyResource {
		return Binding{}, at(name, v, "resourceType %q: expected TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER", v.Value)
	}
	if v = vals[keyOperation]; true {
		if b.Operation, ok = ParseOperation(v.Value); !ok || b.Operation == AnyOperation {
			return Binding{}, at(name, v, "operation %q: expected one of %s", v.Value, allOperations())
		}
	}
	if v = vals[keyPatternType]; v != nil {
		if b.PatternType, ok = ParsePatternType(v.Value); !ok || (b.PatternType != Literal && b.PatternType != Prefixed) {
			return Binding{}, at(name, v, "patternType %q: expected LITERAL or PREFIXED", v.Value)
		}
	}
	if v = vals[keyPermissionType]; v != nil {
		if b.Permission, ok = ParsePermission(v.Value); !ok || (b.Permission != Allow && b.Permission != Deny) {
			return Binding{}, at(name, v, "permissionType %q: expected ALLOW or DENY", v.Value)
		}
	}
	if v = vals[keyHost]; v != nil {
		b.Host = strings.TrimSpace(v.Value)
	}
	b.Principal = strings.TrimSpace(vals[keyPrincipal].Value)
	switch v = vals[keyResourceName]; {
	case v != nil:
		b.ResourceName = v.Value
	case b.ResourceType == Cluster:
		b.ResourceName = ClusterName
	default:
		return Binding{}, at(name, n, "missing resourceName")
	}
	if err := b.Validate(); err != nil {
		line := n
		var fe *FieldError
		if errors.As(err, &fe) && vals[fe.Field] != nil {
			line = vals[fe.Field]
		}
		return Binding{}, fmt.Errorf("%s:%d: %w", name, line.Line, err)
	}
	return b, nil
}

func allOperations() string {
	var s []string
	for o := All; o <= TwoPhaseCommit; o++ {
		s = append(s, strings.ToUpper(operationNames[o]))
	}
	return strings.Join(s, ", ")
}

// Format writes a set as an ACL file that Parse reads back to the same
// bindings, every field given. The nodes are built with yamlout.Str: a
// group or transactional id may hold characters the emitter alone writes
// so that they do not read back.
func Format(s *Set) []byte {
	str := yamlout.Str
	list := &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{}}
	for _, b := range s.Bindings() {
		list.Content = append(list.Content, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("principal"), str(b.Principal),
			str("host"), str(b.Host),
			str("resourceType"), str(resourceNames[b.ResourceType]),
			str("resourceName"), str(b.ResourceName),
			str("patternType"), str(patternNames[b.PatternType]),
			str("operation"), str(operationNames[b.Operation]),
			str("permissionType"), str(permissionNames[b.Permission]),
		}})
	}
	data, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("acls"), list}})
	if err != nil {
		// A tree of string scalars always marshals.
		panic(err)
	}
	return data
}
