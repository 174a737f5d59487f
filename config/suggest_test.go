package config

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"upstream", "upstream-ordering", "max-in-flight", "max-memory", "listen", "retention-bytes", "retention-time", "upstream-sasl-password-file", "tls-key", "tls-cert"}
	for _, tc := range []struct{ name, want string }{
		{"upstrem", "upstream"},
		{"max-inflight", "max-in-flight"},
		{"max_in_flight", "max-in-flight"},
		{"Max-In-Flight", "max-in-flight"},
		{"lisen", "listen"},
		{"upstream-sasl-password", "upstream-sasl-password-file"}, // the one name it begins
		{"retention", ""},                                         // begins two names
		{"tls-kee", "tls-key"},
		{"tlz", ""}, // too short for a guess at two edits
		{"bogus", ""},
		{"upstream", ""}, // known: nothing to suggest
		{"", ""},
	} {
		if got := Suggest(tc.name, known); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"upstrem", "upstream", 1}, {"max-inflight", "max-in-flight", 1}, {"flaw", "lawn", 2},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
