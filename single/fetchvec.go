package single

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A merged Fetch answer written as a vector. The merged answer's record
// sets alias its parts' answer frames (kmsg slices a byte field out of the
// frame it reads), so encoding it copies every record byte once more. The
// vector instead encodes what the proxy writes itself (the frame's prefix
// and header, the counts, every partition's fields, its own endpoints) into
// a head, and leaves each large record set where it lies: the frame is the
// head's pieces with the record sets between them, byte for byte what
// wire.AppendResponse of fr.AppendTo writes (TestFetchVectorIsKmsg,
// FuzzFetchVector).

// FetchPassed returns the bytes of fr's record sets of at least from bytes:
// what AppendFetchVector leaves out of the head.
func FetchPassed(fr *kmsg.FetchResponse, from int) int {
	n := 0
	for i := range fr.Topics {
		t := &fr.Topics[i]
		for j := range t.Partitions {
			if k := len(t.Partitions[j].RecordBatches); k >= from {
				n += k
			}
		}
	}
	return n
}

// AppendFetchVector appends to head the frame of fr, as the response to
// correlation, but for its record sets of at least from bytes, and returns
// the head and the frame's pieces in order: slices of the head and, between
// them, those record sets. The frame's length prefix counts them. pieces is
// reused for the pieces.
func AppendFetchVector(head []byte, pieces [][]byte, fr *kmsg.FetchResponse, correlation int32, flexible bool, from int) ([]byte, [][]byte) {
	start := len(head)
	type cut struct {
		at  int
		rec []byte
	}
	var cuts []cut
	passed := 0
	head = append(head, 0, 0, 0, 0)
	head = binary.BigEndian.AppendUint32(head, uint32(correlation))
	if flexible {
		head = append(head, 0)
	}
	v := fr.Version
	flex := v >= 12
	if v >= 1 {
		head = kbin.AppendInt32(head, fr.ThrottleMillis)
	}
	if v >= 7 {
		head = kbin.AppendInt16(head, fr.ErrorCode)
		head = kbin.AppendInt32(head, fr.SessionID)
	}
	head = appendArrayLen(head, len(fr.Topics), flex)
	for i := range fr.Topics {
		t := &fr.Topics[i]
		if v <= 12 {
			head = appendString(head, t.Topic, flex)
		}
		if v >= 13 {
			head = kbin.AppendUuid(head, t.TopicID)
		}
		head = appendArrayLen(head, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			head = kbin.AppendInt32(head, p.Partition)
			head = kbin.AppendInt16(head, p.ErrorCode)
			head = kbin.AppendInt64(head, p.HighWatermark)
			if v >= 4 {
				head = kbin.AppendInt64(head, p.LastStableOffset)
			}
			if v >= 5 {
				head = kbin.AppendInt64(head, p.LogStartOffset)
			}
			if v >= 4 {
				at := p.AbortedTransactions
				if flex {
					head = kbin.AppendCompactNullableArrayLen(head, len(at), at == nil)
				} else {
					head = kbin.AppendNullableArrayLen(head, len(at), at == nil)
				}
				for k := range at {
					head = kbin.AppendInt64(head, at[k].ProducerID)
					head = kbin.AppendInt64(head, at[k].FirstOffset)
					if flex {
						head = appendTags(head, &at[k].UnknownTags)
					}
				}
			}
			if v >= 11 {
				head = kbin.AppendInt32(head, p.PreferredReadReplica)
			}
			rec := p.RecordBatches
			switch {
			case rec == nil && flex:
				head = append(head, 0)
			case rec == nil:
				head = kbin.AppendInt32(head, -1)
			default:
				if flex {
					head = kbin.AppendUvarint(head, uint32(len(rec))+1)
				} else {
					head = kbin.AppendInt32(head, int32(len(rec)))
				}
				if len(rec) > 0 && len(rec) >= from {
					cuts = append(cuts, cut{len(head), rec})
					passed += len(rec)
				} else {
					head = append(head, rec...)
				}
			}
			if flex {
				head = appendPartitionTags(head, p)
			}
		}
		if flex {
			head = appendTags(head, &t.UnknownTags)
		}
	}
	if flex {
		n := fr.UnknownTags.Len()
		if len(fr.Brokers) > 0 {
			n++
		}
		head = kbin.AppendUvarint(head, uint32(n))
		head = appendTagged(head, 0, len(fr.Brokers) > 0, func(b []byte) []byte {
			b = kbin.AppendCompactArrayLen(b, len(fr.Brokers))
			for k := range fr.Brokers {
				br := &fr.Brokers[k]
				b = kbin.AppendInt32(b, br.NodeID)
				b = kbin.AppendCompactString(b, br.Host)
				b = kbin.AppendInt32(b, br.Port)
				b = kbin.AppendCompactNullableString(b, br.Rack)
				b = appendTags(b, &br.UnknownTags)
			}
			return b
		})
		head = fr.UnknownTags.AppendEach(head)
	}
	binary.BigEndian.PutUint32(head[start:], uint32(len(head)-start-4+passed))
	at := start
	for _, c := range cuts {
		pieces = append(pieces, head[at:c.at], c.rec)
		at = c.at
	}
	return head, append(pieces, head[at:])
}

// appendPartitionTags appends a flexible partition's tag section as kmsg
// writes it: its known tags that differ from their defaults, in order, then
// its unknown tags.
func appendPartitionTags(b []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	de, cl, sn := &p.DivergingEpoch, &p.CurrentLeader, &p.SnapshotID
	hasDE := de.Epoch != -1 || de.EndOffset != -1 || de.UnknownTags.Len() > 0
	hasCL := cl.LeaderID != -1 || cl.LeaderEpoch != -1 || cl.UnknownTags.Len() > 0
	hasSN := sn.EndOffset != -1 || sn.Epoch != -1 || sn.UnknownTags.Len() > 0
	n := p.UnknownTags.Len()
	for _, has := range [3]bool{hasDE, hasCL, hasSN} {
		if has {
			n++
		}
	}
	b = kbin.AppendUvarint(b, uint32(n))
	b = appendTagged(b, 0, hasDE, func(b []byte) []byte {
		b = kbin.AppendInt32(b, de.Epoch)
		b = kbin.AppendInt64(b, de.EndOffset)
		return appendTags(b, &de.UnknownTags)
	})
	b = appendTagged(b, 1, hasCL, func(b []byte) []byte {
		b = kbin.AppendInt32(b, cl.LeaderID)
		b = kbin.AppendInt32(b, cl.LeaderEpoch)
		return appendTags(b, &cl.UnknownTags)
	})
	b = appendTagged(b, 2, hasSN, func(b []byte) []byte {
		b = kbin.AppendInt64(b, sn.EndOffset)
		b = kbin.AppendInt32(b, sn.Epoch)
		return appendTags(b, &sn.UnknownTags)
	})
	return p.UnknownTags.AppendEach(b)
}

// appendTagged appends, when has, the tagged field key whose value field
// appends.
func appendTagged(b []byte, key uint32, has bool, field func([]byte) []byte) []byte {
	if !has {
		return b
	}
	return appendSized(kbin.AppendUvarint(b, key), field)
}

// appendSized appends what field appends, preceded by its length as a
// uvarint: a tagged field's value.
func appendSized(b []byte, field func([]byte) []byte) []byte {
	at := len(b)
	b = field(b)
	n := len(b) - at
	w := uvarintLen(uint64(n))
	b = append(b, make([]byte, w)...)
	copy(b[at+w:], b[at:at+n])
	kbin.AppendUvarint(b[:at], uint32(n))
	return b
}

// appendTags appends a struct's tag section holding only unknown tags.
func appendTags(b []byte, t *kmsg.Tags) []byte {
	b = kbin.AppendUvarint(b, uint32(t.Len()))
	return t.AppendEach(b)
}

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendCompactArrayLen(b, n)
	}
	return kbin.AppendArrayLen(b, n)
}

func appendString(b []byte, s string, flex bool) []byte {
	if flex {
		return kbin.AppendCompactString(b, s)
	}
	return kbin.AppendString(b, s)
}
