package single_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/single"
)

// TestFillFetch: the partitions a trimmed part left out are added to its
// answer, into their topic's entry or a new one, never twice, and not to
// an answer that failed whole.
func TestFillFetch(t *testing.T) {
	part := func(p int32, hw int64, records []byte) kmsg.FetchResponseTopicPartition {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.RecordBatches = p, hw, records
		return rp
	}
	topic := func(name string, ps ...kmsg.FetchResponseTopicPartition) kmsg.FetchResponseTopic {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.Partitions = name, ps
		return rt
	}
	fills := func() []kmsg.FetchResponseTopic {
		return []kmsg.FetchResponseTopic{
			topic("a", part(1, 10, []byte{}), part(2, 20, []byte{})),
			topic("b", part(0, 30, []byte{})),
		}
	}
	fr := kmsg.NewPtrFetchResponse()
	fr.Topics = []kmsg.FetchResponseTopic{topic("a", part(0, 5, []byte{1}), part(2, 7, []byte{2}))}
	single.FillFetch(fr, fills())

	got := map[string]map[int32]int64{}
	n := 0
	for _, rt := range fr.Topics {
		if got[rt.Topic] == nil {
			got[rt.Topic] = map[int32]int64{}
		}
		for _, rp := range rt.Partitions {
			got[rt.Topic][rp.Partition] = rp.HighWatermark
			n++
		}
	}
	want := map[string]map[int32]int64{"a": {0: 5, 1: 10, 2: 7}, "b": {0: 30}}
	if len(fr.Topics) != 2 || n != 4 || len(got["a"]) != 3 || len(got["b"]) != 1 {
		t.Fatalf("filled answer: %d topics, %d partitions: %v, want %v", len(fr.Topics), n, got, want)
	}
	for name, ps := range want {
		for p, hw := range ps {
			if got[name][p] != hw {
				t.Fatalf("%s/%d: high watermark %d, want %d (the broker's answer kept, the fill added)", name, p, got[name][p], hw)
			}
		}
	}

	failed := kmsg.NewPtrFetchResponse()
	failed.ErrorCode = 1
	single.FillFetch(failed, fills())
	if len(failed.Topics) != 0 {
		t.Fatalf("an answer that failed whole was filled: %d topics", len(failed.Topics))
	}
}

// TestOvershoots: a broker keeping to a Fetch's max_bytes (KIP-74: past
// it, only the first partition's first batch; Apache Kafka and kfake stop
// adding batches once the answer holds the maximum) is never taken for
// one answering past it, however its answer is cut for memory: neither a
// first batch above the maximum dropped alone, nor several partitions
// within the maximum dropped together. Only records of two partitions or
// more, more than the maximum of them, mark a broker.
func TestOvershoots(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name    string
		most    int32
		dropped int
		bytes   int64
		want    bool
	}{
		{"a first batch past the maximum", mib, 1, 7 * mib, false},
		{"partitions within the maximum", 2 * mib, 5, 2 * mib, false},
		{"one partition within the maximum", 2 * mib, 1, mib, false},
		{"two partitions past the maximum", 2 * mib, 2, 2*mib + 1, true},
		{"every partition's batch", 2 * mib, 24, 24 * mib, true},
	} {
		if got := single.Overshoots(c.most, c.dropped, c.bytes); got != c.want {
			t.Errorf("%s: taken for past max_bytes %v, want %v", c.name, got, c.want)
		}
	}
}
