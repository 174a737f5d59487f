package splitmerge

import "github.com/twmb/franz-go/pkg/kerr"

// spot is where one entry of the client's request went: into a part, at a
// topic and index of that part's request, or nowhere, answered by the
// proxy with code.
type spot struct {
	part       int32 // index in Plan.Parts, or -1
	topic, idx int32
	code       int16
	msg        *string // with code, for the entries that carry one
}

// router places the entries of a request keyed by topic and partition
// into parts, one per node, each keeping the client's order. A topic
// whose partitions have several leaders becomes one topic entry in each
// of their parts; consecutive partitions of one topic for the same node
// share an entry.
type router struct {
	nodes     []int32 // part -> node
	lastTopic []int   // part -> the client topic of its last topic entry
	spots     []spot  // one per client entry, in the client's order
	stale     bool
}

// leaderCode is Kafka's answer for a partition that node (a View.Leader
// result below zero) does not place: its leader is unknown, or its topic
// is.
func leaderCode(node int32, byID bool) int16 {
	switch {
	case node != UnknownPartition:
		return kerr.NotLeaderForPartition.Code
	case byID:
		return kerr.UnknownTopicID.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// place records the next client entry, of client topic ct, led by node.
// For a node below zero it records the local answer and reports !ok.
// Otherwise it returns the part for node, whether the part needs a new
// topic entry for it, and whether the part is new; the caller appends the
// entry and then calls at.
func (r *router) place(node int32, ct int, byID bool) (part int, newTopic, newPart, ok bool) {
	if node < 0 {
		r.answered(answer{code: leaderCode(node, byID), stale: true})
		return 0, false, false, false
	}
	for i, n := range r.nodes {
		if n == node {
			newTopic = r.lastTopic[i] != ct
			r.lastTopic[i] = ct
			r.spots = append(r.spots, spot{part: int32(i)})
			return i, newTopic, false, true
		}
	}
	r.nodes = append(r.nodes, node)
	r.lastTopic = append(r.lastTopic, ct)
	r.spots = append(r.spots, spot{part: int32(len(r.nodes) - 1)})
	return len(r.nodes) - 1, true, true, true
}

// answer is what the proxy answers an entry it sends nowhere: code and,
// when it is not empty, msg; stale when the view was at a loss.
type answer struct {
	code  int16
	msg   string
	stale bool
}

// answered records the next client entry as answered by the proxy.
func (r *router) answered(a answer) {
	s := spot{part: -1, code: a.code}
	if a.msg != "" {
		s.msg = &a.msg
	}
	r.spots = append(r.spots, s)
	r.stale = r.stale || a.stale
}

// at records where the entry last placed sits in its part's request.
func (r *router) at(topic, idx int) {
	s := &r.spots[len(r.spots)-1]
	s.topic, s.idx = int32(topic), int32(idx)
}

// entryKey names one partition of a response: by topic id when the
// request names topics by id, else by name.
type entryKey struct {
	topic     string
	id        [16]byte
	partition int32
}

type pos struct{ t, p int32 }

// index finds the entries of one part's response for the client's
// entries, which it is asked for in the order of the part's request. A
// broker usually answers in that order, so while it has, the entry at
// the spot's own position is taken; from the first that is not where it
// was asked (a broker that answers in another order, or leaves an entry
// out), the response is indexed by key, and each client entry takes the
// first entry of its key not taken yet. Each response entry is taken at
// most once, and a key asked for twice is answered in the order the
// broker answered it.
type index[T, P any] struct {
	topics []T
	parts  func(*T) []P
	tkey   func(*T) (string, [16]byte)
	pnum   func(*P) int32
	byID   bool

	base   []int32 // topic -> the flat number of its first entry
	used   []bool  // by flat number
	missed bool    // an entry was not at its position

	// Built at the first miss: the first entry of each key, and for
	// each entry the next of the same key (-1: none), by flat number.
	first map[entryKey]int32
	next  []int32
	at    []pos
}

func newIndex[T, P any](topics []T, byID bool, parts func(*T) []P, tkey func(*T) (string, [16]byte), pnum func(*P) int32) *index[T, P] {
	x := &index[T, P]{topics: topics, parts: parts, tkey: tkey, pnum: pnum, byID: byID}
	x.base = make([]int32, len(topics))
	n := int32(0)
	for i := range topics {
		x.base[i] = n
		n += int32(len(parts(&topics[i])))
	}
	x.used = make([]bool, n)
	return x
}

func (x *index[T, P]) key(t *T, p *P) entryKey {
	name, id := x.tkey(t)
	if x.byID {
		return entryKey{id: id, partition: x.pnum(p)}
	}
	return entryKey{topic: name, partition: x.pnum(p)}
}

// take returns the response entry for the client's entry k, expected at
// hint, or nil when the response has none left for it.
func (x *index[T, P]) take(k entryKey, hint pos) *P {
	if !x.missed && int(hint.t) < len(x.topics) {
		t := &x.topics[hint.t]
		ps := x.parts(t)
		if int(hint.p) < len(ps) && x.key(t, &ps[hint.p]) == k {
			x.used[x.base[hint.t]+hint.p] = true
			return &ps[hint.p]
		}
	}
	x.missed = true
	if len(x.used) <= smallIndex {
		for i := range x.topics {
			t := &x.topics[i]
			ps := x.parts(t)
			for j := range ps {
				if f := x.base[i] + int32(j); !x.used[f] && x.key(t, &ps[j]) == k {
					x.used[f] = true
					return &ps[j]
				}
			}
		}
		return nil
	}
	if x.first == nil {
		x.build()
	}
	f, ok := x.first[k]
	if !ok {
		return nil
	}
	for ; f >= 0; f = x.next[f] {
		if !x.used[f] {
			x.used[f] = true
			at := x.at[f]
			return &x.parts(&x.topics[at.t])[at.p]
		}
	}
	return nil
}

// smallIndex is the most entries a response is searched through rather
// than indexed: below it a scan costs less than a map. A variable only so
// that tests can take either way.
var smallIndex = 16

// build indexes the response by key, walking it backwards so that each
// key's first entry is the one left in the map and the chain runs
// forwards: three allocations whatever its size.
func (x *index[T, P]) build() {
	n := len(x.used)
	x.first = make(map[entryKey]int32, n)
	x.next = make([]int32, n)
	x.at = make([]pos, n)
	for i := len(x.topics) - 1; i >= 0; i-- {
		t := &x.topics[i]
		ps := x.parts(t)
		for j := len(ps) - 1; j >= 0; j-- {
			f := x.base[i] + int32(j)
			x.at[f] = pos{int32(i), int32(j)}
			k := x.key(t, &ps[j])
			if later, ok := x.first[k]; ok {
				x.next[f] = later
			} else {
				x.next[f] = -1
			}
			x.first[k] = f
		}
	}
}

// clientKey is the entryKey of a client's entry.
func clientKey(topic string, id [16]byte, partition int32, byID bool) entryKey {
	if byID {
		return entryKey{id: id, partition: partition}
	}
	return entryKey{topic: topic, partition: partition}
}
