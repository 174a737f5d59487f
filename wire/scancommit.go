package wire

import "github.com/twmb/franz-go/pkg/kbin"

// API keys of the commit requests CommitScan reads.
const (
	offsetCommitKey    = 8
	txnOffsetCommitKey = 28
)

// commitSchema is where an OffsetCommit and a TxnOffsetCommit request
// differ, as kmsg's generated readers branch: from which version topics
// are named by id, from which version a partition carries its leader epoch
// (and so takes at least 18 bytes instead of 14), and the one version whose
// partitions carry a timestamp (-1: none).
type commitSchema struct {
	topicIDFrom, epochFrom, timestampIn int16
}

var (
	offsetCommitSchema    = commitSchema{topicIDFrom: 10, epochFrom: 6, timestampIn: 1}
	txnOffsetCommitSchema = commitSchema{topicIDFrom: 6, epochFrom: 2, timestampIn: -1}
)

// CommitScan walks the partitions an OffsetCommit (key 8) or
// TxnOffsetCommit (key 28) request commits, as ProduceScan walks a
// Produce's: it skips every field by its length, builds no message and
// allocates nothing, and it accepts exactly what kmsg accepts (checked by a
// differential fuzz target). The zero value is ready for Reset.
//
// Group and every Partition.Topic alias the scanned body: a caller that
// keeps the scan between requests must Reset it with a nil body, or the
// scan keeps the body's buffer alive.
type CommitScan struct {
	// Group is the consumer group committed to, read by Reset.
	Group []byte

	r        kbin.Reader
	schema   commitSchema
	version  int16
	flexible bool
	topics   int32 // topics not yet started
	parts    int32 // partitions of the current topic not yet read
	inTopic  bool
	done     bool
	err      error
	cur      Partition
}

// Reset starts a scan of body, a request body of key (OffsetCommit or
// TxnOffsetCommit) at version, and reads everything before the topics.
func (s *CommitScan) Reset(key int16, body []byte, version int16) error {
	*s = CommitScan{r: kbin.Reader{Src: body}, version: version, flexible: Flexible(key, version)}
	r := &s.r
	switch key {
	case offsetCommitKey:
		s.schema = offsetCommitSchema
		s.Group = readString(r, s.flexible)
		if version >= 1 {
			r.Int32()                 // generation
			readString(r, s.flexible) // member id
		}
		if version >= 7 {
			skipNullableString(r, s.flexible) // instance id
		}
		if version >= 2 && version <= 4 {
			r.Int64() // retention
		}
	case txnOffsetCommitKey:
		s.schema = txnOffsetCommitSchema
		readString(r, s.flexible) // transactional id
		s.Group = readString(r, s.flexible)
		r.Int64() // producer id
		r.Int16() // producer epoch
		if version >= 3 {
			r.Int32()                         // generation
			readString(r, s.flexible)         // member id
			skipNullableString(r, s.flexible) // instance id
		}
	default:
		return s.fail()
	}
	n := arrayLen(r, s.flexible)
	if !r.Ok() || tooShort(n, 2, r) || version >= s.schema.topicIDFrom && tooShort(n, 18, r) {
		return s.fail()
	}
	s.topics = max(n, 0)
	return nil
}

// Next returns the next partition committed, or false at the end of the
// request or on an error (see Err).
func (s *CommitScan) Next() (Partition, bool) {
	r := &s.r
	for s.err == nil && !s.done {
		if s.parts > 0 {
			s.parts--
			s.cur.Partition = r.Int32()
			r.Int64() // offset
			if s.version == s.schema.timestampIn {
				r.Int64() // timestamp
			}
			if s.version >= s.schema.epochFrom {
				r.Int32() // leader epoch
			}
			skipNullableString(r, s.flexible) // metadata
			if s.flexible {
				skipTags(r)
			}
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
			if s.flexible {
				skipTags(r)
			}
			s.done = true
			if !r.Ok() {
				s.fail()
			}
			break
		}
		s.topics--
		s.cur = Partition{}
		if s.version >= s.schema.topicIDFrom {
			s.cur.TopicID = r.Uuid()
		} else {
			s.cur.Topic = readString(r, s.flexible)
		}
		n := arrayLen(r, s.flexible)
		if !r.Ok() || tooShort(n, 14, r) || s.version >= s.schema.epochFrom && tooShort(n, 18, r) {
			s.fail()
			break
		}
		s.parts = max(n, 0)
		s.inTopic = true
	}
	return Partition{}, false
}

// Err returns ErrCannotScan if the body did not scan; it is final only once
// Next has returned false.
func (s *CommitScan) Err() error { return s.err }

func (s *CommitScan) fail() error {
	s.err = ErrCannotScan
	s.topics, s.parts = 0, 0
	return s.err
}
