// Package yamlout builds YAML nodes whose strings read back as written.
//
// yaml.v3's emitter writes some strings as blocks that do not read back:
// a string of line breaks alone comes back shorter or empty, and one with
// a tab before a line break does not parse. Encoding a value into a
// yaml.Node goes through the same emitter, so the nodes are built by hand
// with Str. Such strings can name Kafka resources (group and
// transactional ids hold any character), and the files the proxy writes
// for operators must read back as the same names.
package yamlout

import (
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Str is a string scalar, written double-quoted (the one style in which
// yaml.v3 escapes) when it holds a character not printable.
func Str(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}
