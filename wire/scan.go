package wire

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The scanner learns the few facts the hot path needs from a message body
// without decoding it: the partitions a Produce request writes, and whether
// (and where) a Produce or Fetch response carries KIP-951 node endpoints. It
// skips every field by its length, builds no message and allocates nothing.
//
// kmsg stays the codec and the reference: the scanner mirrors kmsg's
// ProduceRequest, ProduceResponse and FetchResponse readers field for field
// (including their minimum-size checks on array lengths), a differential fuzz
// target checks that it accepts exactly what kmsg accepts and finds the same
// partitions and endpoints, and a caller falls back to kmsg whenever the
// scanner says ErrCannotScan.

// ErrCannotScan: the body does not read as the message the scanner expects.
// The caller decodes it with kmsg instead, which gives the precise error.
var ErrCannotScan = errors.New("cannot scan message body")

// API keys and the schema versions the scanner branches on (kmsg's
// generated readers and the Kafka message definitions).
const (
	produceKey = 0
	fetchKey   = 1

	topicIDFrom = 13 // Produce v13+ and Fetch v13+ name topics by id
)

// Partition is one topic-partition a Produce request writes. Topic aliases
// the scanned body; it is empty from v13, where TopicID names the topic.
type Partition struct {
	Topic     []byte
	TopicID   [16]byte
	Partition int32
	// Records are the partition's record batches in a Produce request,
	// aliasing the scanned body (nil when null); the commit scanner
	// leaves it nil.
	Records []byte
}

// ProduceScan walks the topic-partitions of a Produce request body. The zero
// value is ready for Reset; one scan per connection can be reused for every
// request, and none of its methods allocates.
//
//	if err := s.Reset(body, version); err != nil { ... }
//	for p, ok := s.Next(); ok; p, ok = s.Next() { ... }
//	if s.Err() != nil { ... }
type ProduceScan struct {
	// Acks is the request's acks, read by Reset.
	Acks int16
	// AcksAt is the offset of acks in the body, so it can be patched.
	AcksAt int

	topicWalk
}

// Reset starts a scan of body, a Produce request body at version, and reads
// everything before the topics.
func (s *ProduceScan) Reset(body []byte, version int16) error {
	flexible := Flexible(produceKey, version)
	*s = ProduceScan{topicWalk: topicWalk{r: kbin.Reader{Src: body}, flexible: flexible, byID: version >= topicIDFrom, partMin: 6}}
	if version >= 3 {
		skipNullableString(&s.r, s.flexible)
	}
	s.AcksAt = len(body) - len(s.r.Src)
	s.Acks = s.r.Int16()
	s.r.Int32() // timeout
	return s.startTopics()
}

// Next returns the next partition written, or false at the end of the
// request or on an error (see Err).
func (s *ProduceScan) Next() (Partition, bool) {
	if !s.nextPartition() {
		return Partition{}, false
	}
	s.cur.Partition = s.r.Int32()
	s.cur.Records = spanNullableBytes(&s.r, s.flexible)
	return s.endPartition()
}

// topicWalk is what the request scanners share: the topics array of a
// request, each topic named (or, byID, identified) and followed by its
// partitions, with kmsg's minimum-size checks on both arrays. The scanner
// reads what precedes the topics, then each partition's fields between
// nextPartition and endPartition.
type topicWalk struct {
	r        kbin.Reader
	flexible bool
	byID     bool  // topics are named by id
	partMin  int64 // kmsg's minimum size of one partition
	more     bool  // fields follow the topics (a Fetch's): the walk ends at them
	topics   int32 // topics not yet started
	parts    int32 // partitions of the current topic not yet read
	inTopic  bool
	done     bool
	err      error
	cur      Partition
}

// startTopics reads the length of the topics array.
func (w *topicWalk) startTopics() error {
	r := &w.r
	n := arrayLen(r, w.flexible)
	if !r.Ok() || tooShort(n, 2, r) || w.byID && tooShort(n, 18, r) {
		return w.fail()
	}
	w.topics = max(n, 0)
	return nil
}

// nextPartition reports whether a partition's fields come next, stepping
// over the end of a topic and the start of the next; false at the end of
// the request or on an error.
func (w *topicWalk) nextPartition() bool {
	r := &w.r
	for w.err == nil && !w.done {
		if w.parts > 0 {
			w.parts--
			return true
		}
		if w.inTopic {
			w.inTopic = false
			if w.flexible {
				skipTags(r)
			}
		}
		if w.topics == 0 {
			if w.flexible && !w.more {
				skipTags(r)
			}
			w.done = true
			if !r.Ok() {
				w.fail()
			}
			break
		}
		w.topics--
		w.cur = Partition{}
		if w.byID {
			w.cur.TopicID = r.Uuid()
		} else {
			w.cur.Topic = readString(r, w.flexible)
		}
		n := arrayLen(r, w.flexible)
		if !r.Ok() || tooShort(n, w.partMin, r) {
			w.fail()
			break
		}
		w.parts = max(n, 0)
		w.inTopic = true
	}
	return false
}

// endPartition reads a partition's tags and returns it, once the scanner
// has read its fields (and set cur.Partition).
func (w *topicWalk) endPartition() (Partition, bool) {
	if w.flexible {
		skipTags(&w.r)
	}
	if !w.r.Ok() {
		w.fail()
		return Partition{}, false
	}
	return w.cur, true
}

// Err returns ErrCannotScan if the body did not scan; it is final only once
// Next has returned false.
func (w *topicWalk) Err() error { return w.err }

func (w *topicWalk) fail() error {
	w.err = ErrCannotScan
	w.topics, w.parts = 0, 0
	return w.err
}

// Endpoints is where a Produce or Fetch response keeps its KIP-951 node
// endpoints (the body's tagged field 0). The zero value means none.
type Endpoints struct {
	// Count is the number of endpoints; zero when the field is absent or
	// empty.
	Count int
	// Start and End delimit the field's value in the body.
	Start, End int
}

// ScanEndpoints walks a Produce (key 0) or Fetch (key 1) response body at
// version and returns its node endpoints, skipping records by their lengths.
// Like kmsg, it reads the field in every flexible version and keeps the last
// occurrence if the field repeats.
func ScanEndpoints(key, version int16, body []byte) (Endpoints, error) {
	r := kbin.Reader{Src: body}
	flexible := Flexible(key, version)
	switch key {
	case produceKey:
		scanTopics(&r, version, flexible, produceResponsePartitions)
		if version >= 1 {
			r.Int32() // throttle
		}
	case fetchKey:
		if version >= 1 {
			r.Int32() // throttle
		}
		if version >= 7 {
			r.Int16() // error code
			r.Int32() // session id
		}
		scanTopics(&r, version, flexible, fetchResponsePartitions)
	default:
		return Endpoints{}, ErrCannotScan
	}
	return responseTags(&r, body, flexible)
}

// responseTags reads the tag section of a Produce or Fetch response, which
// ends it, from r, what is left of body: the endpoints of the last tag 0,
// as kmsg keeps them, with offsets in body.
func responseTags(r *kbin.Reader, body []byte, flexible bool) (Endpoints, error) {
	var e Endpoints
	if flexible && r.Ok() {
		for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
			tag := r.Uvarint()
			size := int(r.Uvarint())
			start := len(body) - len(r.Src)
			val := r.Span(size)
			if tag != 0 || !r.Ok() {
				continue
			}
			count, ok := scanEndpointList(val)
			if !ok {
				return Endpoints{}, ErrCannotScan
			}
			e = Endpoints{Count: count, Start: start, End: start + size}
		}
	}
	if !r.Ok() {
		return Endpoints{}, ErrCannotScan
	}
	if e.Count == 0 {
		e = Endpoints{}
	}
	return e, nil
}

// partitions describes the partition array of a response's topics: kmsg's
// minimum size of one partition (min, and minLater from version later), and
// which response it is. A direct call, not a func value, keeps the reader on
// the stack.
type partitions struct {
	min, minLater int64
	later         int16
	fetch         bool
}

var (
	produceResponsePartitions = partitions{min: 14, minLater: 33, later: 8}
	fetchResponsePartitions   = partitions{min: 16, minLater: 37, later: 11, fetch: true}
)

// scanTopics skips the topics array of a Produce or Fetch response.
func scanTopics(r *kbin.Reader, version int16, flexible bool, p partitions) {
	n := arrayLen(r, flexible)
	if !r.Ok() || tooShort(n, 2, r) || version >= topicIDFrom && tooShort(n, 18, r) {
		bad(r)
		return
	}
	for ; n > 0 && r.Ok(); n-- {
		if version >= topicIDFrom {
			r.Span(16)
		} else {
			readString(r, flexible)
		}
		parts := arrayLen(r, flexible)
		if !r.Ok() || tooShort(parts, p.min, r) || version >= p.later && tooShort(parts, p.minLater, r) {
			bad(r)
			return
		}
		for ; parts > 0 && r.Ok(); parts-- {
			if p.fetch {
				skipFetchResponsePartition(r, version, flexible)
			} else {
				skipProduceResponsePartition(r, version, flexible)
			}
		}
		if flexible {
			skipTags(r)
		}
	}
}

func skipProduceResponsePartition(r *kbin.Reader, version int16, flexible bool) {
	r.Span(4 + 2 + 8) // partition, error code, base offset
	if version >= 2 {
		r.Int64() // log append time
	}
	if version >= 5 {
		r.Int64() // log start offset
	}
	if version >= 8 {
		recs := arrayLen(r, flexible)
		if !r.Ok() || tooShort(recs, 6, r) {
			bad(r)
			return
		}
		for ; recs > 0 && r.Ok(); recs-- {
			r.Int32() // relative offset
			skipNullableString(r, flexible)
			if flexible {
				skipTags(r)
			}
		}
		skipNullableString(r, flexible) // error message
	}
	if flexible {
		skipStructTags(r, producePartitionTag)
	}
}

// skipFetchResponsePartition skips one partition of a Fetch response and
// returns its records (aliasing r's source; nil when null).
func skipFetchResponsePartition(r *kbin.Reader, version int16, flexible bool) []byte {
	r.Span(4 + 2 + 8) // partition, error code, high watermark
	if version >= 4 {
		r.Int64() // last stable offset
	}
	if version >= 5 {
		r.Int64() // log start offset
	}
	if version >= 4 {
		aborted := arrayLen(r, flexible)
		if !r.Ok() || tooShort(aborted, 16, r) {
			bad(r)
			return nil
		}
		for ; aborted > 0 && r.Ok(); aborted-- {
			r.Span(8 + 8) // producer id, first offset
			if flexible {
				skipTags(r)
			}
		}
	}
	if version >= 11 {
		r.Int32() // preferred read replica
	}
	recs := spanNullableBytes(r, flexible) // never copied
	if flexible {
		skipStructTags(r, fetchPartitionTag)
	}
	return recs
}

// producePartitionTag returns the fixed size of a known Produce partition
// tag's struct: tag 0, the current leader (leader id, leader epoch).
func producePartitionTag(tag uint32) int {
	if tag == 0 {
		return 4 + 4
	}
	return 0
}

// fetchPartitionTag returns the fixed size of a known Fetch partition tag's
// struct, or 0 for a tag kmsg keeps opaque.
func fetchPartitionTag(tag uint32) int {
	switch tag {
	case 0:
		return 4 + 8 // epoch, end offset
	case 1:
		return 4 + 4 // leader id, leader epoch
	case 2:
		return 8 + 4 // end offset, epoch
	}
	return 0
}

// skipStructTags skips a tag section in which some tags hold a struct:
// fixed(tag) bytes of fixed-size fields and a tag section, all of which must
// fit in the tag's value, as kmsg requires.
func skipStructTags(r *kbin.Reader, fixed func(tag uint32) int) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag := r.Uvarint()
		val := r.Span(int(r.Uvarint()))
		size := fixed(tag)
		if size == 0 || !r.Ok() {
			continue
		}
		sub := kbin.Reader{Src: val}
		sub.Span(size)
		skipTags(&sub)
		if !sub.Ok() {
			bad(r)
			return
		}
	}
}

// scanEndpointList checks a KIP-951 endpoint list (the value of tag 0) as
// kmsg reads it and returns how many endpoints it holds.
func scanEndpointList(val []byte) (int, bool) {
	it := EndpointIter{r: kbin.Reader{Src: val}}
	n := arrayLen(&it.r, true)
	if !it.r.Ok() || tooShort(n, 11, &it.r) {
		return 0, false
	}
	it.left = max(n, 0)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	return int(max(n, 0)), it.r.Ok()
}

// Endpoint is one KIP-951 node endpoint; Host and Rack alias the body.
type Endpoint struct {
	NodeID  int32
	Host    []byte
	Port    int32
	Rack    []byte
	HasRack bool // false for a null rack
}

// EndpointIter walks the endpoints that ScanEndpoints found.
type EndpointIter struct {
	r    kbin.Reader
	left int32
}

// Iter returns an iterator over e's endpoints in body, the body e was
// scanned from.
func (e Endpoints) Iter(body []byte) EndpointIter {
	if e.Count == 0 {
		return EndpointIter{}
	}
	it := EndpointIter{r: kbin.Reader{Src: body[e.Start:e.End]}}
	it.left = max(arrayLen(&it.r, true), 0)
	return it
}

// Next returns the next endpoint, or false at the end.
func (it *EndpointIter) Next() (Endpoint, bool) {
	if it.left <= 0 || !it.r.Ok() {
		return Endpoint{}, false
	}
	it.left--
	r := &it.r
	var e Endpoint
	e.NodeID = r.Int32()
	e.Host = readString(r, true)
	e.Port = r.Int32()
	if l := int(r.Uvarint()) - 1; l >= 0 {
		e.Rack, e.HasRack = r.Span(l), true
	}
	skipTags(r)
	return e, r.Ok()
}

// arrayLen reads an array length as kmsg does: compact when flexible; a
// length longer than the bytes left is an error, a negative one is empty.
func arrayLen(r *kbin.Reader, flexible bool) int32 {
	if flexible {
		return r.CompactArrayLen()
	}
	return r.ArrayLen()
}

// tooShort is kmsg's check that n elements of at least min bytes each can
// fit in what is left.
func tooShort(n int32, min int64, r *kbin.Reader) bool {
	return int64(n)*min > int64(len(r.Src))
}

func readString(r *kbin.Reader, flexible bool) []byte {
	if flexible {
		return r.Span(int(r.Uvarint()) - 1)
	}
	return r.Span(int(r.Int16()))
}

func skipNullableString(r *kbin.Reader, flexible bool) {
	var l int
	if flexible {
		l = int(r.Uvarint()) - 1
	} else {
		l = int(r.Int16())
	}
	if l >= 0 {
		r.Span(l)
	}
}

func skipNullableBytes(r *kbin.Reader, flexible bool) {
	var l int
	if flexible {
		l = int(r.Uvarint()) - 1
	} else {
		l = int(r.Int32())
	}
	if l >= 0 {
		r.Span(l)
	}
}

// spanNullableBytes reads nullable bytes as skipNullableBytes skips them,
// returning them (aliasing r's source); nil when null.
func spanNullableBytes(r *kbin.Reader, flexible bool) []byte {
	var l int
	if flexible {
		l = int(r.Uvarint()) - 1
	} else {
		l = int(r.Int32())
	}
	if l < 0 {
		return nil
	}
	return r.Span(l)
}

// bad marks r as failed, as kbin does on a short read.
func bad(r *kbin.Reader) {
	r.Span(-1)
}
