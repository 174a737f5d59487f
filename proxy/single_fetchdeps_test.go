package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestSingleFetchAfterWrite pipelines, on one connection, a Produce of
// large records to partitions led by all three brokers, then a Fetch of
// those partitions that does not wait. Every broker sits behind a relay
// that delays each chunk it forwards by 10 ms, so the Produce part takes
// many times longer to reach its broker than the Fetch part, which goes on
// another connection. Kafka reads the Fetch only once it has processed
// the Produce, so its answer holds the records; so must the proxy's, in
// both modes, whatever acks the Produce asks for (acks=0 has no answer to
// wait for), and the Fetch answer comes after the Produce answer.
func TestSingleFetchAfterWrite(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		for _, acks := range []int16{1, -1, 0} {
			t.Run(fmt.Sprintf("%s/acks=%d", mode, acks), func(t *testing.T) { testSingleFetchAfterWrite(t, mode, acks) })
		}
	}
}

func testSingleFetchAfterWrite(t *testing.T, mode config.Ordering, acks int16) {
	const topic = "readback"
	kc, relays := relayedCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	for _, r := range relays {
		r.SetDelay(10 * time.Millisecond)
	}
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	fetchAfterWrite(t, testContext(t, 60*time.Second), p.Addr(), topic, acks)
}

// fetchAfterWrite pipelines on one connection to addr a Produce of one
// record of 256 KiB (eight chunks of a relay) to each of topic's three
// partitions, then a Fetch of them from offset 0 that does not wait, and
// fails t unless the Fetch answer holds each record, after the Produce
// answer (acks=0: the only answer).
func fetchAfterWrite(t *testing.T, ctx context.Context, addr, topic string, acks int16) {
	t.Helper()
	const (
		parts = 3
		size  = 256 << 10
	)
	value := func(part int32) []byte { return bytes.Repeat([]byte{'a' + byte(part)}, size) }
	produce := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: 0, Value: value(0), Version: 9, Acks: acks, Timeout: 10 * time.Second})
	for part := int32(1); part < parts; part++ {
		more := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: part, Value: value(part), Version: 9})
		produce.Topics[0].Partitions = append(produce.Topics[0].Partitions, more.Topics[0].Partitions...)
	}
	fetch := fetchAll(topic, []int64{0, 0, 0}, 0, 1)

	var fr *kmsg.FetchResponse
	if acks == 0 {
		// No answer to the Produce: the Fetch's is the first.
		rc := dialRaw(t, addr)
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("readback"))
		if _, err := rc.c.Write(f.AppendRequest(nil, produce, 7)); err != nil {
			t.Fatal(err)
		}
		rc.corr = 7
		fr = rc.do(fetch).(*kmsg.FetchResponse)
	} else {
		res, err := pipeprobe.Pipeline(ctx, addr, []kmsg.Request{produce, fetch}, pipeprobe.PipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inOrderNoErrors(t, res)
		fr = res.Exchanges[1].Resp.(*kmsg.FetchResponse)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != parts {
		t.Fatalf("the Fetch answered %d topics, want 1 with %d partitions", len(fr.Topics), parts)
	}
	for i := range fr.Topics[0].Partitions {
		rp := &fr.Topics[0].Partitions[i]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			t.Fatalf("partition %d: %v", rp.Partition, err)
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: rp.Partition}, rp, kgo.DefaultDecompressor(), nil)
		if len(fp.Records) != 1 || !bytes.Equal(fp.Records[0].Value, value(rp.Partition)) {
			t.Fatalf("partition %d: the Fetch pipelined after the Produce read %d records (high watermark %d), want the one written", rp.Partition, len(fp.Records), rp.HighWatermark)
		}
	}
}

// TestApacheKafkaSingleFetchAfterWrite is TestSingleFetchAfterWrite in
// front of Apache Kafka (testenv/kafka, INORDER_KAFKA_BOOTSTRAP), whose
// request handlers serve the proxy's Fetch connection and its write
// connection side by side: the fence of acks=0 writes is a real broker's
// ApiVersions v0 answer.
func TestApacheKafkaSingleFetchAfterWrite(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		for _, acks := range []int16{1, -1, 0} {
			t.Run(fmt.Sprintf("%s/acks=%d", mode, acks), func(t *testing.T) {
				p := startSingle(t, mode, strings.Split(boot, ","), nil)
				ctx := testContext(t, 60*time.Second)
				topic := fmt.Sprintf("readback-%s-%d-%d", mode, -acks, time.Now().UnixNano())
				createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
				waitLeaders(t, ctx, p.Addr(), topic, 3)
				fetchAfterWrite(t, ctx, p.Addr(), topic, acks)
			})
		}
	}
}

// TestSingleFetchPollAfterWrite: a Fetch over two brokers whose records
// came from one leaves a long poll behind on the other, which the next
// Fetch asking that broker the same thing may take over, answering its
// first round from what that broker last said. A Produce to that
// partition between the two makes both stale: the poll was sent, and
// the broker last spoke, before the write. The Fetch pipelined after the
// Produce must hold its record, as Kafka's answer would. Both modes.
func TestSingleFetchPollAfterWrite(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleFetchPollAfterWrite(t, mode) })
	}
}

func testSingleFetchPollAfterWrite(t *testing.T, mode config.Ordering) {
	const (
		topic = "stalepoll"
		min   = 1000 // more than the write to partition 0 brings
	)
	kc := newCluster(t, kfake.SeedTopics(2, topic))
	spreadLeaders(t, kc, topic, 2)
	// Each broker tells when a long poll (a Fetch that may wait) reaches it.
	polled := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	kc.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if n := kc.CurrentNode(); n >= 0 && int(n) < len(polled) && req.(*kmsg.FetchRequest).MaxWaitMillis > 0 {
			select {
			case polled[n] <- struct{}{}:
			default:
			}
		}
		return nil, nil, false
	})
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	rc := dialRaw(t, p.Addr())
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("stalepoll"))

	// The first Fetch is answered by records written to partition 1
	// during its wait, and leaves its long poll on broker 0 behind. The
	// write goes once both brokers hold its long polls: round 1 found
	// nothing, and round 2 asked each broker again, however slowly the
	// connections were dialled.
	rc.corr++
	if _, err := rc.c.Write(f.AppendRequest(nil, fetchAll(topic, []int64{0, 0}, 3*time.Second, min), rc.corr)); err != nil {
		t.Fatal(err)
	}
	waitEnds := time.After(3 * time.Second)
	for n, ch := range polled {
		select {
		case <-ch:
		case <-waitEnds:
			t.Fatalf("the first Fetch's wait went by without a long poll on broker %d", n)
		}
	}
	res, err := pipeprobe.Do(ctx, p.Addr(), pipeprobe.NewProduce(pipeprobe.ProduceSpec{
		Topic: topic, Partition: 1, Value: bytes.Repeat([]byte{'x'}, 2*min), Version: 9, Acks: -1, Timeout: 5 * time.Second,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if code := res.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce to partition 1: %v", kerr.ErrorForCode(code))
	}
	first := new(kmsg.FetchResponse)
	first.Version = 11
	if err := first.ReadFrom(readResponse(t, rc.c, rc.corr)); err != nil {
		t.Fatal(err)
	}
	next := int64(-1)
	for _, rp := range first.Topics[0].Partitions {
		if rp.Partition == 1 && len(rp.RecordBatches) > 0 {
			next = rp.HighWatermark
		}
	}
	if next < 0 {
		t.Fatal("the first Fetch was not answered by the records written to partition 1")
	}

	// Then a write to partition 0 and, pipelined behind it, the same
	// Fetch of partition 0 with a shorter wait.
	produce := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: 0, Value: []byte("after"), Version: 9, Acks: -1, Timeout: 5 * time.Second})
	frames := f.AppendRequest(nil, produce, rc.corr+1)
	frames = append(frames, f.AppendRequest(nil, fetchAll(topic, []int64{0, next}, 400*time.Millisecond, min), rc.corr+2)...)
	if _, err := rc.c.Write(frames); err != nil {
		t.Fatal(err)
	}
	pr := new(kmsg.ProduceResponse)
	pr.Version = 9
	if err := pr.ReadFrom(readResponse(t, rc.c, rc.corr+1)[1:]); err != nil {
		t.Fatal(err)
	}
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	fr := new(kmsg.FetchResponse)
	fr.Version = 11
	if err := fr.ReadFrom(readResponse(t, rc.c, rc.corr+2)); err != nil {
		t.Fatal(err)
	}
	for i := range fr.Topics[0].Partitions {
		rp := &fr.Topics[0].Partitions[i]
		if rp.Partition != 0 {
			continue
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: 0}, rp, kgo.DefaultDecompressor(), nil)
		if len(fp.Records) != 1 || string(fp.Records[0].Value) != "after" {
			t.Fatalf("the Fetch pipelined after a write to partition 0 read %d records there (high watermark %d), want the one written", len(fp.Records), rp.HighWatermark)
		}
		return
	}
	t.Fatal("the Fetch did not answer partition 0")
}

// TestSingleFetchAfterDeleteRecords pipelines, on one connection, a
// DeleteRecords that the broker is slow to process (a kfake control
// holds it 300 ms while other connections are served) and a Fetch of the
// offsets it deletes: Kafka, reading both from one connection, answers
// the Fetch OFFSET_OUT_OF_RANGE, and so must the proxy, though the Fetch
// goes to the broker on another connection. Both modes.
func TestSingleFetchAfterDeleteRecords(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleFetchAfterDeleteRecords(t, mode) })
	}
}

func testSingleFetchAfterDeleteRecords(t *testing.T, mode config.Ordering) {
	const topic = "trimmed"
	kc := newCluster(t, kfake.SeedTopics(1, topic))
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	for i := range 3 {
		if _, err := pipeprobe.Do(ctx, p.Addr(), pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: 0, Value: []byte(strconv.Itoa(i)), Version: 9, Acks: -1, Timeout: 5 * time.Second,
		})); err != nil {
			t.Fatal(err)
		}
	}
	kc.ControlKey(int16(kmsg.DeleteRecords), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		kc.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		return nil, nil, false
	})

	del := kmsg.NewPtrDeleteRecordsRequest()
	del.Version = 2
	del.TimeoutMillis = 5000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = topic
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, 2
	dt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{dp}
	del.Topics = []kmsg.DeleteRecordsRequestTopic{dt}
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), []kmsg.Request{del, fetchAll(topic, []int64{0}, 0, 1)}, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requireInOrder(t, res)
	dr := res.Exchanges[0].Resp.(*kmsg.DeleteRecordsResponse)
	if got := dr.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.LowWatermark != 2 {
		t.Fatalf("delete records: error %d, low watermark %d, want none and 2", got.ErrorCode, got.LowWatermark)
	}
	fr := res.Exchanges[1].Resp.(*kmsg.FetchResponse)
	rp := fr.Topics[0].Partitions[0]
	if rp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("the Fetch of offset 0 pipelined after records before 2 were deleted: error %d, log start %d, %d bytes of records; want OFFSET_OUT_OF_RANGE", rp.ErrorCode, rp.LogStartOffset, len(rp.RecordBatches))
	}
}

// TestSingleFetchBesideWrites: in connection mode a Fetch waits only for
// the earlier writes it could read. Pipelined behind a Produce to another
// topic and an OffsetCommit, each of which the broker holds 500 ms (kfake
// controls that let other connections be served meanwhile), a Fetch
// reaches its broker while both are still held: a consumer that commits,
// or a client that produces to one topic and consumes another, waits for
// nothing it would not wait for from Kafka itself.
func TestSingleFetchBesideWrites(t *testing.T) {
	const (
		written = "beside-written"
		read    = "beside-read"
		hold    = 500 * time.Millisecond
	)
	kc := newCluster(t, kfake.SeedTopics(1, written, read))
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	var (
		mu       sync.Mutex
		released []time.Time // when the broker let a held write go
		fetched  time.Time   // when the broker saw the Fetch
	)
	holdWrites := func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		kc.SleepControl(func() { time.Sleep(hold) })
		mu.Lock()
		released = append(released, time.Now())
		mu.Unlock()
		return nil, nil, false
	}
	kc.ControlKey(int16(kmsg.Produce), holdWrites)
	kc.ControlKey(int16(kmsg.OffsetCommit), holdWrites)
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		if fetched.IsZero() {
			fetched = time.Now()
		}
		mu.Unlock()
		return nil, nil, false
	})

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "beside", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = read
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 0
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{cp}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), []kmsg.Request{
		pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: written, Partition: 0, Value: []byte("w"), Version: 9, Acks: -1, Timeout: 5 * time.Second}),
		commit,
		fetchAll(read, []int64{0}, 0, 1),
	}, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requireInOrder(t, res)
	mu.Lock()
	defer mu.Unlock()
	if len(released) != 2 || fetched.IsZero() {
		t.Fatalf("the broker let %d writes go and saw a Fetch: %v; want 2 and true", len(released), !fetched.IsZero())
	}
	for _, at := range released {
		if !fetched.Before(at) {
			t.Fatalf("the Fetch of another topic reached the broker %v after a write it cannot read was let go: it waited for it", fetched.Sub(at))
		}
	}
}

// waitLeaders asks addr for topic's metadata, which teaches the single
// endpoint's view a new topic, then for the partitions' latest offsets
// until each leader answers without an error: Kafka names a new
// partition's leader before that broker serves it.
func waitLeaders(t *testing.T, ctx context.Context, addr, topic string, partitions int32) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 4, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for p := range partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -1, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	for {
		var served int32
		if _, err := pipeprobe.Do(ctx, addr, md); err != nil {
			t.Fatal(err)
		}
		resp, err := pipeprobe.Do(ctx, addr, lo)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					served++
				}
			}
		}
		if served == partitions {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d partitions served by their leader", topic, served, partitions)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
