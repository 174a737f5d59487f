package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
)

// ProduceLayout is where the pieces of a Produce request body lie, so
// that a request split over brokers is written as slices of the client's
// frame: each part's own frame is a small head (the header, the fields
// before the topics, the counts and the topic names) and, between those,
// the client's partition entries as they came. No record is copied.
//
// Offsets are from the start of the scanned body. Scan reuses the
// layout's slices, so one layout per connection serves every request.
type ProduceLayout struct {
	flexible bool
	// Topics is where the topics array's length starts: the fields
	// before it (transactional id, acks, timeout) are body[:Topics].
	Topics int
	// ReqTags to End is the request's tag section (empty when not
	// flexible); what follows End, which kmsg ignores, is not sent.
	ReqTags, End int
	T            []TopicSpan
	P            []PartitionSpan // every topic's, in the body's order
}

// TopicSpan is one topic of a Produce request body.
type TopicSpan struct {
	Name, NameEnd int // the name (or id from v13) with its length prefix
	Tags, End     int // its tag section (empty when not flexible)
	First, N      int // its partitions, ProduceLayout.P[First:First+N]
}

// PartitionSpan is one partition entry: its index, records and tags.
type PartitionSpan struct {
	Start, End int
	Partition  int32
}

// Scan lays out body, a Produce request body at version, reading every
// field as ProduceScan does (and so as kmsg does). It allocates only to
// grow the layout's slices.
func (l *ProduceLayout) Scan(body []byte, version int16) error {
	l.flexible = Flexible(produceKey, version)
	l.T, l.P = l.T[:0], l.P[:0]
	var s ProduceScan
	if err := s.Reset(body, version); err != nil {
		return err
	}
	r := &s.r
	l.Topics = s.AcksAt + 6
	at := func() int { return len(body) - len(r.Src) }
	// The walk of topicWalk.nextPartition, with each boundary noted.
	for s.topics > 0 {
		s.topics--
		t := TopicSpan{Name: at(), First: len(l.P)}
		if s.byID {
			r.Uuid()
		} else {
			readString(r, l.flexible)
		}
		t.NameEnd = at()
		n := arrayLen(r, l.flexible)
		if !r.Ok() || tooShort(n, s.partMin, r) {
			return ErrCannotScan
		}
		for range max(n, 0) {
			p := PartitionSpan{Start: at()}
			p.Partition = r.Int32()
			skipNullableBytes(r, l.flexible)
			if l.flexible {
				skipTags(r)
			}
			p.End = at()
			l.P = append(l.P, p)
		}
		t.N = len(l.P) - t.First
		t.Tags = at()
		if l.flexible {
			skipTags(r)
		}
		t.End = at()
		if !r.Ok() {
			return ErrCannotScan
		}
		l.T = append(l.T, t)
	}
	l.ReqTags = at()
	if l.flexible {
		skipTags(r)
	}
	l.End = at()
	if !r.Ok() {
		return ErrCannotScan
	}
	return nil
}

// HeadSize bounds the head Part writes for any part: the request header
// (hdrEnd bytes of frame, prefix included) and every byte of the body
// that is not a partition entry, with room for the counts.
func (l *ProduceLayout) HeadSize(hdrEnd, bodyLen int) int {
	n := hdrEnd + bodyLen + 5 + 5*len(l.T)
	for _, p := range l.P {
		n -= p.End - p.Start
	}
	return n
}

// Part appends to head (whose capacity must hold HeadSize more bytes, so
// that it does not move) and to vec the frame of the part of a request
// that carries the partition entries i where of(i) is part, and to at,
// for each piece of vec, where it lies in frame (-1: in head), and
// returns all three. frame is the client's frame, its body at hdrEnd. The part's
// frame is vec joined: its length prefix set, its correlation id the
// client's, its topics those with an entry in the part, each with only
// those entries, in the client's order; the entries are slices of frame,
// adjacent ones joined.
func (l *ProduceLayout) Part(frame []byte, hdrEnd int, head []byte, vec [][]byte, at []int, part int, of func(i int) int) ([]byte, [][]byte, []int) {
	body := frame[hdrEnd:]
	from := len(head)
	mark := from // head bytes not yet in vec
	size := 0
	run, runEnd := 0, -1 // the last slice of body in vec, while it is vec's last
	flush := func() {
		if len(head) > mark {
			vec = append(vec, head[mark:len(head):len(head)])
			at = append(at, -1)
			size += len(head) - mark
			mark, runEnd = len(head), -1
		}
	}
	slice := func(start, end int) {
		flush()
		if start == runEnd {
			vec[len(vec)-1] = body[run:end:end]
		} else {
			vec = append(vec, body[start:end:end])
			at = append(at, hdrEnd+start)
			run = start
		}
		runEnd = end
		size += end - start
	}
	head = append(head, frame[:hdrEnd]...)
	head = append(head, body[:l.Topics]...)
	topics := 0
	for _, t := range l.T {
		for i := t.First; i < t.First+t.N; i++ {
			if of(i) == part {
				topics++
				break
			}
		}
	}
	head = l.appendLen(head, topics)
	for _, t := range l.T {
		n := 0
		for i := t.First; i < t.First+t.N; i++ {
			if of(i) == part {
				n++
			}
		}
		if n == 0 {
			continue
		}
		head = append(head, body[t.Name:t.NameEnd]...)
		head = l.appendLen(head, n)
		for i := t.First; i < t.First+t.N; i++ {
			if of(i) == part {
				slice(l.P[i].Start, l.P[i].End)
			}
		}
		head = append(head, body[t.Tags:t.End]...)
	}
	head = append(head, body[l.ReqTags:l.End]...)
	flush()
	binary.BigEndian.PutUint32(head[from:], uint32(size-4))
	return head, vec, at
}

// appendLen appends an array length as the body's version writes it.
func (l *ProduceLayout) appendLen(dst []byte, n int) []byte {
	if l.flexible {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}
