package wire

import "github.com/twmb/franz-go/pkg/kbin"

// Produced is one partition of a Produce response: the error the client got
// and the offset the broker gave the partition's first record. Topic
// aliases the scanned body; it is empty from v13, where TopicID names the
// topic.
type Produced struct {
	Topic      []byte
	TopicID    [16]byte
	Partition  int32
	ErrorCode  int16
	BaseOffset int64
}

// ProducedScan walks the partitions of a Produce response body, as
// ScanEndpoints walks it: every field skipped by its length, no message
// built, nothing allocated, and exactly what kmsg accepts accepted
// (checked by FuzzScanProduced). A caller that needs every partition or
// none reads them all first and believes them once Err is nil, which
// checks the body to its end (throttle and tags included). The zero value
// is ready for Reset; Reset with a nil body lets the last body go.
//
//	s.Reset(body, version)
//	for p, ok := s.Next(); ok; p, ok = s.Next() { ... }
//	if s.Err() != nil { ... }
type ProducedScan struct {
	r        kbin.Reader
	body     []byte
	version  int16
	flexible bool
	topics   int32 // topics not yet started
	parts    int32 // partitions of the current topic not yet read
	inTopic  bool
	done     bool
	err      error
	cur      Produced
}

// Reset starts a scan of body, a Produce response body at version.
func (s *ProducedScan) Reset(body []byte, version int16) {
	*s = ProducedScan{r: kbin.Reader{Src: body}, body: body, version: version, flexible: Flexible(produceKey, version)}
	r := &s.r
	n := arrayLen(r, s.flexible)
	if !r.Ok() || tooShort(n, 2, r) || version >= topicIDFrom && tooShort(n, 18, r) {
		s.fail()
		return
	}
	s.topics = max(n, 0)
}

// Next returns the next partition of the response, or false at its end or
// on an error (see Err).
func (s *ProducedScan) Next() (Produced, bool) {
	r := &s.r
	for s.err == nil && !s.done {
		if s.parts > 0 {
			s.parts--
			if len(r.Src) < 4+2+8 {
				s.fail()
				break
			}
			// Read in place, then skipped with every field after them
			// as ScanEndpoints skips a partition.
			head := kbin.Reader{Src: r.Src[:4+2+8]}
			s.cur.Partition = head.Int32()
			s.cur.ErrorCode = head.Int16()
			s.cur.BaseOffset = head.Int64()
			skipProduceResponsePartition(r, s.version, s.flexible)
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
			s.finish()
			break
		}
		s.topics--
		s.cur = Produced{}
		if s.version >= topicIDFrom {
			s.cur.TopicID = r.Uuid()
		} else {
			s.cur.Topic = readString(r, s.flexible)
		}
		n := arrayLen(r, s.flexible)
		if !r.Ok() || tooShort(n, produceResponsePartitions.min, r) ||
			s.version >= produceResponsePartitions.later && tooShort(n, produceResponsePartitions.minLater, r) {
			s.fail()
			break
		}
		s.parts = max(n, 0)
		s.inTopic = true
	}
	return Produced{}, false
}

// finish reads what follows the topics: the throttle and the body's tags,
// whose node endpoints must read as kmsg reads them.
func (s *ProducedScan) finish() {
	s.done = true
	if s.version >= 1 {
		s.r.Int32() // throttle
	}
	if _, err := responseTags(&s.r, s.body, s.flexible); err != nil {
		s.fail()
	}
}

// Err returns ErrCannotScan if the body did not scan; it is final only
// once Next has returned false.
func (s *ProducedScan) Err() error { return s.err }

func (s *ProducedScan) fail() {
	s.err = ErrCannotScan
	s.topics, s.parts = 0, 0
}
