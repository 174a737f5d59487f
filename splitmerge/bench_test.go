package splitmerge

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchCluster has one topic of n partitions led round robin by three
// brokers.
func benchCluster(n int) *Table {
	m := kmsg.NewPtrMetadataResponse()
	for _, b := range []int32{1, 2, 3} {
		m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b})
	}
	tt := kmsg.NewMetadataResponseTopic()
	tt.Topic = kmsg.StringPtr("t")
	for p := range int32(n) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader = p, 1+p%3
		tt.Partitions = append(tt.Partitions, mp)
	}
	m.Topics = append(m.Topics, tt)
	tb := new(Table)
	tb.ApplyMetadata(m, true)
	return tb
}

// BenchmarkSplitMergeProduce splits a Produce of n partitions (1 KiB of
// records each) over three brokers and merges their answers, beside the
// kmsg decoding of the same request that the proxy does first: the
// figures say what splitting adds to reading the request at all.
func BenchmarkSplitMergeProduce(b *testing.B) {
	for _, n := range []int{12, 300} {
		view := benchCluster(n)
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, -1
		tt := kmsg.NewProduceRequestTopic()
		tt.Topic = "t"
		for p := range int32(n) {
			tt.Partitions = append(tt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: make([]byte, 1024)})
		}
		req.Topics = []kmsg.ProduceRequestTopic{tt}
		body := req.AppendTo(nil)
		plan, _ := Split(req, view)
		results := make([]Result, len(plan.Parts))
		for i, part := range plan.Parts {
			results[i].Response = leaderCases[0].answer(part.Node, part.Request)
		}
		b.Run(fmt.Sprintf("decode/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r kmsg.ProduceRequest
				r.Version = 9
				if err := r.UnsafeReadFrom(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("split+merge/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Split(req, view)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Merge(results, testSelf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
