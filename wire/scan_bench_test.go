package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Side by side: what the hot path pays to learn a frame's facts by scanning
// and by decoding with kmsg. A Fetch response of 12 partitions of 64 KiB
// without endpoints, and a Produce request of 12 partitions.

func benchFetchBody() []byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	t := kmsg.NewFetchResponseTopic()
	t.TopicID = [16]byte{1}
	for p := range int32(12) {
		pt := kmsg.NewFetchResponseTopicPartition()
		pt.Partition = p
		pt.RecordBatches = make([]byte, 64<<10)
		t.Partitions = append(t.Partitions, pt)
	}
	resp.Topics = []kmsg.FetchResponseTopic{t}
	return resp.AppendTo(nil)
}

func benchProduceBody() []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench-topic"
	for p := range int32(12) {
		t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: make([]byte, 4<<10)})
	}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	return req.AppendTo(nil)
}

func BenchmarkFetchEndpoints(b *testing.B) {
	body := benchFetchBody()
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if e, err := ScanEndpoints(fetchKey, 16, body); err != nil || e.Count != 0 {
				b.Fatal(e, err)
			}
		}
	})
	b.Run("kmsg", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = 16
			if err := resp.ReadFrom(body); err != nil || len(resp.Brokers) != 0 {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkProducePartitions(b *testing.B) {
	body := benchProduceBody()
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		var s ProduceScan
		for b.Loop() {
			n := 0
			if s.Reset(body, 11) != nil {
				b.Fatal("reset")
			}
			for _, ok := s.Next(); ok; _, ok = s.Next() {
				n++
			}
			if s.Err() != nil || n != 12 {
				b.Fatal(s.Err(), n)
			}
		}
	})
	b.Run("kmsg", func(b *testing.B) {
		b.ReportAllocs()
		var req kmsg.ProduceRequest
		for b.Loop() {
			req.Version = 11
			if err := req.UnsafeReadFrom(body); err != nil || len(req.Topics[0].Partitions) != 12 {
				b.Fatal(err)
			}
		}
	})
}
