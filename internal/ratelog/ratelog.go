// Package ratelog keeps repeated failures from flooding the log: one line
// per kind of failure every Every, with a count of those held back.
package ratelog

import (
	"sync"
	"time"
)

// Every is how often one kind of repeated failure may be logged; a
// scanner or a misconfigured client fleet must not flood the log.
const Every = 10 * time.Second

// Log lets one log line per kind through every Every and counts the ones
// it held back. Kinds are a small fixed set of reasons, never a client's
// address, so its maps stay small. The zero value is ready.
type Log struct {
	mu      sync.Mutex
	next    map[string]time.Time
	skipped map[string]int
}

// Allow reports whether a line of this kind may be logged now, and how
// many were held back since the last one.
func (r *Log) Allow(kind string, now time.Time) (skipped int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next, r.skipped = make(map[string]time.Time), make(map[string]int)
	}
	if now.Before(r.next[kind]) {
		r.skipped[kind]++
		return 0, false
	}
	r.next[kind] = now.Add(Every)
	skipped = r.skipped[kind]
	delete(r.skipped, kind)
	return skipped, true
}
