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

	topicWalk
	schema  commitSchema
	version int16
}

// Reset starts a scan of body, a request body of key (OffsetCommit or
// TxnOffsetCommit) at version, and reads everything before the topics.
func (s *CommitScan) Reset(key int16, body []byte, version int16) error {
	schema := offsetCommitSchema
	if key == txnOffsetCommitKey {
		schema = txnOffsetCommitSchema
	}
	*s = CommitScan{
		topicWalk: topicWalk{r: kbin.Reader{Src: body}, flexible: Flexible(key, version), byID: version >= schema.topicIDFrom, partMin: 14},
		schema:    schema,
		version:   version,
	}
	if version >= schema.epochFrom {
		s.partMin = 18
	}
	r := &s.r
	switch key {
	case offsetCommitKey:
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
	return s.startTopics()
}

// Next returns the next partition committed, or false at the end of the
// request or on an error (see Err).
func (s *CommitScan) Next() (Partition, bool) {
	if !s.nextPartition() {
		return Partition{}, false
	}
	r := &s.r
	s.cur.Partition = r.Int32()
	r.Int64() // offset
	if s.version == s.schema.timestampIn {
		r.Int64() // timestamp
	}
	if s.version >= s.schema.epochFrom {
		r.Int32() // leader epoch
	}
	skipNullableString(r, s.flexible) // metadata
	return s.endPartition()
}
