package wire

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
)

// ErrNeedMore: the window given to ProduceStream.Next ends inside a field;
// call again with the same bytes and more after them.
var ErrNeedMore = errors.New("need more bytes")

// ProduceStream scans a Produce request body that passes through in
// pieces, without holding it: the caller shows it the bytes between one
// partition's records and the next partition's (topic names, partition
// indexes, record lengths, tag sections) and moves the records themselves
// however it likes, unseen. It finds the same partitions as ProduceScan and
// kmsg, and fails where they fail: it checks every array length against
// the bytes left in the whole body, as kmsg does, not against the window.
// The zero value is ready for Start; it allocates only to copy a topic name
// longer than any before it.
type ProduceStream struct {
	// Acks and AcksAt are read by Start, as ProduceScan's.
	Acks   int16
	AcksAt int

	version  int16
	flexible bool
	left     int64 // body bytes from the resume point on
	topics   int32 // topics not yet started
	parts    int32 // partitions of the current topic not yet started
	at       streamAt
	topic    []byte // the current topic's name, copied out of its window
	topicID  [16]byte
}

type streamAt uint8

const (
	atTopic         streamAt = iota // before the next topic, or the request's tags
	atPartition                     // before the next partition, or the topic's tags
	atPartitionTags                 // after a partition's records
)

// StreamStep is what one call of Next found.
type StreamStep struct {
	// Found: a partition, whose header took the first Used bytes of the
	// window; its Records bytes follow them and are the caller's to
	// move. Partition.Topic aliases the scanner and stays valid until
	// the next call.
	Found     bool
	Partition Partition
	Records   int64
	// End: the request's structure ended after Used bytes of the window;
	// whatever follows up to the body's end is bytes kmsg ignores.
	End  bool
	Used int
}

// Start reads what precedes the topics of a body of bodyLen bytes from
// head, its first bytes, and returns how many it used. It is stricter than
// kmsg where head is shorter than the body (the topic count is checked
// against head), so a body it refuses may still be valid; the caller then
// reads the body whole and scans it with ProduceScan.
func (s *ProduceStream) Start(head []byte, version int16, bodyLen int) (int, error) {
	var ps ProduceScan
	if len(head) > bodyLen {
		return 0, ErrCannotScan
	}
	if err := ps.Reset(head, version); err != nil {
		return 0, err
	}
	used := len(head) - len(ps.r.Src)
	*s = ProduceStream{
		Acks: ps.Acks, AcksAt: ps.AcksAt,
		version: version, flexible: ps.flexible,
		left: int64(bodyLen - used), topics: ps.topics, at: atTopic,
		topic: s.topic[:0],
	}
	return used, nil
}

// Topics returns the topics not yet started: after Start, the request's
// topic count.
func (s *ProduceStream) Topics() int32 { return s.topics }

// Last reports whether the partition Next just returned is the request's
// last: after its records only tag sections follow (in flexible versions),
// and then whatever bytes kmsg ignores up to the body's end. A caller that
// passes those on unscanned learns nothing it needs from them.
func (s *ProduceStream) Last() bool {
	return s.at == atPartitionTags && s.parts == 0 && s.topics == 0
}

// clip cuts window to the left bytes of the body that a streaming scan has
// still to see, and reports whether it holds all of them: then a field
// the window ends in is one the body ends in.
func clip(window []byte, left int64) (w []byte, whole bool) {
	if int64(len(window)) > left {
		window = window[:left]
	}
	return window, int64(len(window)) == left
}

// Next scans window, the body's bytes from the resume point on (the end of
// the last partition's records, or of what Start used). It returns the next
// partition or the end of the request; ErrNeedMore if window ends inside a
// field before the body does (nothing is consumed); ErrCannotScan for a
// body kmsg would refuse.
func (s *ProduceStream) Next(window []byte) (StreamStep, error) {
	w, whole := clip(window, s.left)
	r := kbin.Reader{Src: w}
	t := *s
	short := func() (StreamStep, error) {
		if whole {
			return StreamStep{}, ErrCannotScan
		}
		return StreamStep{}, ErrNeedMore
	}
	bodyLeft := func() int64 { return t.left - int64(len(w)-len(r.Src)) }
	for {
		switch t.at {
		case atPartitionTags:
			if t.flexible {
				skipTags(&r)
				if !r.Ok() {
					return short()
				}
			}
			t.at = atPartition
		case atPartition:
			if t.parts == 0 {
				if t.flexible {
					skipTags(&r)
					if !r.Ok() {
						return short()
					}
				}
				t.at = atTopic
				continue
			}
			p := r.Int32()
			var l int64
			if t.flexible {
				l = int64(r.Uvarint()) - 1
			} else {
				l = int64(r.Int32())
			}
			if !r.Ok() {
				return short()
			}
			l = max(l, 0) // null records
			used := len(w) - len(r.Src)
			if l > bodyLeft() {
				return StreamStep{}, ErrCannotScan
			}
			t.parts--
			t.left -= int64(used) + l
			t.at = atPartitionTags
			*s = t
			part := Partition{TopicID: s.topicID, Partition: p}
			if s.version < topicIDFrom {
				part.Topic = s.topic
			}
			return StreamStep{Found: true, Partition: part, Records: l, Used: used}, nil
		case atTopic:
			if t.topics == 0 {
				if t.flexible {
					skipTags(&r)
					if !r.Ok() {
						return short()
					}
				}
				used := len(w) - len(r.Src)
				t.left -= int64(used)
				*s = t
				return StreamStep{End: true, Used: used}, nil
			}
			var name []byte
			if t.version >= topicIDFrom {
				t.topicID = r.Uuid()
			} else {
				name = readString(&r, t.flexible)
			}
			var n int32
			if t.flexible {
				n = int32(r.Uvarint()) - 1
			} else {
				n = r.Int32()
			}
			if !r.Ok() {
				return short()
			}
			// kmsg's checks, against the whole body: an array
			// length above the bytes left, or too many partitions
			// of at least 6 bytes for them.
			if int64(n) > bodyLeft() || int64(n)*6 > bodyLeft() {
				return StreamStep{}, ErrCannotScan
			}
			t.topics--
			t.parts = max(n, 0)
			t.topic = append(t.topic[:0], name...)
			t.at = atPartition
		}
	}
}
