package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
)

// TestSingleFetchLateBroker: two partitions led by two brokers, one of
// them held (its connections open, nothing passing), fetched through the
// single endpoint with a minimum no answer reaches, so that each Fetch
// waits its whole wait.
//
//   - The Fetch is answered when its wait ends, not when the held broker
//     answers: the other broker's records, the held broker's partition
//     with no records and no error, from what that broker last said.
//     Without an end to round 1, it waited until the broker was released.
//   - The next Fetch asking the held broker the same is answered the same
//     way, and takes over the first's part rather than asking again: once
//     released, that broker was asked once, and its answer is kept.
//   - On a new connection, where the held broker has said nothing of its
//     partition, the partition is answered NOT_LEADER_OR_FOLLOWER, and
//     the other's records are given.
//   - With memory too short to keep answers, a Fetch's part for the held
//     broker is not sent behind the part it is late with.
func TestSingleFetchLateBroker(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleFetchLateBroker(t, mode) })
	}
}

const (
	lateTopic = "late"
	lateWait  = 300 * time.Millisecond
	// lateNoMin is a minimum no Fetch here reaches: each waits its wait.
	lateNoMin = 1 << 20
)

// lateCluster is two brokers behind relays, each leading one partition
// of lateTopic, the records of round 0 written to both.
type lateCluster struct {
	t      *testing.T
	kc     *kfake.Cluster
	relays []*hostile.Relay
	direct *kgo.Client
	ctx    context.Context
	mu     sync.Mutex
	asked  map[[2]int64]int // Fetches of partition 1 by broker and offset
}

func newLateCluster(t *testing.T) *lateCluster {
	kc, relays := relayedCluster(t, kfake.SeedTopics(2, lateTopic))
	spreadLeaders(t, kc, lateTopic, 2)
	addrs := kc.ListenAddrs()
	if len(relays) != 3 || relays[1].Addr() != addrs[1] {
		t.Fatalf("%d relays, broker 1 at %s", len(relays), addrs[1])
	}
	lc := &lateCluster{t: t, kc: kc, relays: relays, ctx: testContext(t, 60*time.Second), asked: map[[2]int64]int{}}
	kc.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		lc.mu.Lock()
		defer lc.mu.Unlock()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 1 {
					lc.asked[[2]int64{int64(kc.CurrentNode()), rp.FetchOffset}]++
				}
			}
		}
		return nil, nil, false
	})
	direct, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(lateTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	lc.direct = direct
	lc.produce(0, 0)
	lc.produce(1, 0)
	return lc
}

func (lc *lateCluster) produce(part int32, round int) {
	lc.t.Helper()
	if err := lc.direct.ProduceSync(lc.ctx, &kgo.Record{Partition: part, Value: roundValue(part, round)}).FirstErr(); err != nil {
		lc.t.Fatal(err)
	}
}

// askedAt is how many Fetches broker 1 got for partition 1 at offset.
func (lc *lateCluster) askedAt(offset int64) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.asked[[2]int64{1, offset}]
}

// fetch fails the test unless req is answered within a few waits: a
// Fetch that waits for the held broker gets no answer at all.
func lateFetch(rc *rawConn, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	rc.t.Helper()
	rc.c.SetDeadline(time.Now().Add(10 * lateWait))
	defer rc.c.SetDeadline(time.Now().Add(60 * time.Second))
	return rc.do(req).(*kmsg.FetchResponse)
}

func testSingleFetchLateBroker(t *testing.T, mode config.Ordering) {
	lc := newLateCluster(t)
	p := startSingle(t, mode, lc.kc.ListenAddrs(), nil)
	rc := dialRaw(t, p.Addr())
	fetch := func(rc *rawConn, offsets ...int64) *kmsg.FetchResponse {
		rc.t.Helper()
		return lateFetch(rc, fetchAll(lateTopic, offsets, lateWait, lateNoMin))
	}
	// A minimum the records reach: no long poll is left out, to be held
	// with the broker and hold the parts behind it.
	fr := lateFetch(rc, fetchAll(lateTopic, []int64{0, 0}, lateWait, 1))
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 0))
	wantRecords(t, fr, lateTopic, 1, roundValue(1, 0))

	release := lc.relays[1].Hold()
	defer release()
	lc.produce(0, 1)
	fr = fetch(rc, 1, 1)
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 1))
	wantRecords(t, fr, lateTopic, 1)
	lc.produce(0, 2)
	fr = fetch(rc, 2, 1)
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 2))
	wantRecords(t, fr, lateTopic, 1)

	if p.FetchLate() < 2 {
		t.Fatalf("%d Fetch parts counted late, want the two held", p.FetchLate())
	}
	rc2 := dialRaw(t, p.Addr())
	fr = fetch(rc2, 0, 0)
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 0), roundValue(0, 1), roundValue(0, 2))
	if code := partitionError(fr, lateTopic, 1); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a partition of the held broker never described on this connection: error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}

	kept := p.FetchKept()
	release()
	waitFor(t, "the held broker's late answer to be kept", func() bool { return p.FetchKept() > kept })
	// The next Fetch takes it, broker 0's record enough to answer.
	lc.produce(0, 3)
	fr = lateFetch(rc, fetchAll(lateTopic, []int64{3, 1}, lateWait, 1))
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 3))
	wantRecords(t, fr, lateTopic, 1)
	if n := lc.askedAt(1); n != 1 {
		t.Fatalf("broker 1 was asked %d times for partition 1 at offset 1, want once: the later Fetches take the first's part, then its answer", n)
	}
}

// TestSingleFetchLateBrokerShortMemory: with memory too short to keep a
// late answer, a Fetch's part for a broker late with an earlier one is not
// sent behind it, and is answered when its wait ends.
func TestSingleFetchLateBrokerShortMemory(t *testing.T) {
	lc := newLateCluster(t)
	p := startSingle(t, config.OrderingConnection, lc.kc.ListenAddrs(), func(c *config.Config) { c.MaxMemory = smallestBudget })
	rc := dialRaw(t, p.Addr())
	// fetch asks for as much as the budget holds: nothing is kept.
	fetch := func(offsets ...int64) *kmsg.FetchResponse {
		t.Helper()
		req := fetchAll(lateTopic, offsets, lateWait, lateNoMin)
		req.MaxBytes = smallestBudget
		for i := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[i].PartitionMaxBytes = smallestBudget / 2
		}
		return lateFetch(rc, req)
	}
	fr := lateFetch(rc, fetchAll(lateTopic, []int64{0, 0}, lateWait, 1))
	wantRecords(t, fr, lateTopic, 1, roundValue(1, 0))
	asked0 := lc.askedAt(0)

	release := lc.relays[1].Hold()
	defer release()
	kept := p.FetchKept()
	fr = fetch(1, 1)
	wantRecords(t, fr, lateTopic, 1)
	// At offset 0: what this part asks differs from the late part, and it
	// would be sent behind it.
	fr = fetch(1, 0)
	if code := partitionError(fr, lateTopic, 1); code != 0 {
		t.Fatalf("partition 1 while its broker is held: error %d, want no records and no error", code)
	}
	release()
	// Ask until a Fetch of partition 1 at offset 2 reaches broker 1, the
	// late answer in: what was sent before it on its connection has
	// reached the broker too.
	lc.produce(1, 1)
	waitFor(t, "a Fetch of offset 2 to reach broker 1", func() bool {
		fetch(1, 2)
		return lc.askedAt(2) > 0
	})
	if n := lc.askedAt(0) - asked0; n != 0 {
		t.Fatalf("broker 1 was asked %d times more for partition 1 at offset 0, want none: the part asked while it was late with another is not sent", n)
	}
	if p.FetchKept() != kept {
		t.Fatal("an answer was kept with memory short")
	}
}

// partitionError is the error code fr gives topic's partition part, or
// -2 when fr does not answer it.
func partitionError(fr *kmsg.FetchResponse, topic string, part int32) int16 {
	for _, ft := range fr.Topics {
		for _, rp := range ft.Partitions {
			if ft.Topic == topic && rp.Partition == part {
				return rp.ErrorCode
			}
		}
	}
	return -2
}
