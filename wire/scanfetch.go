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
}

// Reset starts a scan of body, a Fetch request body at version.
func (s *FetchScan) Reset(body []byte, version int16) {
	// A partition is at least its number, fetch offset and maximum bytes.
	*s = FetchScan{topicWalk: topicWalk{r: kbin.Reader{Src: body}, flexible: Flexible(fetchKey, version), byID: version >= topicIDFrom, partMin: 4 + 8 + 4, more: true}, version: version}
	r := &s.r
	if version <= 14 {
		r.Int32() // replica id
	}
	r.Span(4 + 4) // max wait, min bytes
	if version >= 3 {
		r.Int32() // max bytes
	}
	if version >= 4 {
		r.Int8() // isolation level
	}
	if version >= 7 {
		r.Span(4 + 4) // session id, epoch
	}
	_ = s.startTopics() // a failure is Err's
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
	r        kbin.Reader
	body     []byte
	version  int16
	flexible bool
	topics   int32
	parts    int32
	inTopic  bool
	done     bool
	err      error
	cur      Fetched
}

// Reset starts a scan of body, a Fetch response body at version.
func (s *FetchedScan) Reset(body []byte, version int16) {
	*s = FetchedScan{r: kbin.Reader{Src: body}, body: body, version: version, flexible: Flexible(fetchKey, version)}
	r := &s.r
	if version >= 1 {
		r.Int32() // throttle
	}
	if version >= 7 {
		r.Span(2 + 4) // error code, session id
	}
	n := arrayLen(r, s.flexible)
	if !r.Ok() || tooShort(n, 2, r) || version >= topicIDFrom && tooShort(n, 18, r) {
		s.fail()
		return
	}
	s.topics = max(n, 0)
}

// Next returns the next partition of the response, or false at its end or
// on an error (see Err).
func (s *FetchedScan) Next() (Fetched, bool) {
	r := &s.r
	for s.err == nil && !s.done {
		if s.parts > 0 {
			s.parts--
			if len(r.Src) < 4+2+8 {
				s.fail()
				break
			}
			head := kbin.Reader{Src: r.Src[:4+2+8]}
			s.cur.Partition = head.Int32()
			s.cur.ErrorCode = head.Int16()
			s.cur.HighWatermark = head.Int64()
			s.cur.Records = skipFetchResponsePartition(r, s.version, s.flexible)
			if !r.Ok() {
				s.fail()
				break
			}
			return s.cur, true
		}
		if s.inTopic {
			s.inTopic = false
			if s.flexible {
				skipTags(r)
			}
		}
		if s.topics == 0 {
			s.done = true
			if _, err := responseTags(r, s.body, s.flexible); err != nil {
				s.fail()
			}
			break
		}
		s.topics--
		s.cur = Fetched{}
		if s.version >= topicIDFrom {
			s.cur.TopicID = r.Uuid()
		} else {
			s.cur.Topic = readString(r, s.flexible)
		}
		p := fetchResponsePartitions
		n := arrayLen(r, s.flexible)
		if !r.Ok() || tooShort(n, p.min, r) || s.version >= p.later && tooShort(n, p.minLater, r) {
			s.fail()
			break
		}
		s.parts = max(n, 0)
		s.inTopic = true
	}
	return Fetched{}, false
}

// Err returns ErrCannotScan if the body did not scan; it is final only
// once Next has returned false.
func (s *FetchedScan) Err() error { return s.err }

func (s *FetchedScan) fail() {
	s.err = ErrCannotScan
	s.topics, s.parts = 0, 0
}
