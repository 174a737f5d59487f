package wire

import "github.com/twmb/franz-go/pkg/kbin"

// Fetching is one partition a Fetch request asks for: the offset it
// fetches from. Topic aliases the scanned body; it is empty from v13,
// where TopicID names the topic.
type Fetching struct {
	Topic       []byte
	TopicID     [16]byte
	Partition   int32
	FetchOffset int64
}

// FetchScan walks the partitions of a Fetch request body, reading each
// field as kmsg reads it, nothing built or allocated. It reads the body up
// to the end of its topics only (the forgotten topics and rack that follow
// are not the audit's), so it accepts every body kmsg accepts and finds
// the same partitions (checked by FuzzScanFetchRequest). The zero value is
// ready for Reset; Reset with a nil body lets the last body go.
type FetchScan struct {
	topicWalk
	version int16
	// replica (before v15) and session are read by Reset.
	replica, session int32
}

// Reset starts a scan of body, a Fetch request body at version.
func (s *FetchScan) Reset(body []byte, version int16) {
	// A partition is at least its number, fetch offset and maximum bytes.
	*s = FetchScan{topicWalk: topicWalk{r: kbin.Reader{Src: body}, flexible: Flexible(fetchKey, version), byID: version >= topicIDFrom, partMin: 4 + 8 + 4, more: true}, version: version}
	r := &s.r
	s.replica = -1
	if version <= 14 {
		s.replica = r.Int32()
	}
	r.Span(4 + 4) // max wait, min bytes
	if version >= 3 {
		r.Int32() // max bytes
	}
	if version >= 4 {
		r.Int8() // isolation level
	}
	if version >= 7 {
		s.session = r.Int32()
		r.Int32() // session epoch
	}
	_ = s.startTopics() // a failure is Err's
}

// Session is the request's fetch session id (0: none, and before v7).
func (s *FetchScan) Session() int32 { return s.session }

// Replica returns the id of the replica the request fetches for (-1: a
// consumer), once Next has returned false with no error. From v15 the id
// is in the body's tagged fields, after the forgotten topics and the
// rack, which it then reads: ok is false when they do not scan, or when
// the tagged field that would hold it is present (the caller decodes the
// request to read it).
func (s *FetchScan) Replica() (id int32, ok bool) {
	if s.err != nil || !s.done {
		return 0, false
	}
	if s.version < 15 {
		return s.replica, true
	}
	r := s.r // the scan's own position is left where it is
	n := arrayLen(&r, true)
	if !r.Ok() || tooShort(n, 18, &r) {
		return 0, false
	}
	for range max(n, 0) {
		r.Uuid()
		m := arrayLen(&r, true)
		if !r.Ok() || tooShort(m, 4, &r) {
			return 0, false
		}
		r.Span(4 * int(max(m, 0))) // the partitions forgotten
		skipTags(&r)
	}
	readString(&r, true) // rack
	for k := r.Uvarint(); k > 0 && r.Ok(); k-- {
		if r.Uvarint() == 1 { // the replica's state
			return 0, false
		}
		r.Span(int(r.Uvarint()))
	}
	if !r.Ok() {
		return 0, false
	}
	return -1, true
}

// Next returns the next partition asked for, or false at the end of the
// topics or on an error (see Err).
func (s *FetchScan) Next() (Fetching, bool) {
	if !s.nextPartition() {
		return Fetching{}, false
	}
	r := &s.r
	part := r.Int32()
	if s.version >= 9 {
		r.Int32() // current leader epoch
	}
	offset := r.Int64()
	if s.version >= 12 {
		r.Int32() // last fetched epoch
	}
	if s.version >= 5 {
		r.Int64() // log start offset
	}
	r.Int32() // partition max bytes
	p, ok := s.endPartition()
	if !ok {
		return Fetching{}, false
	}
	return Fetching{Topic: p.Topic, TopicID: p.TopicID, Partition: part, FetchOffset: offset}, true
}

// Fetched is one partition of a Fetch response: the error the client got,
// the high watermark and the record bytes returned (aliasing the body; nil
// when null). Topic is empty from v13, where TopicID names the topic.
type Fetched struct {
	Topic         []byte
	TopicID       [16]byte
	Partition     int32
	ErrorCode     int16
	HighWatermark int64
	Records       []byte
}

// FetchedScan walks the partitions of a Fetch response body as
// ScanEndpoints walks it: every field skipped by its length, the records
// never read, nothing allocated, and exactly what kmsg accepts accepted
// (checked by FuzzScanFetched). A caller that needs every partition or
// none reads them all first and believes them once Err is nil, which
// checks the body to its end. The zero value is ready for Reset; Reset
// with a nil body lets the last body go.
type FetchedScan struct {
	topicWalk
	body     []byte
	version  int16
	finished bool // the response's tags, after the topics, were read
}

// Reset starts a scan of body, a Fetch response body at version.
func (s *FetchedScan) Reset(body []byte, version int16) {
	p := fetchResponsePartitions
	partMin := p.min
	if version >= p.later {
		partMin = p.minLater
	}
	*s = FetchedScan{topicWalk: topicWalk{r: kbin.Reader{Src: body}, flexible: Flexible(fetchKey, version), byID: version >= topicIDFrom, partMin: partMin, more: true},
		body: body, version: version}
	r := &s.r
	if version >= 1 {
		r.Int32() // throttle
	}
	if version >= 7 {
		r.Span(2 + 4) // error code, session id
	}
	_ = s.startTopics() // a failure is Err's
}

// Next returns the next partition of the response, or false at its end or
// on an error (see Err).
func (s *FetchedScan) Next() (Fetched, bool) {
	if !s.nextPartition() {
		if s.done && s.err == nil && !s.finished {
			s.finished = true
			if _, err := responseTags(&s.r, s.body, s.flexible); err != nil {
				s.fail()
			}
		}
		return Fetched{}, false
	}
	r := &s.r
	if len(r.Src) < 4+2+8 {
		s.fail()
		return Fetched{}, false
	}
	head := kbin.Reader{Src: r.Src[:4+2+8]}
	f := Fetched{Topic: s.cur.Topic, TopicID: s.cur.TopicID, Partition: head.Int32(), ErrorCode: head.Int16(), HighWatermark: head.Int64()}
	f.Records = skipFetchResponsePartition(r, s.version, s.flexible)
	if !r.Ok() {
		s.fail()
		return Fetched{}, false
	}
	return f, true
}
