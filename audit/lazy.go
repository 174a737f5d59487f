package audit

import "unicode/utf8"

// lazyEvent is an event queued before it is encoded: the queue encodes
// the events waiting for its sinks together, in the sink's goroutine, just
// before they are written (see Queue.encode). A connection's reader then
// only copies the event; encoding one event at a time between two 1 MiB
// splices found its code and data out of the caches every time and cost
// several times what encoding a run of them does.
type lazyEvent struct {
	e   Event
	src *Source
	// seq is the event's id, drawn when it was recorded, so that ids
	// follow the order of recording whichever way an event is encoded.
	seq uint64
	// bound is at least the length of the event's encoding (eventBound).
	bound int
	// one and onePart hold the resource and partition of an event of one
	// resource with at most one partition (a consumer's Fetch of one
	// partition, say) without allocations of their own.
	one     [1]Resource
	onePart [1]Partition
}

// encode appends the event's encoding to b.
func (l *lazyEvent) encode(b []byte) []byte {
	return appendEvent(b, l.src.instance, l.seq, &l.e)
}

// Upper bounds of what the fixed parts of an encoding take: every key and
// punctuation, the longest API name, 20 characters for any integer, 35
// for a time. eventFixed covers an event's fields that are not strings of
// the event (and the escaped strings are added apart); resourceFixed and
// partitionFixed one resource and one partition with its separator.
// TestEventBound holds them to AppendEvent.
const (
	eventFixed     = 1024
	resourceFixed  = 256
	partitionFixed = 256
)

// jsonLen returns an upper bound of s's length once escaped for a JSON
// string: its length when no byte needs escaping or replacing, else six
// bytes a byte (\u00XX, \ufffd and \u2028 are each at most six bytes for
// one to three bytes of s).
func jsonLen(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return 6 * len(s)
		}
	}
	return len(s)
}

// eventBound returns an upper bound of the length of e's encoding with an
// id of src. It is also an upper bound of the memory a lazyEvent of e
// holds: its structures take less than the fixed parts' bounds.
func eventBound(src *Source, e *Event) int {
	n := eventFixed + jsonLen(src.instance) + 2*jsonLen(e.Listener) + jsonLen(e.Principal) +
		jsonLen(e.ClientAddress) + jsonLen(e.ClientID) + jsonLen(e.Mechanism) + jsonLen(e.ClaimedPrincipal) +
		jsonLen(e.TLSSubject) + jsonLen(e.Reason)
	for i := range e.Resources {
		r := &e.Resources[i]
		n += resourceFixed + jsonLen(r.Type) + jsonLen(r.Name) + jsonLen(r.Operation) + partitionFixed*len(r.Partitions)
	}
	if len(e.Resources) > 0 { // the first resource's fields, again at the top
		r := &e.Resources[0]
		n += jsonLen(r.Type) + jsonLen(r.Name) + jsonLen(r.Operation)
	}
	return n
}

// ownEvent returns a lazyEvent of e that shares none of e's slices (the
// caller reuses them once Request returns; strings are immutable and
// kept as they are).
func ownEvent(src *Source, e *Event, bound int) *lazyEvent {
	l := &lazyEvent{e: *e, src: src, seq: src.seq.Add(1), bound: bound}
	if len(e.Resources) == 0 {
		l.e.Resources = nil
		return l
	}
	parts := 0
	for i := range e.Resources {
		parts += len(e.Resources[i].Partitions)
	}
	res := l.one[:]
	if len(e.Resources) > 1 {
		res = make([]Resource, len(e.Resources))
	}
	copy(res, e.Resources)
	ps := l.onePart[:0]
	if parts > 1 {
		ps = make([]Partition, 0, parts)
	}
	for i := range res {
		if len(res[i].Partitions) == 0 {
			res[i].Partitions = nil
			continue
		}
		at := len(ps)
		ps = append(ps, res[i].Partitions...)
		res[i].Partitions = ps[at:len(ps):len(ps)]
	}
	l.e.Resources = res
	return l
}
