package sni

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestPatternNamesAndMatches(t *testing.T) {
	p, err := ParsePattern("Broker-{id}.Kafka.Example.com.")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "broker-{id}.kafka.example.com" {
		t.Fatalf("String() = %q", got)
	}
	for _, id := range []int32{0, 1, 9, 10, 2 << 20, math.MaxInt32} {
		name := p.Name(id)
		got, ok := p.Match(name)
		if !ok || got != id {
			t.Errorf("Match(Name(%d) = %q) = %d, %v", id, name, got, ok)
		}
	}
	for _, name := range []string{
		"broker-.kafka.example.com",           // no id
		"broker-01.kafka.example.com",         // leading zero
		"broker-+1.kafka.example.com",         // sign
		"broker--1.kafka.example.com",         // negative
		"broker-2147483648.kafka.example.com", // past int32
		"broker-99999999999.kafka.example.com",
		"broker-1a.kafka.example.com",
		"broker-1.kafka.example.org",
		"xbroker-1.kafka.example.com",
		"broker-1.kafka.example.com.evil",
		"broker-1.kafka.example.com.", // Match takes normalized names
		"",
	} {
		if id, ok := p.Match(name); ok {
			t.Errorf("Match(%q) = %d, true", name, id)
		}
	}
	if _, ok := (Pattern{}).Match("0"); ok {
		t.Error("the zero Pattern matched")
	}
}

func TestParsePatternRefuses(t *testing.T) {
	for _, s := range []string{
		"", "broker.kafka.example.com", "{id}{id}.example.com",
		"broker-{id}..example.com", ".broker-{id}.example.com", "*.{id}.example.com",
		"broker_{id}.example.com", "-{id}.example.com", "{id}-.example.com",
		strings.Repeat("a", 60) + "{id}.example.com", // node 2147483647 makes a label of 70 characters
		"broker {id}.example.com", "broker-{id}.example.com:9092",
	} {
		if p, err := ParsePattern(s); err == nil || !errors.Is(err, ErrBadPattern) {
			t.Errorf("ParsePattern(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"{id}", "b{id}", "broker-{id}", "{id}.brokers.example.com", "kafka-{id}-0.example.com"} {
		if _, err := ParsePattern(s); err != nil {
			t.Errorf("ParsePattern(%q): %v", s, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, s := range []string{"bootstrap", "kafka.example.com", "KAFKA.example.com.", "a-b.c1"} {
		if err := CheckName(s); err != nil {
			t.Errorf("CheckName(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", ".", "a..b", "*.example.com", "-a.b", "a_b", "a b", strings.Repeat("a", 64), strings.Repeat("a.", 127) + "ab", "host:9092"} {
		if err := CheckName(s); err == nil {
			t.Errorf("CheckName(%q) = nil", s)
		}
	}
}

func TestCoversAndOverlaps(t *testing.T) {
	mustPattern := func(s string) Pattern {
		p, err := ParsePattern(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	node := mustPattern("broker-{id}.kafka.example.com")
	for name, want := range map[string]bool{
		"broker-1.kafka.example.com":  true,
		"broker-01.kafka.example.com": true, // not a node's name, but looks like one
		"broker.kafka.example.com":    false,
		"bootstrap.kafka.example.com": false,
		"broker-1x.kafka.example.com": false,
	} {
		if got := node.Covers(name); got != want {
			t.Errorf("Covers(%q) = %v", name, got)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"broker-{id}.kafka.example.com", "controller-{id}.kafka.example.com", false},
		{"broker-{id}.kafka.example.com", "broker-{id}.kafka.example.com", true},
		{"b{id}.example.com", "b1{id}.example.com", true},              // b15 is both
		{"b{id}.example.com", "b{id}1.example.com", true},              // b21 is both
		{"b{id}.example.com", "b{id}x.example.com", false},             // b1 vs b1x
		{"{id}.example.com", "{id}.brokers.example.com", false},        // a label of digits is not "brokers"
		{"{id}.example.com", "1{id}.example.com", true},                // 15
		{"b-{id}.example.com", "b-{id}-c.example.com", false},          // the dash after the digits
		{"node{id}", "node{id}0", true},                                // node10
		{"kafka-{id}-0.example.com", "kafka-0-{id}.example.com", true}, // kafka-0-0
	} {
		a, b := mustPattern(tc.a), mustPattern(tc.b)
		if got := Overlaps(a, b); got != tc.want {
			t.Errorf("Overlaps(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := Overlaps(b, a); got != tc.want {
			t.Errorf("Overlaps(%s, %s) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	node, _ := ParsePattern("broker-{id}.kafka.example.com")
	ctl, _ := ParsePattern("controller-{id}.kafka.example.com")
	n := Names{Bootstrap: "bootstrap.kafka.example.com", Node: node, Controller: ctl}
	for name, want := range map[string]struct {
		role Role
		id   int32
	}{
		"bootstrap.kafka.example.com":    {RoleBootstrap, 0},
		"BOOTSTRAP.Kafka.Example.Com":    {RoleBootstrap, 0},
		"bootstrap.kafka.example.com.":   {RoleBootstrap, 0},
		"broker-7.kafka.example.com":     {RoleNode, 7},
		"Broker-7.KAFKA.example.com.":    {RoleNode, 7},
		"controller-3.kafka.example.com": {RoleController, 3},
		"broker-07.kafka.example.com":    {RoleNone, 0},
		"kafka.example.com":              {RoleNone, 0},
		"":                               {RoleNone, 0},
		".":                              {RoleNone, 0},
	} {
		role, id := n.Resolve(name)
		if role != want.role || id != want.id {
			t.Errorf("Resolve(%q) = %v, %d; want %v, %d", name, role, id, want.role, want.id)
		}
	}
	var zero Names
	if role, _ := zero.Resolve("broker-1.kafka.example.com"); role != RoleNone {
		t.Errorf("the zero Names resolved a name to %v", role)
	}
}

// FuzzMatch: a name matches at most one id, and that id's name is the
// name; whatever matches is covered.
func FuzzMatch(f *testing.F) {
	f.Add("broker-{id}.kafka.example.com", "broker-12.kafka.example.com")
	f.Add("{id}", "0")
	f.Add("b{id}", "b2147483647")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		id, ok := p.Match(name)
		if !ok {
			return
		}
		if id < 0 || p.Name(id) != name {
			t.Fatalf("Match(%q) = %d, whose name is %q", name, id, p.Name(id))
		}
		if !p.Covers(name) || CheckName(name) != nil {
			t.Fatalf("%q matches but is not covered, or not a DNS name", name)
		}
	})
}
