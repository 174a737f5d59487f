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
// unless the audit records Produce requests: then it streams as in None
// mode, none of its partitions the sequencer's concern, to be counted (an
// acks=0 one keeps its acks, and its event is recorded once it is
// written). That costs the walk's system calls, a peek and a splice per
// partition rather than one splice per request. Measured with the bench's
// producer (BENCHMARKS.md, runs 82 to 84: 12 partitions, full 1 MiB
// batches, three runs of twelve rounds), the walked audit took 1.05, 1.05
// and 1.14 times the CPU per GB of the proxy without the audit, and an
// audit that spliced the request whole (its partitions only the
// answer's) 1.03, 1.05 and 1.04 in the same rounds: the event, not the
// walk, is most of what an audited Produce costs. Small batches pay the
// system calls over fewer bytes. The partitions are handed to the
// request's event before the frame's last byte goes upstream, under the
// Conn's lock, which the goroutine delivering the response takes before
// it reads them.

// Stream counts the partitions of a Produce as its body streams; client
// reader. Its zero value counts nothing.
type Stream struct {
	ar      *Req // the streaming request's event; nil: not audited
	counted []fetchPart
	omitted int64 // partitions past maxEventParts, not counted
}

// Begin counts the partitions of the request whose event is ar (nil: the
// request is not audited) from now on.
func (s *Stream) Begin(ar *Req) {
	s.ar, s.counted, s.omitted = ar, s.counted[:0], 0
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
	if len(s.counted) >= maxEventParts {
		// Not held in memory: the body is not either.
		s.omitted++
		return
	}
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
	if s.omitted > 0 {
		ar.req.PartitionsOmitted += s.omitted
		ar.added, ar.full = maxEventParts, true
	}
	c.mu.Unlock()
	clear(s.counted) // no topic name kept alive
	s.counted = s.counted[:0]
	if cap(s.counted) > keepParts {
		s.counted = nil
	}
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

// A Fetch response streamed to the client is never whole in memory either:
// the walk that streams it (the proxy's fetchstream.go) reports each
// topic and partition as it passes, from the headers it reads anyway,
// and shows the counter below the records' bytes it holds in memory and
// the header of every batch it splices: the event gets what fillFetched
// would have read from the response whole.

// Fetched counts what a streamed Fetch response returns, partition by
// partition, as it passes; on the goroutine delivering the responses. Its
// zero value counts nothing.
type Fetched struct {
	ar *Req // the streamed response's request's event; nil: not audited
	at int  // where the next partition is looked for in ar.fetch
	// The topic whose partitions pass: its name (a copy) or id.
	topic []byte
	id    [16]byte
	// part is the partition whose records pass, while open; left of its
	// record bytes are still to pass, skip of them are the rest of the
	// batch whose header was read, hn bytes of the next header are in
	// hdr; stop: a batch cut short or a legacy one was met, the rest is
	// not counted.
	part audit.Partition
	open bool
	left int64
	skip int64
	hdr  [batchHeader]byte
	hn   int
	stop bool
}

// Begin counts the response to the request whose event is ar (nil: not
// audited, and what was counted of an earlier response is let go).
func (f *Fetched) Begin(ar *Req) {
	*f = Fetched{ar: ar, topic: f.topic[:0]}
}

// On reports whether the streamed response is counted.
func (f *Fetched) On() bool { return f.ar != nil }

// FetchTopic starts a topic of the response, named name or identified by
// id; name is copied.
func (c *Conn) FetchTopic(f *Fetched, name []byte, id [16]byte) {
	f.topic, f.id = append(f.topic[:0], name...), id
}

// FetchPartition starts a partition of the current topic whose header
// says partition and code, and whose records, records bytes, follow.
func (c *Conn) FetchPartition(f *Fetched, partition int32, code int16, records int64) {
	f.part = audit.Partition{Partition: partition, ErrorCode: code, Bytes: records, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset}
	f.open, f.left, f.skip, f.hn, f.stop = true, records, 0, 0, false
	c.fetchSettle(f)
}

// Unseen is how many of the next bytes of the current partition's
// records may pass without being shown (FetchSkip): the rest of a batch
// whose header was read, or all of them once counting stopped; 0 where
// the next batch's header is due.
func (f *Fetched) Unseen() int64 {
	switch {
	case !f.open:
		return 0
	case f.stop:
		return f.left
	}
	return f.skip
}

// FetchRecords shows the counter the next bytes of the current
// partition's records, b, which go no further than them.
func (c *Conn) FetchRecords(f *Fetched, b []byte) {
	for len(b) > 0 && f.open {
		if n := min(int64(len(b)), f.Unseen()); n > 0 {
			c.FetchSkip(f, n)
			b = b[n:]
			continue
		}
		k := copy(f.hdr[f.hn:], b)
		f.hn += k
		f.left -= int64(k)
		b = b[k:]
		if f.hn == batchHeader {
			f.hn = 0
			size, ok := batchSize(f.hdr[:], f.left+batchHeader)
			if ok {
				f.part.Records, f.part.FirstOffset, f.part.LastOffset = addBatch(f.hdr[:], f.part.Records, f.part.FirstOffset, f.part.LastOffset)
				f.skip = size - batchHeader
			} else {
				f.stop = true
			}
		}
		c.fetchSettle(f)
	}
}

// FetchSkip lets the next n bytes of the current partition's records pass
// unseen; n is at most Unseen.
func (c *Conn) FetchSkip(f *Fetched, n int64) {
	f.left -= n
	if !f.stop {
		f.skip -= n
	}
	c.fetchSettle(f)
}

// fetchSettle ends the current partition once its records passed, giving
// the event what it returned; and stops the count where the bytes left
// cannot hold a batch's header (a batch cut short, not counted).
func (c *Conn) fetchSettle(f *Fetched) {
	switch {
	case !f.open:
	case f.left == 0:
		f.open = false
		if f.ar != nil {
			f.at = c.fetchedInto(f.ar, f.at, f.topic, f.id, f.part)
		}
	case !f.stop && f.skip == 0 && f.hn == 0 && f.left < batchHeader:
		f.stop = true
	}
}

// FetchEnd ends the count at the end of the response's topics; code is
// the response's error code.
func (c *Conn) FetchEnd(f *Fetched, code int16) {
	if f.ar != nil && f.ar.req.APIVersion >= 7 {
		f.ar.req.ErrorCode = code
	}
	f.Begin(nil)
}
