package rewrite

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// constMapper is the cheapest possible Mapper, so benchmarks measure the
// rewrite and the codec rather than the proxy's listener lookup.
type constMapper struct{}

func (constMapper) MapController(id int32, _ string, _ int32) (string, int32, error) {
	return "proxy.test", 40000 + id, nil
}

func (constMapper) MapNode(id int32, _ string, _ int32) (string, int32, error) {
	return "proxy.test", 30000 + id, nil
}

// bigMetadata is a Metadata v12 response for 3 brokers and 50 topics of
// 12 partitions, each with 3 replicas.
func bigMetadata() []byte {
	r := kmsg.NewPtrMetadataResponse()
	r.SetVersion(12)
	r.ClusterID = kmsg.StringPtr("cluster-0")
	for _, id := range nodes {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, upstreamHost(id), upstreamPort(id)
		b.Rack = kmsg.StringPtr(fmt.Sprint("rack-", id))
		r.Brokers = append(r.Brokers, b)
	}
	for i := range 50 {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%02d", i))
		tp.TopicID[0] = byte(i + 1)
		for p := range int32(12) {
			pt := kmsg.NewMetadataResponseTopicPartition()
			pt.Partition = p
			pt.Leader = nodes[int(p)%len(nodes)]
			pt.LeaderEpoch = 4
			pt.Replicas = []int32{1, 2, 3}
			pt.ISR = []int32{1, 2, 3}
			tp.Partitions = append(tp.Partitions, pt)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r.AppendTo(nil)
}

// BenchmarkRewriteMetadata measures the proxy's path for a large Metadata
// response: decode upstream bytes, rewrite, encode for the client.
//
// fresh decodes into a new response each time, as a proxy that keeps no
// per-connection state would; reused-unsafe reuses the response struct
// (kmsg reuses its slices) and aliases strings to the input buffer, which
// is safe only while that buffer is not reused before encoding ends;
// rewrite-only is the cost this package adds.
func BenchmarkRewriteMetadata(b *testing.B) {
	raw := bigMetadata()
	var m constMapper

	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		var buf []byte
		for b.Loop() {
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(12)
			if err := resp.ReadFrom(raw); err != nil {
				b.Fatal(err)
			}
			if err := Response(resp, m); err != nil {
				b.Fatal(err)
			}
			buf = resp.AppendTo(buf[:0])
		}
	})

	b.Run("reused-unsafe", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		var buf []byte
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		for b.Loop() {
			if err := resp.UnsafeReadFrom(raw); err != nil {
				b.Fatal(err)
			}
			if err := Response(resp, m); err != nil {
				b.Fatal(err)
			}
			buf = resp.AppendTo(buf[:0])
		}
	})

	b.Run("rewrite-only", func(b *testing.B) {
		b.ReportAllocs()
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		if err := resp.ReadFrom(raw); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := Response(resp, m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRewriteFetch measures the consume hot path: every Fetch v16+
// response is decoded to reach the KIP-951 Brokers tag at its very end.
// Record batches are not copied: kmsg aliases them to the input buffer.
func BenchmarkRewriteFetch(b *testing.B) {
	r := kmsg.NewPtrFetchResponse()
	r.SetVersion(16)
	tp := kmsg.NewFetchResponseTopic()
	tp.TopicID[0] = 1
	for p := range int32(12) {
		pt := kmsg.NewFetchResponseTopicPartition()
		pt.Partition = p
		pt.HighWatermark = 1 << 20
		pt.RecordBatches = make([]byte, 64<<10)
		tp.Partitions = append(tp.Partitions, pt)
	}
	r.Topics = append(r.Topics, tp)
	for _, id := range nodes {
		br := kmsg.NewFetchResponseBroker()
		br.NodeID, br.Host, br.Port = id, upstreamHost(id), upstreamPort(id)
		r.Brokers = append(r.Brokers, br)
	}
	raw := r.AppendTo(nil)
	var m constMapper

	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	var buf []byte
	for b.Loop() {
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(16)
		if err := resp.ReadFrom(raw); err != nil {
			b.Fatal(err)
		}
		if err := Response(resp, m); err != nil {
			b.Fatal(err)
		}
		buf = resp.AppendTo(buf[:0])
	}
}

func BenchmarkNeeds(b *testing.B) {
	b.ReportAllocs()
	var n int
	for b.Loop() {
		for key := int16(0); key < 100; key++ {
			if Needs(key, 12) {
				n++
			}
		}
	}
	_ = n
}
