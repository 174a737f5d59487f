package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// BenchmarkForwardProduce measures one Produce round trip through the
// proxy (a 512 KiB batch to a kfake that discards records) against the same
// round trip straight to kfake, and reports the proxy's allocations per
// request. Run with -benchmem; the "direct" case is the baseline.
func BenchmarkForwardProduce(b *testing.B) {
	kc, frame := blackholeProduce(b, 512<<10)

	roundTrips := func(b *testing.B, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		resp := make([]byte, 64<<10)
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, resp[:4]); err != nil {
				b.Fatal(err)
			}
			n := binary.BigEndian.Uint32(resp)
			if _, err := io.ReadFull(c, resp[:n]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { roundTrips(b, kc.ListenAddrs()[0]) })
	for _, tc := range []struct {
		name string
		mode config.Ordering
		opts []proxy.Option
		mut  func(*config.Config)
	}{
		{"connection", config.OrderingConnection, nil, nil},
		// What the write timeout's marks cost; the other cases have it on.
		{"connection-no-write-timeout", config.OrderingConnection, nil, func(c *config.Config) { c.WriteTimeout = 0 }},
		{"connection-nosplice", config.OrderingConnection, []proxy.Option{proxy.WithoutSplice()}, nil},
		{"none", config.OrderingNone, nil, nil},
		// What --verify costs; without it the hooks are a nil check.
		{"connection-verify", config.OrderingConnection, nil, verifyOn},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := startProxy(b, tc.mode, kc.ListenAddrs(), tc.mut, tc.opts...)
			roundTrips(b, p.Addr())
		})
	}
}

// largeBatch returns a valid record batch of about size bytes.
func largeBatch(size int) []byte {
	rec := kmsg.Record{Value: make([]byte, size)}
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, PartitionLeaderEpoch: -1}
	b.Records = rec.AppendTo(nil)
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32c(raw[21:]))
	return b.AppendTo(nil)
}

// blackholeProduce starts a one-broker kfake that discards records, and
// returns it with one Produce frame (acks=1, correlation id 1) carrying a
// batch of recordBytes to its "bench" topic.
func blackholeProduce(b *testing.B, recordBytes int) (*kfake.Cluster, []byte) {
	b.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BlackholeProduce(), kfake.SeedTopics(1, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	req := produceV9("bench", 1, largeBatch(recordBytes))
	return kc, kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
}

// produceV9 is a Produce v9 request of records to partition 0 of topic,
// with a 5 s broker-side timeout.
func produceV9(topic string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = acks
	req.TimeoutMillis = 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = records
	t.Partitions = append(t.Partitions, part)
	req.Topics = append(req.Topics, t)
	return req
}
