package proxy_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestSingleFetchAnsweredFromPartsIn: two partitions, led by two
// brokers, fetched through the single endpoint on one connection.
//
//   - While one broker is held (its connections open, nothing passing), a
//     Fetch is answered from the other, the held broker's partition with
//     no records and no error, long before the Fetch's wait ends; without
//     early answers it waited for the held broker's part.
//   - That broker's answer, once released, is kept: the next Fetch asking
//     it the very same thing takes it and reads its record, the broker
//     not asked again.
//   - A kept answer from before a write the connection made to its
//     partition is not taken: the Fetch after the write asks again and
//     reads the record written too.
//   - A kept answer no Fetch takes is charged, and given back after a
//     while, the connection still open.
func TestSingleFetchAnsweredFromPartsIn(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleFetchAnsweredFromPartsIn(t, mode) })
	}
}

func testSingleFetchAnsweredFromPartsIn(t *testing.T, mode config.Ordering) {
	const (
		topic = "partsin"
		wait  = 5 * time.Second
	)
	kc, relays := relayedCluster(t, kfake.SeedTopics(2, topic))
	spreadLeaders(t, kc, topic, 2)
	addrs := kc.ListenAddrs()
	if len(relays) != 3 || relays[1].Addr() != addrs[1] {
		t.Fatalf("%d relays, broker 1 at %s", len(relays), addrs[1])
	}
	askedOf := countFetches(kc).of
	ctx := testContext(t, 60*time.Second)
	direct, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	produce := func(part int32, round int) {
		t.Helper()
		if err := direct.ProduceSync(ctx, &kgo.Record{Partition: part, Value: roundValue(part, round)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p := startSingle(t, mode, addrs, nil)
	rc := dialRaw(t, p.Addr())
	fetch := func(offsets ...int64) (*kmsg.FetchResponse, time.Duration) {
		t.Helper()
		start := time.Now()
		fr := rc.do(fetchAll(topic, offsets, wait, 1)).(*kmsg.FetchResponse)
		return fr, time.Since(start)
	}

	// Both brokers describe their partition once: a part still out can
	// then be answered from what its broker said.
	produce(0, 0)
	produce(1, 0)
	fr, _ := fetch(0, 0)
	wantRecords(t, fr, topic, 0, roundValue(0, 0))
	wantRecords(t, fr, topic, 1, roundValue(1, 0))

	produce(0, 1)
	produce(1, 1)
	release := relays[1].Hold()
	early, kept, asked1 := p.FetchEarly(), p.FetchKept(), askedOf(1)
	fr, took := fetch(1, 1)
	if took > wait/2 {
		t.Fatalf("the Fetch was answered after %v with a broker held; want the other's partition at once", took)
	}
	wantRecords(t, fr, topic, 0, roundValue(0, 1))
	wantRecords(t, fr, topic, 1)
	if p.FetchEarly() == early {
		t.Fatal("the Fetch was not counted as answered early")
	}
	release()
	waitFor(t, "the held broker's answer to be kept", func() bool { return p.FetchKept() > kept })
	taken := p.FetchKeptTaken()
	fr, _ = fetch(2, 1)
	wantRecords(t, fr, topic, 1, roundValue(1, 1))
	if n := askedOf(1) - asked1; n != 1 {
		t.Fatalf("broker 1 was asked %d times for its partition at offset 1, want once: its kept answer answers the second", n)
	}
	if p.FetchKeptTaken() == taken {
		t.Fatal("the kept answer was not counted as taken")
	}

	// Broker 1's answer for its partition at offset 2 kept, then the
	// connection writes there.
	produce(0, 2)
	produce(0, 3)
	produce(1, 2)
	release = relays[1].Hold()
	kept = p.FetchKept()
	fr, _ = fetch(3, 2)
	wantRecords(t, fr, topic, 0, roundValue(0, 3))
	wantRecords(t, fr, topic, 1)
	release()
	waitFor(t, "the held broker's answer to be kept", func() bool { return p.FetchKept() > kept })
	written := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: 1, Value: roundValue(1, 3), Version: 9, Acks: 1, Timeout: 10 * time.Second})
	if pr := rc.do(written).(*kmsg.ProduceResponse); pr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("the write through the connection failed: error %d", pr.Topics[0].Partitions[0].ErrorCode)
	}
	asked1 = askedOf(1)
	fr, _ = fetch(4, 2)
	wantRecords(t, fr, topic, 1, roundValue(1, 2), roundValue(1, 3))
	if askedOf(1) == asked1 {
		t.Fatal("broker 1 was not asked again after the write")
	}

	// A kept answer no Fetch takes: charged while it is kept, given back
	// after a while, the connection open.
	// (Broker 0's answer for its partition at offset 4 may be kept from
	// the last Fetch, empty: this one asks it from offset 5.)
	produce(0, 4)
	produce(0, 5)
	release = relays[1].Hold()
	fr, _ = fetch(5, 4)
	wantRecords(t, fr, topic, 0, roundValue(0, 5))
	wantRecords(t, fr, topic, 1)
	kept = p.FetchKept()
	release()
	waitFor(t, "the held broker's answer to be kept", func() bool { return p.FetchKept() > kept })
	if used := p.Stats().MemoryUsed; used == 0 {
		t.Fatal("a kept answer holds no memory of the budget")
	}
	waitMemoryFree(t, p)
}

// roundValue is the record written to partition part in round.
func roundValue(part int32, round int) []byte {
	return fmt.Appendf(bytes.Repeat([]byte{'a' + byte(part)}, 100), "-%d", round)
}

// wantRecords fails t unless fr answers topic's partition part with no
// error and exactly the records of the values given.
func wantRecords(t *testing.T, fr *kmsg.FetchResponse, topic string, part int32, values ...[]byte) {
	t.Helper()
	for _, ft := range fr.Topics {
		for i := range ft.Partitions {
			rp := &ft.Partitions[i]
			if ft.Topic != topic || rp.Partition != part {
				continue
			}
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", part, rp.ErrorCode)
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: part, KeepControlRecords: false}, rp, kgo.DefaultDecompressor(), nil)
			if len(fp.Records) != len(values) {
				t.Fatalf("partition %d: %d records, want %d", part, len(fp.Records), len(values))
			}
			for j, r := range fp.Records {
				if !bytes.Equal(r.Value, values[j]) {
					t.Fatalf("partition %d record %d: %q, want %q", part, j, r.Value, values[j])
				}
			}
			return
		}
	}
	t.Fatalf("partition %d not answered", part)
}

// waitFor waits up to ten seconds for cond, failing t after.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
