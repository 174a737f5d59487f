package single

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
)

// A Fetch part goes to its broker on a connection of its own
// (conn.go), not behind the writes the client pipelined before it
// to that broker: the broker may read it first, where Kafka, reading one
// connection one request at a time, would have processed the writes
// before the Fetch and answered the records they wrote. So the proxy
// orders what the broker would have:
//
//   - a Fetch part is not sent while an earlier write of the client
//     connection to one of its partitions is unanswered, wherever that
//     write went (a leader may have moved): a Produce or DeleteRecords
//     part touching the partition, an OffsetCommit or TxnOffsetCommit
//     part for a Fetch of the offsets topic. An acks=0 Produce part gets
//     no answer, so the connection that carried one is fenced first: an
//     ApiVersions v0 sent behind it, whose answer says the broker has
//     processed it (awaitWrites);
//   - what a Fetch takes from earlier fetches (an abandoned long poll, the
//     watermarks a broker last gave) must have been asked after the last
//     write to those partitions was answered: each write answered ticks a
//     clock and stamps its partitions with it, each fetch part carries the
//     tick it was sent at, and a poll or a mark older than a stamp is not
//     used (takeOver, poll, synthLocked).
//
// The flusher waits, so what follows the Fetch waits with it, as it would
// behind the Fetch on a Kafka connection. The cost falls on connections
// that write and fetch the same partitions: one that only fetches has
// nothing to wait for (its commits write to the offsets topic, which it
// does not fetch), and one that only writes stamps nothing, since it has
// nothing fetched.

// fenceFrame is the request sent behind acks=0 writes: the oldest
// ApiVersions, which every broker answers; the answer is dropped.
var fenceFrame = func() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("inorder")).AppendRequest(nil, req, 0)
}()

// A part's relation to the Fetch requests behind it.
const (
	orderNone   = iota
	orderWrite  // Produce, DeleteRecords: a Fetch of its partitions waits for it
	orderCommit // OffsetCommit, TxnOffsetCommit: a Fetch of the offsets topic waits for it
)

// fetchOrder says how a part of key orders the Fetch requests behind it.
func fetchOrder(key int16) int {
	switch kmsg.Key(key) {
	case kmsg.Produce, kmsg.DeleteRecords:
		return orderWrite
	case kmsg.OffsetCommit, kmsg.TxnOffsetCommit:
		return orderCommit
	}
	return orderNone
}

// offsetsTopic is where OffsetCommit and TxnOffsetCommit write; which
// partition is the coordinator's business, so a commit counts as a write
// to the whole topic.
const offsetsTopic = "__consumer_offsets"

// eachWritten calls fn with each partition a Produce or DeleteRecords
// part writes, as the request names it.
func eachWritten(req kmsg.Request, fn func(topic string, id [16]byte, partition int32)) {
	switch q := req.(type) {
	case *kmsg.ProduceRequest:
		for i := range q.Topics {
			t := &q.Topics[i]
			for j := range t.Partitions {
				fn(t.Topic, t.TopicID, t.Partitions[j].Partition)
			}
		}
	case *kmsg.DeleteRecordsRequest:
		for i := range q.Topics {
			t := &q.Topics[i]
			for j := range t.Partitions {
				fn(t.Topic, [16]byte{}, t.Partitions[j].Partition)
			}
		}
	}
}

// eachKey calls fn with the keys a partition is known by: its topic's
// name and its topic's id, as far as table knows them.
func eachKey(table *splitmerge.Table, topic string, id [16]byte, partition int32, fn func(markKey)) {
	name, tid := table.Topic(topic, id)
	if name != "" {
		fn(markKey{topic: name, partition: partition})
	}
	if tid != ([16]byte{}) {
		fn(markKey{id: tid, partition: partition})
	}
}

// fetchesOffsets reports whether q reads the offsets topic.
func fetchesOffsets(table *splitmerge.Table, q *kmsg.FetchRequest) bool {
	for i := range q.Topics {
		if name, _ := table.Topic(q.Topics[i].Topic, q.Topics[i].TopicID); name == offsetsTopic {
			return true
		}
	}
	return false
}

// awaitWrites holds the Fetch part q until every earlier write of the
// client connection that it could read is processed by its broker: the
// acks=0 writes fenced, and no write to one of its partitions
// unanswered. Flusher only.
func (s *Conn) awaitWrites(q *kmsg.FetchRequest) {
	s.fence()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writesOut == 0 && s.commitsOut == 0 {
		return
	}
	table := s.v.Table()
	offsets := fetchesOffsets(table, q)
	if s.writesOut == 0 && !offsets {
		return
	}
	reads := make(map[markKey]bool)
	for i := range q.Topics {
		t := &q.Topics[i]
		for j := range t.Partitions {
			eachKey(table, t.Topic, t.TopicID, t.Partitions[j].Partition, func(k markKey) { reads[k] = true })
		}
	}
	for !s.closed && s.writingLocked(table, reads, offsets) {
		s.cond.Wait()
	}
}

// writingLocked reports whether a fence, a write to a partition of
// reads, or with offsets a commit, is in flight on one of the client
// connection's upstream connections. The caller holds s.mu.
func (s *Conn) writingLocked(table *splitmerge.Table, reads map[markKey]bool, offsets bool) bool {
	for u := range s.open {
		if u.key.fetch {
			continue
		}
		if u.dialing && u.nc != nil {
			// Its dial is done and the parts that waited for it are
			// being sent (connect): taken from queued and not yet
			// pending, they are in neither; the sending ends with a
			// broadcast.
			return true
		}
		refs := maps.Values(u.pending)
		if len(u.queued) > 0 {
			// Parts waiting for the dial count as sent: they go
			// first once it connects.
			var waiting []*partRef
			for _, e := range u.queued {
				if e.ref != nil {
					waiting = append(waiting, e.ref)
				}
			}
			refs = slices.Values(append(waiting, slices.Collect(refs)...))
		}
		for ref := range refs {
			switch {
			case ref.fence:
				return true
			case fetchOrder(ref.key) == orderCommit:
				if offsets {
					return true
				}
			case fetchOrder(ref.key) == orderWrite:
				hit := false
				eachWritten(ref.st.plan.Parts[ref.i].Request, func(topic string, id [16]byte, partition int32) {
					eachKey(table, topic, id, partition, func(k markKey) { hit = hit || reads[k] })
				})
				if hit {
					return true
				}
			}
		}
	}
	return false
}

// fence sends a fence on every upstream connection that carried acks=0
// writes since its last one; awaitWrites then waits for its answer.
// Flusher only.
func (s *Conn) fence() {
	s.mu.Lock()
	var blind []*upstream
	for u := range s.open {
		if u.blind {
			u.blind = false
			blind = append(blind, u)
		}
	}
	s.mu.Unlock()
	for _, u := range blind {
		u.sendFence()
	}
}

// sendFence sends a fence on u; a retiring connection is fenced before
// it is closed.
func (u *upstream) sendFence() {
	ref := &partRef{key: keyApiVersions, version: 0, fence: true}
	s := u.s
	s.mu.Lock()
	if u.dialing {
		// Behind the acks=0 writes that wait for the dial.
		s.sentLocked(u, ref)
		u.queued = append(u.queued, queuedPart{ref: ref})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f := append([]byte(nil), fenceFrame...)
	u.send([][]byte{f}, []*partRef{ref})
}

// sentLocked counts ref, a part about to be sent on u (or to wait for
// u's dial), among what a Fetch may have to wait for, or stamps it with
// the tick, for a fetch; once. The caller holds s.mu.
func (s *Conn) sentLocked(u *upstream, ref *partRef) {
	if ref.counted {
		return
	}
	ref.counted = true
	switch {
	case u.key.fetch:
		s.fetched = true
		ref.sent = s.tick
	case ref.fence, fetchOrder(ref.key) == orderWrite:
		s.writesOut++
	case fetchOrder(ref.key) == orderCommit:
		s.commitsOut++
	}
}

// leftLocked records that ref, a part sent on u, is answered or failed:
// a write or a fence is processed, or will never be, and what the client
// connection fetched before is stale for the partitions it wrote. The
// caller holds s.mu.
func (s *Conn) leftLocked(ref *partRef) {
	order := fetchOrder(ref.key)
	switch {
	case ref.fence, order == orderWrite:
		s.writesOut--
	case order == orderCommit:
		s.commitsOut--
	default:
		return
	}
	s.cond.Broadcast()
	if !s.fetched {
		return
	}
	s.tick++
	switch {
	case ref.fence:
		// The acks=0 writes it fenced are not known by partition.
		s.stampAll = s.tick
		clear(s.stamps)
	case order == orderCommit:
		s.offsetsStamp = s.tick
	default:
		table := s.v.Table()
		eachWritten(ref.st.plan.Parts[ref.i].Request, func(topic string, id [16]byte, partition int32) {
			eachKey(table, topic, id, partition, s.stampLocked)
		})
	}
}

// stampLocked marks k written at the current tick. The stamps are bounded
// by maxMarks: a full set is forgotten for one stamp of every partition
// at this tick, later than each of them. The caller holds s.mu.
func (s *Conn) stampLocked(k markKey) {
	if s.stamps == nil {
		s.stamps = make(map[markKey]uint64)
	}
	if _, ok := s.stamps[k]; !ok && len(s.stamps) >= maxMarks {
		clear(s.stamps)
		s.stampAll = s.tick
	}
	s.stamps[k] = s.tick
}

// writtenSinceLocked reports whether a write to the partition was
// answered after a fetch sent at tick sent. The caller holds s.mu.
func (s *Conn) writtenSinceLocked(table *splitmerge.Table, sent uint64, topic string, id [16]byte, partition int32) bool {
	if s.stampAll > sent {
		return true
	}
	if len(s.stamps) == 0 && s.offsetsStamp <= sent {
		return false
	}
	name, _ := table.Topic(topic, id)
	since := name == offsetsTopic && s.offsetsStamp > sent
	eachKey(table, topic, id, partition, func(k markKey) { since = since || s.stamps[k] > sent })
	return since
}

// freshLocked reports whether a fetch of q's partitions sent at tick sent
// was sent after every write to them was answered. The caller holds s.mu.
func (s *Conn) freshLocked(sent uint64, q *kmsg.FetchRequest) bool {
	if s.stampAll <= sent && len(s.stamps) == 0 && s.offsetsStamp <= sent {
		return true
	}
	table := s.v.Table()
	for i := range q.Topics {
		t := &q.Topics[i]
		for j := range t.Partitions {
			if s.writtenSinceLocked(table, sent, t.Topic, t.TopicID, t.Partitions[j].Partition) {
				return false
			}
		}
	}
	return true
}
