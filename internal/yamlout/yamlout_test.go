package yamlout

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// The names yaml.v3's emitter writes wrongly from a plain string, and
// others, read back as themselves, as values and as keys.
func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"\n", "\n\n", "\t\n", " \n", "a\tb", "\u0085", "\x00", "\u2028", "plain", "", "'", "\"", "- x", "a: b", "<default>"} {
		n := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{Str(s), Str(s)}}
		out, err := yaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := yaml.Unmarshal(out, &got); err != nil || len(got) != 1 || got[s] != s {
			t.Fatalf("%q written as %q read back as %q, %v", s, out, got, err)
		}
	}
}

// A printable name keeps the emitter's plain style: the files stay as an
// operator would write them.
func TestPlainStaysPlain(t *testing.T) {
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{Str("user"), Str("alice")}})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "user: alice\n" {
		t.Fatalf("got %q", out)
	}
}
