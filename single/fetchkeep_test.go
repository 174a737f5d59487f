package single

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// parkedOrder puts a merged answer's record sets in the order they were
// parked in, partitions within their topics and topics among themselves,
// where the client's order (the merge's) had them otherwise, so that its
// pieces can be spliced from their pipes; it loses no partition, and
// leaves an answer already in that order as it is.
func TestParkedOrder(t *testing.T) {
	pipe := newPipe(t)
	f := parkedFrame(t, 1000, pipe, [2]int{100, 300}, [2]int{500, 900})
	defer wire.Put(f)
	g := &wire.Buf{B: make([]byte, 100)} // read whole
	part := func(n int32, records []byte) kmsg.FetchResponseTopicPartition {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.RecordBatches = n, records
		return p
	}
	fr := kmsg.NewPtrFetchResponse()
	fr.Topics = []kmsg.FetchResponseTopic{
		{Topic: "b", Partitions: []kmsg.FetchResponseTopicPartition{part(2, f.B[500:900]), part(0, nil)}},
		{Topic: "a", Partitions: []kmsg.FetchResponseTopicPartition{part(5, g.B[:10]), part(1, f.B[100:300])}},
	}
	frames := []*wire.Buf{g, f}
	pieces := func() [][]byte {
		var out [][]byte
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				if len(p.RecordBatches) > 0 {
					out = append(out, p.RecordBatches)
				}
			}
		}
		return out
	}
	if _, _, ok := pipedPieces(frames, pieces()); ok {
		t.Fatal("record sets out of their parked order were taken as they are")
	}
	parkedOrder(fr, frames)
	var got []string
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			got = append(got, t.Topic+string(rune('0'+p.Partition)))
		}
	}
	if want := []string{"a5", "a1", "b0", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("ordered %v, want %v", got, want)
	}
	if _, _, ok := pipedPieces(frames, pieces()); !ok {
		t.Fatal("the ordered record sets cannot be spliced from their pipes")
	}

	// Each frame's record sets already in their order, the frames' not:
	// left as the merge put them.
	h := parkedFrame(t, 1000, newPipe(t), [2]int{100, 300})
	defer wire.Put(h)
	fr.Topics = []kmsg.FetchResponseTopic{
		{Topic: "c", Partitions: []kmsg.FetchResponseTopicPartition{part(7, h.B[100:300])}},
		{Topic: "b", Partitions: []kmsg.FetchResponseTopicPartition{part(2, f.B[100:300]), part(3, f.B[500:900])}},
	}
	parkedOrder(fr, []*wire.Buf{f, h})
	if fr.Topics[0].Topic != "c" || fr.Topics[1].Partitions[0].Partition != 2 {
		t.Fatalf("an answer in its parked order was reordered: topic %s first", fr.Topics[0].Topic)
	}
}
