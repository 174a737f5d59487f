package proxy

import (
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
