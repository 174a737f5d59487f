package proxy_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
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

// TestApacheKafkaConnectionEnds checks, through the proxy in front of
// Apache Kafka, in both modes, how a connection ends: a client that
// half-closes right after pipelining large Produce requests gets every
// response; one that stops inside a request, after its head went upstream,
// gets the response to the request before it, and then the close.
func TestApacheKafkaConnectionEnds(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startProxy(t, mode, strings.Split(boot, ","), nil)
			ctx := testContext(t, 60*time.Second)
			topic := fmt.Sprintf("ends-%s-%d", mode, time.Now().UnixNano())
			createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
			fmtr := kmsg.NewRequestFormatter()

			t.Run("half-close", func(t *testing.T) {
				const n = 12
				var stream []byte
				for i := range int32(n) {
					// AppendRequest writes the length at the start of
					// what it is given: each frame on its own.
					stream = append(stream, fmtr.AppendRequest(nil, kafkaProduce(topic, 100<<10), 1+i)...)
				}
				c := dial(t, p.Addr())
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Write(stream); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				for i := range int32(n) {
					produceAccepted(t, readResponse(t, c, 1+i))
				}
			})

			t.Run("cut", func(t *testing.T) {
				stream := fmtr.AppendRequest(nil, kafkaProduce(topic, 200<<10), 1)
				cut := fmtr.AppendRequest(nil, kafkaProduce(topic, 200<<10), 2)
				stream = append(stream, cut[:100<<10]...)
				c := dial(t, p.Addr())
				local := c.LocalAddr().String()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Write(stream); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				produceAccepted(t, readResponse(t, c, 1))
				if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
					t.Fatalf("read %d bytes (%v) after the response; want a close", n, err)
				}
				p.log.waitFor(t, "client="+local)
				if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "inside a frame") {
					t.Fatalf("log line %q does not name the truncation", line)
				}
			})
		})
	}
}

// kafkaProduce is a Produce v9 request, acks=all, of one record of size
// bytes to partition 0 of topic.
func kafkaProduce(topic string, size int) *kmsg.ProduceRequest {
	return pipeprobe.NewProduce(pipeprobe.ProduceSpec{
		Topic: topic, Value: make([]byte, size), Timestamp: time.Now().UnixMilli(),
		Version: 9, Acks: -1, Timeout: 5 * time.Second,
	})
}

// produceAccepted fails t unless body, a Produce v9 response after its
// correlation id, reports every partition written.
func produceAccepted(t *testing.T, body []byte) {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		for _, pp := range tp.Partitions {
			if pp.ErrorCode != 0 {
				t.Fatalf("partition %d: error code %d", pp.Partition, pp.ErrorCode)
			}
		}
	}
	if len(resp.Topics) == 0 {
		t.Fatal("a Produce response naming no topic")
	}
}

// TestApacheKafkaStalledConsumers: through the proxy in front of Apache
// Kafka, clients that pipeline Fetch requests for megabytes of records and
// never read are closed by the write timeout, for responses streamed
// through a walk of their body (v16, which may carry addresses) and
// spliced unread (v12); a consumer that reads gets every record meanwhile
// and after.
func TestApacheKafkaStalledConsumers(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	const write = 500 * time.Millisecond
	p := startProxy(t, config.OrderingConnection, strings.Split(boot, ","), func(c *config.Config) {
		c.WriteTimeout = write
	})
	ctx := testContext(t, 120*time.Second)
	topic := fmt.Sprintf("stalled-%d", time.Now().UnixNano())
	createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // every record to partition 0
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const records, size = 40, 200 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, records)
	for i := range records {
		// Random bytes, so that the responses stay megabytes long
		// whatever the compression.
		values[i] = make([]byte, size)
		for j := range values[i] {
			values[i][j] = byte(rng.Uint32())
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: values[i]}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	leader := mresp.Topics[0].Partitions[0].Leader
	var node string
	for _, b := range mresp.Brokers {
		if b.NodeID == leader {
			node = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	before := strings.Count(p.log.String(), "write timeout")
	const stalled = 4
	for i := range stalled {
		c := dial(t, node)
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		version := []int16{16, 12}[i%2]
		for j := range int32(4) {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxBytes, r.MaxWaitMillis = version, 16<<20, 100
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes, rp.LogStartOffset = 16<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, r, 1+j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); strings.Count(p.log.String(), "write timeout")-before < stalled; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d clients that never read closed for the write timeout; log:\n%s", strings.Count(p.log.String(), "write timeout")-before, stalled, p.log)
		}
	}
	next := 0
	for next < records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !bytes.Equal(r.Value, values[next]) {
				t.Fatalf("offset %d does not hold record %d: %d bytes %x, want %d bytes %x", r.Offset, next, len(r.Value), r.Value[:16], len(values[next]), values[next][:16])
			}
			next++
		})
	}
}
