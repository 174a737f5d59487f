package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The commit scanner is checked against kmsg like the Produce scanner: on
// kmsg-made bodies of every version of both request types, on every
// truncation of them, and by FuzzScanCommitRequest.

// commitRequests returns OffsetCommit (key 8) or TxnOffsetCommit (key 28)
// request bodies at version, in shapes that exercise every field the
// scanner skips.
func commitRequests(key, version int16) [][]byte {
	type topic struct {
		name  string
		id    [16]byte
		parts []int32
	}
	shapes := [][]topic{
		nil,
		{{"orders", [16]byte{1, 2}, []int32{0, 7, 3}}, {"payments-eu", [16]byte{9}, []int32{2}}},
		{{"t", [16]byte{4}, nil}},
	}
	var out [][]byte
	for si, shape := range shapes {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation, r.MemberID = "group-a", 4, "member-1"
		if si == 1 {
			r.InstanceID = strp("instance")
			r.RetentionTimeMillis = 60000
		}
		for _, t := range shape {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = t.name, t.id
			for i, p := range t.parts {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.Timestamp, rp.LeaderEpoch = p, 100+int64(p), 5, 2
				if i == 1 {
					rp.Metadata = strp("some metadata")
					rp.UnknownTags.Set(7, []byte("tag"))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rt.UnknownTags.Set(2, []byte{1})
			r.Topics = append(r.Topics, rt)
		}
		r.UnknownTags.Set(5, []byte("top"))
		var req kmsg.Request = r
		if key == txnOffsetCommitKey {
			req = asTxnOffsetCommit(r)
		}
		req.SetVersion(version)
		out = append(out, req.AppendTo(nil))
	}
	return out
}

// asTxnOffsetCommit returns the TxnOffsetCommit request that commits what
// r commits, in a transaction.
func asTxnOffsetCommit(r *kmsg.OffsetCommitRequest) *kmsg.TxnOffsetCommitRequest {
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.TransactionalID, txn.ProducerID, txn.ProducerEpoch = "txn-1", 77, 3
	txn.Group, txn.Generation, txn.MemberID, txn.InstanceID, txn.UnknownTags = r.Group, r.Generation, r.MemberID, r.InstanceID, r.UnknownTags
	for _, t := range r.Topics {
		tt := kmsg.TxnOffsetCommitRequestTopic{Topic: t.Topic, TopicID: t.TopicID, UnknownTags: t.UnknownTags}
		for _, p := range t.Partitions {
			tt.Partitions = append(tt.Partitions, kmsg.TxnOffsetCommitRequestTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, UnknownTags: p.UnknownTags,
			})
		}
		txn.Topics = append(txn.Topics, tt)
	}
	return txn
}

// commitMax returns the highest version kmsg knows of a commit request.
func commitMax(key int16) int16 {
	return kmsg.RequestForKey(key).MaxVersion()
}

// kmsgCommit decodes a commit request body with kmsg and lists its group
// and partitions as the scanner reports them.
func kmsgCommit(key, version int16, body []byte) (string, []Partition, error) {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if err := req.(interface{ UnsafeReadFrom([]byte) error }).UnsafeReadFrom(body); err != nil {
		return "", nil, err
	}
	var (
		group  string
		topics []kmsg.OffsetCommitRequestTopic
	)
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		group, topics = r.Group, r.Topics
	case *kmsg.TxnOffsetCommitRequest:
		group = r.Group
		for _, t := range r.Topics {
			ot := kmsg.OffsetCommitRequestTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				ot.Partitions = append(ot.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p.Partition})
			}
			topics = append(topics, ot)
		}
	}
	var parts []Partition
	for _, t := range topics {
		for _, p := range t.Partitions {
			w := Partition{Partition: p.Partition}
			if t.Topic != "" {
				w.Topic = []byte(t.Topic)
			} else {
				w.TopicID = t.TopicID
			}
			parts = append(parts, w)
		}
	}
	return group, parts, nil
}

// checkCommitScan compares the scanner with kmsg on a commit request body.
func checkCommitScan(t *testing.T, key, version int16, body []byte) {
	t.Helper()
	group, want, kerr := kmsgCommit(key, version, body)
	var s CommitScan
	var got []Partition
	err := s.Reset(key, body, version)
	if err == nil {
		for p, ok := s.Next(); ok; p, ok = s.Next() {
			got = append(got, p)
		}
		err = s.Err()
	}
	name := kmsg.NameForKey(key)
	if (kerr == nil) != (err == nil) {
		t.Fatalf("%s v%d: kmsg says %v, scanner says %v (body %x)", name, version, kerr, err, body)
	}
	if err != nil {
		if !errors.Is(err, ErrCannotScan) {
			t.Fatalf("%s v%d: scanner error %v is not ErrCannotScan", name, version, err)
		}
		return
	}
	if string(s.Group) != group {
		t.Fatalf("%s v%d: group %q, kmsg %q", name, version, s.Group, group)
	}
	if len(got) != len(want) {
		t.Fatalf("%s v%d: scanner found %d partitions, kmsg %d", name, version, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Topic, want[i].Topic) || got[i].TopicID != want[i].TopicID || got[i].Partition != want[i].Partition {
			t.Fatalf("%s v%d: partition %d: scanner %+v, kmsg %+v", name, version, i, got[i], want[i])
		}
	}
}

func TestScanCommitRequestMatchesKmsg(t *testing.T) {
	for _, key := range []int16{offsetCommitKey, txnOffsetCommitKey} {
		for v := range commitMax(key) + 1 {
			found := 0
			for _, body := range commitRequests(key, v) {
				for cut := range len(body) + 1 {
					checkCommitScan(t, key, v, body[:cut])
				}
				var s CommitScan
				if err := s.Reset(key, body, v); err != nil {
					t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), v, err)
				}
				for _, ok := s.Next(); ok; _, ok = s.Next() {
					found++
				}
			}
			if found != 4 {
				t.Fatalf("%s v%d: %d partitions in the whole bodies, want 4", kmsg.NameForKey(key), v, found)
			}
		}
	}
}

// TestScanCommitRefusesOtherKeys: a body of any other request is not
// scanned as a commit.
func TestScanCommitRefusesOtherKeys(t *testing.T) {
	var s CommitScan
	if err := s.Reset(produceKey, commitRequests(offsetCommitKey, 2)[1], 2); !errors.Is(err, ErrCannotScan) {
		t.Fatalf("Reset with the Produce key: %v, want ErrCannotScan", err)
	}
}

func TestScanCommitAllocatesNothing(t *testing.T) {
	bodies := [][]byte{commitRequests(offsetCommitKey, 9)[1], commitRequests(txnOffsetCommitKey, 6)[1]}
	keys := []int16{offsetCommitKey, txnOffsetCommitKey}
	versions := []int16{9, 6}
	var s CommitScan
	n := testing.AllocsPerRun(100, func() {
		for i, body := range bodies {
			if s.Reset(keys[i], body, versions[i]) != nil {
				t.Fatal("reset")
			}
			for _, ok := s.Next(); ok; _, ok = s.Next() {
			}
		}
	})
	if n != 0 {
		t.Fatalf("scanning commits allocates %v times", n)
	}
}

// FuzzScanCommitRequest: for every OffsetCommit or TxnOffsetCommit body,
// the scanner accepts exactly what kmsg accepts and finds the same group
// and partitions.
func FuzzScanCommitRequest(f *testing.F) {
	f.Add([]byte{0, 1, 'g', 0, 0, 0, 0}, false, int16(0))
	f.Fuzz(func(t *testing.T, body []byte, txn bool, version int16) {
		key := int16(offsetCommitKey)
		if txn {
			key = txnOffsetCommitKey
		}
		checkCommitScan(t, key, versionIn(version, commitMax(key)), body)
	})
}
