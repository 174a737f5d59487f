package proxy

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/ordering"
)

// produceBody makes a Produce request body at version writing parts
// partitions of each of two topics.
func produceBody(version int16, parts int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	for ti, name := range []string{"a", "b"} {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		t.TopicID = [16]byte{byte(ti + 1)}
		for p := range parts {
			t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: int32(p), Records: []byte{1, 2, 3}})
		}
		req.Topics = append(req.Topics, t)
	}
	return req.AppendTo(nil)
}

// kmsgKeys is the reference: the keys of a body decoded by kmsg.
func kmsgKeys(t *testing.T, body []byte, version int16) []ordering.Key {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	var keys []ordering.Key
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			keys = append(keys, partitionKey('p', "", tp.Topic, tp.TopicID, p.Partition))
		}
	}
	return keys
}

func TestScanProduceKeysMatchKmsg(t *testing.T) {
	var d decoder
	for _, v := range []int16{3, 8, 9, 11, 12, 13} {
		body := produceBody(v, 5)
		d.keys = d.keys[:0]
		if err := d.scanProduce(body, v); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := kmsgKeys(t, body, v)
		if len(d.keys) != len(want) {
			t.Fatalf("v%d: %d keys, kmsg %d", v, len(d.keys), len(want))
		}
		for i := range want {
			if d.keys[i] != want[i] {
				t.Fatalf("v%d: key %d differs from kmsg's", v, i)
			}
		}
		// A body cut short is refused with kmsg's error.
		d.keys = d.keys[:0]
		if err := d.scanProduce(body[:len(body)-2], v); err == nil {
			t.Fatalf("v%d: a truncated body was accepted", v)
		}
	}
}

// A write of more partitions than the sequencer keeps keys for needs only
// one key past the limit to become a barrier; the scan keeps no more.
func TestScanProduceKeysStopPastLimit(t *testing.T) {
	var d decoder
	body := produceBody(11, ordering.MaxWriteKeys)
	if err := d.scanProduce(body, 11); err != nil {
		t.Fatal(err)
	}
	if len(d.keys) != ordering.MaxWriteKeys+1 {
		t.Fatalf("kept %d keys for a write of %d partitions, want %d", len(d.keys), 2*ordering.MaxWriteKeys, ordering.MaxWriteKeys+1)
	}
}

func TestScanProduceAllocatesNothing(t *testing.T) {
	var d decoder
	body := produceBody(11, 12)
	d.scanProduce(body, 11)
	if n := testing.AllocsPerRun(100, func() {
		d.keys = d.keys[:0]
		if err := d.scanProduce(body, 11); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("scanning a produce allocates %v times", n)
	}
}

// commitBody makes an OffsetCommit (txn false) or TxnOffsetCommit request
// body at version committing parts partitions of each of two topics.
func commitBody(txn bool, version int16, parts int) []byte {
	if txn {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group = version, "tx", "group"
		for ti, name := range []string{"a", "b"} {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = name, [16]byte{byte(ti + 1)}
			for p := range parts {
				t.Partitions = append(t.Partitions, kmsg.TxnOffsetCommitRequestTopicPartition{Partition: int32(p), Offset: 5})
			}
			req.Topics = append(req.Topics, t)
		}
		return req.AppendTo(nil)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = version, "group"
	for ti, name := range []string{"a", "b"} {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.TopicID = name, [16]byte{byte(ti + 1)}
		for p := range parts {
			t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(p), Offset: 5})
		}
		req.Topics = append(req.Topics, t)
	}
	return req.AppendTo(nil)
}

// TestScanCommitKeysMatchKmsg: the keys the scan finds for a commit are
// those of the body kmsg decodes, topic ids included, and a body cut
// short is refused.
func TestScanCommitKeysMatchKmsg(t *testing.T) {
	for _, c := range []struct {
		txn      bool
		key      int16
		versions []int16
	}{
		{false, keyOffsetCommit, []int16{0, 1, 2, 7, 8, 9, 10}},
		{true, keyTxnOffsetCommit, []int16{0, 2, 3, 5, 6}},
	} {
		for _, v := range c.versions {
			body := commitBody(c.txn, v, 5)
			var d decoder
			if err := d.scanCommit(c.key, body, v); err != nil {
				t.Fatalf("key %d v%d: %v", c.key, v, err)
			}
			req := kmsg.RequestForKey(c.key)
			req.SetVersion(v)
			if err := req.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
			var want []ordering.Key
			switch r := req.(type) {
			case *kmsg.OffsetCommitRequest:
				for _, tp := range r.Topics {
					for _, p := range tp.Partitions {
						want = append(want, partitionKey('c', r.Group, tp.Topic, tp.TopicID, p.Partition))
					}
				}
			case *kmsg.TxnOffsetCommitRequest:
				for _, tp := range r.Topics {
					for _, p := range tp.Partitions {
						want = append(want, partitionKey('c', r.Group, tp.Topic, tp.TopicID, p.Partition))
					}
				}
			}
			if len(want) != 10 || !slices.Equal(d.keys, want) {
				t.Fatalf("key %d v%d: keys %v, kmsg's %v", c.key, v, d.keys, want)
			}
			d.keys = d.keys[:0]
			if err := d.scanCommit(c.key, body[:len(body)-3], v); err == nil {
				t.Fatalf("key %d v%d: a truncated body was accepted", c.key, v)
			}
		}
	}
}

// A commit of more partitions than the sequencer keeps keys for keeps one
// key past the limit, which makes it a barrier, and the decoder gives the
// slice back once the request is sequenced.
func TestScanCommitKeysStopPastLimit(t *testing.T) {
	var d decoder
	body := commitBody(false, 2, 20*ordering.MaxWriteKeys)
	if err := d.scanCommit(keyOffsetCommit, body, 2); err != nil {
		t.Fatal(err)
	}
	if len(d.keys) != ordering.MaxWriteKeys+1 {
		t.Fatalf("kept %d keys for a commit of %d partitions, want %d", len(d.keys), 40*ordering.MaxWriteKeys, ordering.MaxWriteKeys+1)
	}
	d.trim()
	if cap(d.keys) > keepKeys {
		t.Fatalf("the decoder keeps room for %d keys after trim", cap(d.keys))
	}
}

func TestScanCommitAllocatesNothing(t *testing.T) {
	var d decoder
	body := commitBody(true, 4, 12)
	d.scanCommit(keyTxnOffsetCommit, body, 4)
	if n := testing.AllocsPerRun(100, func() {
		d.keys = d.keys[:0]
		if err := d.scanCommit(keyTxnOffsetCommit, body, 4); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("scanning a commit allocates %v times", n)
	}
}
