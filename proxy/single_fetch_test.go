package proxy_test

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/wire"
)

// rawConn sends requests one at a time on one connection and decodes the
// answers.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{t: t, c: c}
}

func (r *rawConn) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	body := readResponse(r.t, r.c, r.corr)
	if wire.Flexible(req.Key(), req.GetVersion()) && req.Key() != 18 {
		body = body[1:]
	}
	resp := kmsg.ResponseForKey(req.Key())
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// fetchAll is a sessionless Fetch v11 of partitions of topic at the
// offsets given, waiting up to wait for min bytes.
func fetchAll(topic string, offsets []int64, wait time.Duration, min int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(wait.Milliseconds()), min, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// TestSingleFetchWaits checks that a Fetch over partitions led by three
// brokers honours its wait and minimum bytes over all of them: with
// nothing to read it is answered when its wait ends, not at once (a
// consumer is not spun); a record written to one broker's partition
// during the wait is answered at once (a consumer is not starved); and
// when records keep coming to that one broker only, each later Fetch on
// the connection is answered as soon as they come, though the other
// brokers still hold the long polls the earlier Fetches left there. No
// partition is answered with null records.
func TestSingleFetchWaits(t *testing.T) {
	const (
		topic = "waits"
		wait  = 3 * time.Second
	)
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	rc := dialRaw(t, p.Addr())

	// Nothing to read: the answer comes when the wait ends.
	start := time.Now()
	short := 400 * time.Millisecond
	resp := rc.do(fetchAll(topic, []int64{0, 0, 0}, short, 1)).(*kmsg.FetchResponse)
	if took := time.Since(start); took < short*3/4 {
		t.Fatalf("an empty Fetch waiting %v was answered after %v", short, took)
	}
	if n := len(resp.Topics[0].Partitions); n != 3 {
		t.Fatalf("the Fetch answered %d partitions, want 3", n)
	}

	offsets := []int64{0, 0, 0}
	for i := range 5 {
		produced := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			produced <- prod.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("x")}).FirstErr()
		}()
		start := time.Now()
		resp := rc.do(fetchAll(topic, offsets, wait, 1)).(*kmsg.FetchResponse)
		took := time.Since(start)
		got := false
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("fetch %d: partition %d: error %d", i, rp.Partition, rp.ErrorCode)
			}
			if rp.RecordBatches == nil {
				// Kafka sends empty records, and kafka-python
				// takes their length.
				t.Fatalf("fetch %d: partition %d: null records", i, rp.Partition)
			}
			if len(rp.RecordBatches) > 0 {
				got = true
				offsets[rp.Partition] = rp.HighWatermark
			}
		}
		if err := <-produced; err != nil {
			t.Fatal(err)
		}
		if !got {
			t.Fatalf("fetch %d: answered after %v without the record written during its wait", i, took)
		}
		if took > wait/2 {
			t.Fatalf("fetch %d: a record written 100 ms into a wait of %v was answered after %v", i, wait, took)
		}
	}
}

// TestSingleFetchWaitEndsWithConnection: a client that resets its
// connection while a Fetch waits over several brokers has the connection
// end at once, not when the wait would have. (A client that half-closes
// is still answered, as Kafka answers what it read.)
func TestSingleFetchWaitEndsWithConnection(t *testing.T) {
	const topic = "gone"
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	rc := dialRaw(t, p.Addr())
	req := fetchAll(topic, []int64{0, 0, 0}, 20*time.Second, 1)
	if _, err := rc.c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // round 1 is in, the long polls are out
	rc.c.(*net.TCPConn).SetLinger(0)
	rc.c.Close()
	start := time.Now()
	for p.Stats().Conns > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the connection still open %v after its client closed it, during a Fetch wait of 20 s", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSingleFetchLowersWait: a client whose Fetch lowers its wait below
// that of the long polls an earlier Fetch left on the brokers is answered
// by its own wait, not theirs: over the same partitions (the polls are
// taken over) and over one of them alone (which goes as the client sent
// it, and would otherwise be read by the broker only after the poll).
func TestSingleFetchLowersWait(t *testing.T) {
	const (
		topic = "lowers"
		long  = 5 * time.Second
		short = 300 * time.Millisecond
	)
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	rc := dialRaw(t, p.Addr())

	// A long poll, answered early by a record to partition 1: the polls
	// to the other brokers are left there, waiting out their 5 s.
	produced := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		produced <- prod.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("x")}).FirstErr()
	}()
	start := time.Now()
	resp := rc.do(fetchAll(topic, []int64{0, 0, 0}, long, 1)).(*kmsg.FetchResponse)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > long/2 {
		t.Fatalf("the first Fetch took %v, though a record came 100 ms into its wait", took)
	}
	hw := int64(-1)
	for _, rp := range resp.Topics[0].Partitions {
		if rp.Partition == 1 {
			hw = rp.HighWatermark
		}
	}
	if hw < 1 {
		t.Fatalf("the first Fetch did not answer partition 1's record (high watermark %d)", hw)
	}

	for _, c := range []struct {
		name    string
		offsets []int64
	}{
		{"every partition", []int64{0, hw, 0}},
		{"partition 0 alone", []int64{0}},
	} {
		start := time.Now()
		rc.do(fetchAll(topic, c.offsets, short, 1))
		if took := time.Since(start); took > short+time.Second {
			t.Fatalf("%s: a Fetch waiting %v behind polls waiting %v was answered after %v", c.name, short, long, took)
		}
	}
}
