package config

import (
	"sort"
	"strings"
)

// Suggest returns the name in known that name most likely misspells, for
// a "did you mean" after an unknown flag or key, or "" when none is close
// enough to be worth a guess: within two edits (one for a name of four
// letters or fewer, where two edits make another word), or else the one
// known name that name begins (--retention matches two, so neither). Case
// and the choice of _ for - do not count.
func Suggest(name string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	n := norm(name)
	if n == "" {
		return ""
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	most := 2
	if len(n) <= 4 {
		most = 1
	}
	best, bestDist := "", most+1
	var prefixed []string
	for _, k := range sorted {
		if k == name {
			continue
		}
		if d := editDistance(n, norm(k)); d < bestDist {
			best, bestDist = k, d
		}
		if len(n) >= 3 && strings.HasPrefix(norm(k), n) {
			prefixed = append(prefixed, k)
		}
	}
	if best != "" {
		return best
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b: the fewest
// single-byte insertions, deletions and substitutions that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
