package single

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker keeps a Fetch answer within its max_bytes: once the answer
// holds that much, the partitions after it get no records (KIP-74; only
// the first partition's first batch may go past it). Some Kafka-compatible
// brokers answer every partition's batch whatever the maximum. The proxy
// lowers a part's maximum to the memory it holds for it (reserveFetchRoom),
// so such a broker sends several times what the proxy keeps, and the rest
// is read and dropped (fetchcut.go), fetch after fetch.
//
// A broker seen doing that (two partitions' records or more dropped from
// one answer, more than the part's maximum of them) is asked, in round 1,
// only as many of a part's partitions with records to give as its maximum
// holds, at each partition's own maximum, in the client's order (clients
// turn that order from one fetch to the next, so that no partition always
// comes last). The partitions left out are answered as a broker answers
// those past its maximum: no records, the watermarks it last gave, when
// it gave them since the client's last write to them; a partition without
// such watermarks is asked. A partition known to have nothing past its
// offset is asked too: it costs its broker nothing, and its watermarks
// stay fresh; and so is one asked below its log start, whose error a
// broker gives whatever the maximum. The long polls of round 2 ask the whole part, so that a
// record on any partition ends them. A broker that keeps to its maximum
// is never trimmed for: it sends no more than the proxy keeps.

// noteOvershootLocked learns from a cut answer of broker node to ref, of
// which dropped partitions' records were dropped, bytes of them, whether
// that broker answers past a Fetch's max_bytes. The caller holds s.mu.
func (s *Conn) noteOvershootLocked(node int32, ref *partRef, dropped int, bytes int64) {
	most := int64(ref.maxBytes)
	if most <= 0 {
		st := ref.st
		if st == nil {
			return
		}
		fr, ok := st.plan.Parts[ref.i].Request.(*kmsg.FetchRequest) // the plan is not changed once sent
		if !ok {
			return
		}
		most = int64(fr.MaxBytes)
	}
	// Within its maximum, a broker gives a second partition records only
	// while the answer holds less than the maximum.
	if dropped < 2 || bytes <= most {
		return
	}
	if s.overshoots == nil {
		s.overshoots = make(map[int32]bool)
	}
	s.overshoots[node] = true
}

// trimLocked leaves out of q, a round-1 part for u's broker, the
// partitions past what q's maximum holds when that broker answers past
// it, and returns them answered from what the broker last said of them;
// nil when it left nothing out, q unchanged. q's topics are its own
// after a trim. The caller holds s.mu.
func (u *upstream) trimLocked(q *kmsg.FetchRequest) []kmsg.FetchResponseTopic {
	s := u.s
	if !s.overshoots[u.key.node] || q.MaxBytes <= 0 || len(u.marks) == 0 {
		return nil
	}
	table := s.v.Table()
	committed := q.IsolationLevel == 1
	room, est := int64(q.MaxBytes), int64(0)
	var fills []kmsg.FetchResponseTopic
	topics := make([]kmsg.FetchRequestTopic, 0, len(q.Topics))
	for i := range q.Topics {
		t := &q.Topics[i]
		kept := make([]kmsg.FetchRequestTopicPartition, 0, len(t.Partitions))
		var fill kmsg.FetchResponseTopic
		for _, p := range t.Partitions {
			m, fresh := u.freshMarkLocked(table, t.Topic, t.TopicID, p.Partition)
			end := m.hw
			if committed {
				end = m.lso
			}
			switch {
			case fresh && (p.FetchOffset >= end || p.FetchOffset < m.logStart):
				// Nothing to give, or an error to: asked, for
				// nothing past its offset, or for the error.
			case fresh && est > 0 && est >= room:
				fill.Partitions = append(fill.Partitions, m.answer(p.Partition))
				continue
			default:
				est += int64(max(p.PartitionMaxBytes, 1))
			}
			kept = append(kept, p)
		}
		if len(fill.Partitions) > 0 {
			fill.Topic, fill.TopicID = t.Topic, t.TopicID
			fills = append(fills, fill)
		}
		if len(kept) > 0 {
			nt := *t
			nt.Partitions = kept
			topics = append(topics, nt)
		}
	}
	if fills == nil {
		return nil
	}
	q.Topics = topics
	return fills
}

// fillFetch adds to fr the partitions of fills it does not answer, each
// into its topic's entry or a new one.
func fillFetch(fr *kmsg.FetchResponse, fills []kmsg.FetchResponseTopic) {
	if fr.ErrorCode != 0 {
		return
	}
	type topicKey struct {
		name string
		id   [16]byte
	}
	at := make(map[topicKey]int, len(fr.Topics))
	for i := range fr.Topics {
		at[topicKey{fr.Topics[i].Topic, fr.Topics[i].TopicID}] = i
	}
	for _, ft := range fills {
		i, ok := at[topicKey{ft.Topic, ft.TopicID}]
		if !ok {
			ft.Partitions = slices.Clip(ft.Partitions) // appended to in one answer only
			fr.Topics = append(fr.Topics, ft)
			continue
		}
		t := &fr.Topics[i]
		has := make(map[int32]bool, len(t.Partitions))
		for j := range t.Partitions {
			has[t.Partitions[j].Partition] = true
		}
		for _, fp := range ft.Partitions {
			if !has[fp.Partition] {
				t.Partitions = append(t.Partitions, fp)
			}
		}
	}
}
