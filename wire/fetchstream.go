package wire

import (
	"github.com/twmb/franz-go/pkg/kbin"
)

// FetchStream scans a Fetch response that passes through in pieces,
// without holding it: the caller shows it the bytes between record sets
// (the top fields, topic and partition headers, aborted transactions, tag
// sections) and moves the records, and any other field the scan needs
// nothing from, itself. It stops where the topics end: what follows is the
// response's tag section, where KIP-951 node endpoints live, which the
// caller reads whole and scans with ScanFetchTail.
//
// It mirrors kmsg's FetchResponse reader field for field, as ScanEndpoints
// does, and fails where kmsg fails: every array length is checked against
// the bytes left in the whole body, not in the window, and a known tag's
// struct (a partition's diverging epoch, current leader, snapshot id) is
// checked as kmsg decodes it. The zero value is ready for Start; it
// allocates nothing.
type FetchStream struct {
	version  int16
	flexible bool
	left     int64 // body bytes from the resume point on
	at       fetchAt
	topics   int32  // topics not yet started
	parts    int32  // partitions of the current topic not yet started
	aborted  int32  // aborted transactions of the current partition not yet read
	tags     uint32 // tags of the current tag section not yet read
	// partTags: the current tag section is a partition's, whose tags 0-2
	// hold structs; after is where the section leads.
	partTags bool
	after    fetchAt
	// report: steps stop at each topic and partition (Report); code is
	// the response's error, partition and partCode the current
	// partition's.
	report    bool
	code      int16
	partition int32
	partCode  int16
}

type fetchAt uint8

const (
	fetchTop       fetchAt = iota // throttle, error, session, topic count
	fetchTopic                    // the next topic, or the end of the topics
	fetchParts                    // a topic's partition count, after its name or id
	fetchPartition                // the next partition, or the topic's tags
	fetchAborted                  // the next aborted transaction, or the records
	fetchTagCount                 // a tag section's count
	fetchTag                      // the next tag of a section, or its end
)

// FetchStep is what one call of FetchStream.Next found.
type FetchStep struct {
	// Used: the first Used bytes of the window were scanned (opaque
	// fields that lay wholly in it included).
	Used int
	// Pass: the Pass bytes after them are a field the scan needs nothing
	// from (a partition's records, a topic name, an unknown tag's value)
	// that does not lie wholly in the window; the caller moves them
	// unseen, and the next window starts after them.
	Pass int64
	// End: the topics ended after Used bytes. The rest of the body, Left
	// bytes, is the response's tag section (in flexible versions) and
	// then bytes kmsg ignores.
	End bool
	// Found, when the scan reports (Report): FoundTopic, the step ends
	// after a topic's name (Topic, a slice of the window) or id
	// (TopicID); FoundPartition, the step ends where a partition's
	// records begin, Pass is their length (passed even when they lie in
	// the window; 0 for none) and Partition and ErrorCode are its
	// header's.
	Found     FetchFound
	Topic     []byte
	TopicID   [16]byte
	Partition int32
	ErrorCode int16
}

// FetchFound is what a reporting step ends at.
type FetchFound uint8

const (
	FoundNothing FetchFound = iota
	FoundTopic
	FoundPartition
)

// Start begins a scan of a Fetch response at version whose next bodyLen
// bytes follow. With header, they begin with the response header's tag
// section (in flexible versions), as the bytes after a frame's correlation
// id do; otherwise with the body.
func (s *FetchStream) Start(version int16, bodyLen int64, header bool) {
	*s = FetchStream{version: version, flexible: Flexible(fetchKey, version), left: bodyLen, at: fetchTop}
	if header && s.flexible {
		s.at, s.after = fetchTagCount, fetchTop
	}
}

// Report makes the scan started stop after each topic's name or id and
// where each partition's records begin, so that a caller learns what the
// response returned per partition as it passes; the records themselves,
// however small, are passed to the caller. A topic's name is then never
// passed: it must lie in the window whole.
func (s *FetchStream) Report() { s.report = true }

// ErrorCode returns the response's top-level error code (from v7), once
// the scan is past it.
func (s *FetchStream) ErrorCode() int16 { return s.code }

// Left returns how many bytes of the body follow the resume point: after
// an End step, the length of the tail that ScanFetchTail reads.
func (s *FetchStream) Left() int64 { return s.left }

// Next scans window, the body's bytes from the resume point on (where the
// last step's Used and Pass bytes end). It returns as soon as it can go no
// further in window: at a field it lets the caller pass, at the end of the
// topics, or where window ends inside a field. In that last case it
// returns what it scanned, or ErrNeedMore if it could scan nothing (call
// again with the same bytes and more after them); ErrCannotScan for a body
// kmsg would refuse.
func (s *FetchStream) Next(window []byte) (FetchStep, error) {
	w, whole := clip(window, s.left)
	r := kbin.Reader{Src: w}
	t := *s
	saved, used := t, 0
	// mark records that everything read so far is scanned, and t is
	// the state after it.
	mark := func() { saved, used = t, len(w)-len(r.Src) }
	bodyLeft := func() int64 { return s.left - int64(len(w)-len(r.Src)) }
	// short: window ended inside a field, which the body does too when
	// window reaches its end.
	short := func() (FetchStep, error) {
		switch {
		case whole:
			return FetchStep{}, ErrCannotScan
		case used == 0:
			return FetchStep{}, ErrNeedMore
		}
		*s = saved
		s.left -= int64(used)
		return FetchStep{Used: used}, nil
	}
	// opaque skips l bytes the scan needs nothing from, leading to next:
	// in the window if they lie in it, else passed to the caller.
	opaque := func(l int64, next fetchAt) (FetchStep, bool, error) {
		if l > bodyLeft() {
			return FetchStep{}, true, ErrCannotScan
		}
		t.at = next
		if l <= int64(len(r.Src)) {
			r.Span(int(l))
			mark()
			return FetchStep{}, false, nil
		}
		mark()
		*s = saved
		s.left -= int64(used) + l
		return FetchStep{Used: used, Pass: l}, true, nil
	}
	for {
		switch t.at {
		case fetchTop:
			if t.version >= 1 {
				r.Int32() // throttle
			}
			if t.version >= 7 {
				t.code = r.Int16()
				r.Int32() // session id
			}
			n := streamArrayLen(&r, t.flexible)
			if !r.Ok() {
				return short()
			}
			if tooMany(n, 2, bodyLeft()) || t.version >= topicIDFrom && tooMany(n, 18, bodyLeft()) {
				return FetchStep{}, ErrCannotScan
			}
			t.topics, t.at = max(n, 0), fetchTopic
			mark()
		case fetchTopic:
			if t.topics == 0 {
				mark()
				*s = saved
				s.left -= int64(used)
				return FetchStep{Used: used, End: true}, nil
			}
			if t.version >= topicIDFrom {
				id := r.Span(16)
				if !r.Ok() {
					return short()
				}
				t.topics--
				t.at = fetchParts
				mark()
				if t.report {
					step := FetchStep{Used: used, Found: FoundTopic, TopicID: [16]byte(id)}
					*s = saved
					s.left -= int64(used)
					return step, nil
				}
				continue
			}
			var l int64
			if t.flexible {
				l = int64(r.Uvarint()) - 1
			} else {
				l = int64(r.Int16())
			}
			if !r.Ok() {
				return short()
			}
			if l < 0 {
				// A topic name is not nullable.
				return FetchStep{}, ErrCannotScan
			}
			if t.report {
				if l > bodyLeft() {
					return FetchStep{}, ErrCannotScan
				}
				name := r.Span(int(l))
				if !r.Ok() {
					return short()
				}
				t.topics--
				t.at = fetchParts
				mark()
				*s = saved
				s.left -= int64(used)
				return FetchStep{Used: used, Found: FoundTopic, Topic: name}, nil
			}
			t.topics--
			if step, ret, err := opaque(l, fetchParts); ret {
				return step, err
			}
		case fetchParts:
			n := streamArrayLen(&r, t.flexible)
			if !r.Ok() {
				return short()
			}
			if tooMany(n, 16, bodyLeft()) || t.version >= 11 && tooMany(n, 37, bodyLeft()) {
				return FetchStep{}, ErrCannotScan
			}
			t.parts, t.at = max(n, 0), fetchPartition
			mark()
		case fetchPartition:
			if t.parts == 0 {
				t.at = fetchTopic
				if t.flexible {
					t.at, t.after, t.partTags = fetchTagCount, fetchTopic, false
				}
				mark()
				continue
			}
			t.partition = r.Int32()
			t.partCode = r.Int16()
			r.Int64() // high watermark
			if t.version >= 4 {
				r.Int64() // last stable offset
			}
			if t.version >= 5 {
				r.Int64() // log start offset
			}
			var n int32
			if t.version >= 4 {
				n = streamArrayLen(&r, t.flexible)
			}
			if !r.Ok() {
				return short()
			}
			if tooMany(n, 16, bodyLeft()) {
				return FetchStep{}, ErrCannotScan
			}
			t.parts--
			t.aborted, t.at = max(n, 0), fetchAborted
			mark()
		case fetchAborted:
			if t.aborted > 0 {
				r.Span(8 + 8) // producer id, first offset
				if !r.Ok() {
					return short()
				}
				t.aborted--
				if t.flexible {
					t.at, t.after, t.partTags = fetchTagCount, fetchAborted, false
				}
				mark()
				continue
			}
			if t.version >= 11 {
				r.Int32() // preferred read replica
			}
			var l int64
			if t.flexible {
				l = int64(r.Uvarint()) - 1
			} else {
				l = int64(r.Int32())
			}
			if !r.Ok() {
				return short()
			}
			next := fetchPartition
			if t.flexible {
				next, t.after, t.partTags = fetchTagCount, fetchPartition, true
			}
			// The records, never read; null ones are none.
			if t.report {
				l = max(l, 0)
				if l > bodyLeft() {
					return FetchStep{}, ErrCannotScan
				}
				t.at = next
				mark()
				*s = saved
				s.left -= int64(used) + l
				return FetchStep{Used: used, Pass: l, Found: FoundPartition, Partition: t.partition, ErrorCode: t.partCode}, nil
			}
			if step, ret, err := opaque(max(l, 0), next); ret {
				return step, err
			}
		case fetchTagCount:
			t.tags = r.Uvarint()
			if !r.Ok() {
				return short()
			}
			t.at = fetchTag
			mark()
		case fetchTag:
			if t.tags == 0 {
				t.at = t.after
				mark()
				continue
			}
			key := r.Uvarint()
			size := int64(r.Uvarint())
			if !r.Ok() {
				return short()
			}
			fixed := 0
			if t.partTags {
				fixed = fetchPartitionTag(key)
			}
			if fixed == 0 {
				t.tags--
				if step, ret, err := opaque(size, fetchTag); ret {
					return step, err
				}
				continue
			}
			// A known tag's struct is checked as kmsg decodes it,
			// so it must be in the window whole.
			if size > bodyLeft() {
				return FetchStep{}, ErrCannotScan
			}
			val := r.Span(int(size))
			if !r.Ok() {
				return short()
			}
			sub := kbin.Reader{Src: val}
			sub.Span(fixed)
			skipTags(&sub)
			if !sub.Ok() {
				return FetchStep{}, ErrCannotScan
			}
			t.tags--
			mark()
		}
	}
}

// streamArrayLen reads an array length as arrayLen does, but leaves the
// check against the bytes left to the caller (tooMany), which knows the
// body's: the window may end before it.
func streamArrayLen(r *kbin.Reader, flexible bool) int32 {
	if flexible {
		return int32(r.Uvarint()) - 1
	}
	return r.Int32()
}

// tooMany is kmsg's check of an array length against the left bytes of
// the body: at least one byte per element (kbin's), and min per element
// (the generated reader's).
func tooMany(n int32, min, left int64) bool {
	return int64(n) > left || int64(n)*min > left
}

// ScanFetchTail reads the tail of a Fetch response at version that a
// FetchStream left after its End step: the response's tag section and
// whatever kmsg ignores after it. It returns the node endpoints, with
// offsets in tail, as ScanEndpoints does for a whole body.
func ScanFetchTail(version int16, tail []byte) (Endpoints, error) {
	r := kbin.Reader{Src: tail}
	return responseTags(&r, tail, Flexible(fetchKey, version))
}
