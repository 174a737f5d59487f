// Package sni owns the names of the SNI topology, where every client
// connection reaches the proxy on one TLS port and the server name of its
// ClientHello says which broker it wants: one name for the bootstrap, and a
// pattern with the node id in it for the brokers (and one for the KRaft
// controllers). It parses and checks the names and patterns the operator
// gives, writes the name of a node, and reads a node id back from a name a
// client sent. It knows nothing of sockets or TLS.
//
// Names are compared as DNS names are: without regard to case, and without
// a trailing dot. A node id in a name is a decimal int32 written without a
// sign or leading zeros, so each id has exactly one name and each name at
// most one id.
package sni

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// IDPlaceholder stands for the node id in a pattern.
const IDPlaceholder = "{id}"

// maxName is the longest DNS name (RFC 1035, without the trailing dot).
const maxName = 253

// maxLabel is the longest DNS label.
const maxLabel = 63

// Errors returned for names and patterns that cannot be used. Each
// wrapping error adds the reason.
var (
	// ErrBadName: not a DNS name a client can send as its server name.
	ErrBadName = errors.New("not a usable server name")
	// ErrBadPattern: a pattern without exactly one {id}, or one whose
	// names are not DNS names.
	ErrBadPattern = errors.New("not a usable name pattern")
)

// Normalize returns name as it is compared: lower case, without a trailing
// dot.
func Normalize(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// CheckName returns nil when name is a DNS name (letters, digits and
// hyphens in labels of at most 63 characters, no label starting or ending
// with a hyphen, at most 253 characters), and otherwise why it is not. A
// single label is a name too.
func CheckName(name string) error {
	n := Normalize(name)
	switch {
	case n == "":
		return fmt.Errorf("%w: it is empty", ErrBadName)
	case len(n) > maxName:
		return fmt.Errorf("%w: longer than %d characters", ErrBadName, maxName)
	}
	for label := range strings.SplitSeq(n, ".") {
		if err := checkLabel(label); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(label string) error {
	switch {
	case label == "":
		return fmt.Errorf("%w: it has an empty label (two dots, or a leading dot)", ErrBadName)
	case len(label) > maxLabel:
		return fmt.Errorf("%w: label %q is longer than %d characters", ErrBadName, label, maxLabel)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("%w: label %q starts or ends with a hyphen", ErrBadName, label)
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q is not a letter, digit, hyphen or dot", ErrBadName, string(c))
		}
	}
	return nil
}

// Pattern is a name with the node id in it, such as
// broker-{id}.kafka.example.com. The zero value matches nothing.
type Pattern struct {
	prefix, suffix string // normalized, around {id}
	set            bool
}

// ParsePattern reads a pattern: a DNS name with {id} once where the node
// id goes. The names it gives must be DNS names for every int32 id.
func ParsePattern(s string) (Pattern, error) {
	n := Normalize(s)
	if c := strings.Count(n, IDPlaceholder); c != 1 {
		return Pattern{}, fmt.Errorf("%w: it must contain %s once, where the node id goes (like broker-%s.kafka.example.com)", ErrBadPattern, IDPlaceholder, IDPlaceholder)
	}
	prefix, suffix, _ := strings.Cut(n, IDPlaceholder)
	p := Pattern{prefix: prefix, suffix: suffix, set: true}
	for _, id := range []int32{0, math.MaxInt32} {
		if err := CheckName(p.Name(id)); err != nil {
			return Pattern{}, fmt.Errorf("%w: node %d would be %q, which is %w", ErrBadPattern, id, p.Name(id), err)
		}
	}
	return p, nil
}

// IsZero reports whether p is the zero Pattern.
func (p Pattern) IsZero() bool { return !p.set }

// String returns the pattern as ParsePattern reads it.
func (p Pattern) String() string {
	if !p.set {
		return ""
	}
	return p.prefix + IDPlaceholder + p.suffix
}

// Name returns the name of node id: the pattern with the id written in
// decimal.
func (p Pattern) Name(id int32) string {
	return p.prefix + strconv.FormatInt(int64(id), 10) + p.suffix
}

// Match returns the node id that a normalized name gives, and whether the
// name is this pattern's name for a node: the part between the prefix and
// the suffix must be a decimal int32 without a sign or leading zeros.
func (p Pattern) Match(name string) (int32, bool) {
	if !p.set || len(name) <= len(p.prefix)+len(p.suffix) ||
		!strings.HasPrefix(name, p.prefix) || !strings.HasSuffix(name, p.suffix) {
		return 0, false
	}
	digits := name[len(p.prefix) : len(name)-len(p.suffix)]
	if len(digits) > 10 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var id int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		id = id*10 + int64(c-'0')
	}
	if id > math.MaxInt32 {
		return 0, false
	}
	return int32(id), true
}

// Covers reports whether name (normalized) has the shape of p's names with
// any run of digits for the id, leading zeros and values past int32
// included: a name that only Covers would match cannot serve as another
// name without confusing those who read it.
func (p Pattern) Covers(name string) bool {
	if !p.set || len(name) <= len(p.prefix)+len(p.suffix) ||
		!strings.HasPrefix(name, p.prefix) || !strings.HasSuffix(name, p.suffix) {
		return false
	}
	for _, c := range []byte(name[len(p.prefix) : len(name)-len(p.suffix)]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Overlaps reports whether some name has the shape of both patterns (as
// Covers reads it), so that a client's name could not say which of the two
// it means. It walks the two patterns side by side as automata over the
// characters they use; any digit may stand for the id.
func Overlaps(a, b Pattern) bool {
	if !a.set || !b.set {
		return false
	}
	alphabet := map[byte]bool{}
	for _, s := range []string{a.prefix, a.suffix, b.prefix, b.suffix, "0123456789"} {
		for i := 0; i < len(s); i++ {
			alphabet[s[i]] = true
		}
	}
	type pair struct{ x, y int }
	na, nb := a.automaton(), b.automaton()
	seen := map[pair]bool{{0, 0}: true}
	queue := []pair{{0, 0}}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if na.accepts(q.x) && nb.accepts(q.y) {
			return true
		}
		for c := range alphabet {
			for _, x := range na.next(q.x, c) {
				for _, y := range nb.next(q.y, c) {
					if r := (pair{x, y}); !seen[r] {
						seen[r] = true
						queue = append(queue, r)
					}
				}
			}
		}
	}
	return false
}

// automaton is a pattern read as a small automaton: states 0..len(prefix)
// read the prefix, the state after it reads at least one digit, and one
// state per suffix character follows.
type automaton struct{ prefix, suffix string }

func (p Pattern) automaton() automaton { return automaton{p.prefix, p.suffix} }

// digits is the state that has read the prefix and at least one digit.
func (m automaton) digits() int { return len(m.prefix) + 1 }

func (m automaton) accepts(s int) bool { return s == m.digits()+len(m.suffix) }

// next returns the states s moves to on c.
func (m automaton) next(s int, c byte) []int {
	isDigit := c >= '0' && c <= '9'
	d := m.digits()
	switch {
	case s < len(m.prefix):
		if m.prefix[s] == c {
			return []int{s + 1}
		}
	case s == len(m.prefix):
		if isDigit {
			return []int{d}
		}
	case s == d:
		var out []int
		if isDigit {
			out = append(out, d)
		}
		if len(m.suffix) > 0 && m.suffix[0] == c {
			out = append(out, d+1)
		}
		return out
	case s < d+len(m.suffix):
		if m.suffix[s-d] == c {
			return []int{s + 1}
		}
	}
	return nil
}

// Role is what a server name stands for.
type Role uint8

// Roles.
const (
	RoleNone       Role = iota // no name of the proxy's
	RoleBootstrap              // the bootstrap name
	RoleNode                   // a broker's name
	RoleController             // a controller's name
)

// Names are the names one proxy answers to. The zero value answers to none.
type Names struct {
	// Bootstrap is the bootstrap name, normalized.
	Bootstrap string
	// Node gives each broker its name.
	Node Pattern
	// Controller gives each KRaft controller its name; zero: none.
	Controller Pattern
}

// Resolve returns what name, as a client sent it, stands for, and the node
// id it carries for a broker or a controller.
func (n *Names) Resolve(name string) (Role, int32) {
	name = Normalize(name)
	if name == "" {
		return RoleNone, 0
	}
	if name == n.Bootstrap {
		return RoleBootstrap, 0
	}
	if id, ok := n.Node.Match(name); ok {
		return RoleNode, id
	}
	if id, ok := n.Controller.Match(name); ok {
		return RoleController, id
	}
	return RoleNone, 0
}
