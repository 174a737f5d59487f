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

// commitBody makes an OffsetCommit request body at version committing parts
// partitions of each of two topics. (TxnOffsetCommit goes through the same
// scan, which package wire checks against kmsg for both.)
func commitBody(version int16, parts int) []byte {
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
// those of the partitions kmsg wrote, by name or by id as the version has
// them (the scanner itself is checked against kmsg's reader in package
// wire), and a body cut short is refused.
func TestScanCommitKeysMatchKmsg(t *testing.T) {
	for _, v := range []int16{2, 7, 8, 9, 10} {
		body := commitBody(v, 5)
		var d decoder
		if scanned, err := d.scanCommit(keyOffsetCommit, body, v); err != nil || !scanned {
			t.Fatalf("v%d: scanned %v, %v", v, scanned, err)
		}
		// What commitBody wrote: topics by name below v10, which names
		// them by id.
		var want []ordering.Key
		for ti, name := range []string{"a", "b"} {
			topic, id := name, [16]byte{}
			if v >= 10 {
				topic, id = "", [16]byte{byte(ti + 1)}
			}
			for p := range int32(5) {
				want = append(want, partitionKey('c', "group", topic, id, p))
			}
		}
		if !slices.Equal(d.keys, want) {
			t.Fatalf("v%d: keys %v, want %v", v, d.keys, want)
		}
		d.keys = d.keys[:0]
		if _, err := d.scanCommit(keyOffsetCommit, body[:len(body)-3], v); err == nil {
			t.Fatalf("v%d: a truncated body was accepted", v)
		}
	}
}

// A commit of more partitions than the sequencer keeps keys for keeps one
// key past the limit, which makes it a barrier, and the decoder gives the
// slice back once the request is sequenced.
func TestScanCommitKeysStopPastLimit(t *testing.T) {
	var d decoder
	body := commitBody(2, 20*ordering.MaxWriteKeys)
	if _, err := d.scanCommit(keyOffsetCommit, body, 2); err != nil {
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
	body := commitBody(8, 12)
	d.scanCommit(keyOffsetCommit, body, 8)
	if n := testing.AllocsPerRun(100, func() {
		d.keys = d.keys[:0]
		if _, err := d.scanCommit(keyOffsetCommit, body, 8); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("scanning a commit allocates %v times", n)
	}
}
