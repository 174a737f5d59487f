package proxy_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestApacheKafkaStreamedProduce produces, through the proxy in front of
// Apache Kafka (testenv/kafka, INORDER_KAFKA_BOOTSTRAP), large pipelined
// batches to three partitions, and reads every record back in order: Kafka
// must accept the streamed frames as the client wrote them. In both modes
// the heads go unread, under the client's correlation ids; in none mode
// the proxy finds the partitions on the way, in connection mode it splices
// each request whole.
func TestApacheKafkaStreamedProduce(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	for _, tc := range []struct {
		mode config.Ordering
		kind metrics.Streamed
	}{
		{config.OrderingNone, metrics.StreamedRequestUnread},
		{config.OrderingConnection, metrics.StreamedRequestUnread},
	} {
		t.Run(string(tc.mode), func(t *testing.T) { testApacheKafkaStreamedProduce(t, boot, tc.mode, tc.kind) })
	}
}

func testApacheKafkaStreamedProduce(t *testing.T, boot string, mode config.Ordering, kind metrics.Streamed) {
	m := metrics.New()
	p := startProxy(t, mode, strings.Split(boot, ","), nil, proxy.WithMetrics(m))
	ctx := testContext(t, 120*time.Second)
	topic := fmt.Sprintf("streamed-%s-%d", mode, time.Now().UnixNano())
	createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))

	const perPartition, size = 300, 12 << 10
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(10*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i := range perPartition {
		for part := range int32(3) {
			v := strconv.Itoa(i) + "|" + strings.Repeat("k", size)
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if t.Failed() {
		return
	}
	if n := streamedCounter(t, m, kind, 1); n == 0 {
		t.Fatalf("no request streamed as %s: the run did not exercise that path", kind)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := map[int32]int{}
	for got := 0; got < 3*perPartition; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seq, rest, _ := strings.Cut(string(r.Value), "|")
			if seq != strconv.Itoa(next[r.Partition]) || len(rest) != size {
				t.Fatalf("partition %d offset %d holds record %s (%d bytes), want %d", r.Partition, r.Offset, seq, len(rest), next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
}
