package capture

import (
	"encoding/binary"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/wire"
)

// A Produce that streams in None mode is never whole in memory, but the
// client reader finds each of its partitions on the way, from a peek at
// the client socket or the bytes it read: the partition's header and the
// record bytes after it, and, in the same bytes, nearly always the header
// of its first record batch. Brokers take one batch per partition
// (Produce v3 and later), so that header's record count is the
// partition's: the event gets each partition's bytes and, where the one
// batch's header was in view, its records, reading a few bytes already in
// memory (BenchmarkAuditStreamedProduce: under 1 µs more a request of 12
// partitions of 64 KiB, in either data path; about 0.3% of the streaming
// path's CPU per GB). In Connection mode a large Produce is spliced whole
// unless the audit records Produce requests and the request is answered
// (acks not 0): then it streams as in None mode, none of its partitions
// the sequencer's concern, to be counted. That costs the walk's system
// calls, a peek and a splice per partition rather than one splice per
// request: measured side by side with the whole request spliced and no
// audit, four runs of the bench's producer, 1.03 (one partition) and
// 1.14, 1.04 and 1.03 (twelve) times the CPU per GB with the per-request
// audit, beside 1.09, 1.09, 0.98 and 1.00 for the audit without the walk
// in the same runs; a summary with the walk 0.88 to 1.12 times one
// without. Its batches were full (1 MiB); small batches pay the system
// calls over fewer bytes. The partitions are handed to the request's
// event before the frame's last byte goes upstream, under the Conn's
// lock, which the goroutine delivering the response takes before it reads
// them.

// Stream counts the partitions of a Produce as its body streams; client
// reader. Its zero value counts nothing.
type Stream struct {
	ar      *Req // the streaming request's event; nil: not audited
	counted []fetchPart
}

// Begin counts the partitions of the request whose event is ar (nil: the
// request is not audited) from now on.
func (s *Stream) Begin(ar *Req) {
	s.ar, s.counted = ar, s.counted[:0]
}

// On reports whether the streaming request's partitions are counted.
func (s *Stream) On() bool { return s.ar != nil }

// Count adds the partition step found to the streaming request's event:
// its record bytes and, when rec (the bytes after the partition's header
// that are in view) begins with the header of a batch that is all of
// them, the batch's records; a partition of several batches, or whose
// batch header was not in view, is left uncounted. Client reader.
func (c *Conn) Count(s *Stream, step wire.StreamStep, rec []byte) {
	const lengthAt, magicAt, countAt = 8, 16, 57
	p := step.Partition
	part := audit.Partition{Partition: p.Partition, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset,
		Committed: audit.NoOffset, FetchOffset: audit.NoOffset, Bytes: step.Records}
	if len(rec) >= countAt+4 && rec[magicAt] == 2 && 12+int64(int32(binary.BigEndian.Uint32(rec[lengthAt:]))) == step.Records {
		part.Records = int64(int32(binary.BigEndian.Uint32(rec[countAt:])))
	}
	name := ""
	if n := len(s.counted); n > 0 && sameTopic(s.counted[n-1].topic, p.Topic, p.TopicID) {
		name = s.counted[n-1].topic
	} else {
		name = c.names.get(p.Topic, p.TopicID)
	}
	s.counted = append(s.counted, fetchPart{topic: name, Partition: part})
}

// Streamed hands the partitions counted to the streaming request's event
// before the frame's last byte goes upstream; client reader.
func (c *Conn) Streamed(s *Stream) {
	ar := s.ar
	if ar == nil {
		return
	}
	s.ar = nil
	c.mu.Lock()
	ar.fetch = append(ar.fetch[:0], s.counted...)
	ar.counted = true
	c.mu.Unlock()
	clear(s.counted) // no topic name kept alive
	s.counted = s.counted[:0]
}

// streamedResources makes the partitions a streamed request counted its
// event's resources; on the goroutine delivering its response, which
// comes after the frame's last byte.
func (c *Conn) streamedResources(ar *Req) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ar.counted {
		groupResources(ar, "Write")
	}
}
