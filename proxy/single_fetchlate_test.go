package proxy_test

import (
	"context"
	"math/rand/v2"
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
	asked  *fetchCount
}

func newLateCluster(t *testing.T) *lateCluster {
	kc, relays := relayedCluster(t, kfake.SeedTopics(2, lateTopic))
	spreadLeaders(t, kc, lateTopic, 2)
	addrs := kc.ListenAddrs()
	if len(relays) != 3 || relays[1].Addr() != addrs[1] {
		t.Fatalf("%d relays, broker 1 at %s", len(relays), addrs[1])
	}
	lc := &lateCluster{t: t, kc: kc, relays: relays, ctx: testContext(t, 60*time.Second), asked: countFetches(kc)}
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
func (lc *lateCluster) askedAt(offset int64) int { return lc.asked.at(1, 1, offset) }

// fetchCount counts the Fetch requests a kfake cluster's brokers get.
type fetchCount struct {
	mu     sync.Mutex
	byNode map[int32]int
	byAt   map[[3]int64]int // by broker, partition and offset asked
	most   int              // the most partitions one request asked
}

// countFetches counts from now on the Fetch requests kc's brokers get.
func countFetches(kc *kfake.Cluster) *fetchCount {
	fc := &fetchCount{byNode: map[int32]int{}, byAt: map[[3]int64]int{}}
	kc.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		node := kc.CurrentNode()
		fc.mu.Lock()
		defer fc.mu.Unlock()
		fc.byNode[node]++
		n := 0
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			n += len(rt.Partitions)
			for _, rp := range rt.Partitions {
				fc.byAt[[3]int64{int64(node), int64(rp.Partition), rp.FetchOffset}]++
			}
		}
		fc.most = max(fc.most, n)
		return nil, nil, false
	})
	return fc
}

// of is how many Fetch requests broker node got.
func (fc *fetchCount) of(node int32) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.byNode[node]
}

// mostAsked is the most partitions one Fetch request asked.
func (fc *fetchCount) mostAsked() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.most
}

// at is how many Fetch requests broker node got that asked partition
// (of any topic) at offset.
func (fc *fetchCount) at(node, partition int32, offset int64) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.byAt[[3]int64{int64(node), int64(partition), offset}]
}

// lateFetch fails the test unless req is answered within a few waits: a
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

// TestSingleFetchLateBrokerAskedElse: a Fetch that asks a broker late
// with an earlier Fetch's part something else is not sent behind that
// part, and is answered when its wait ends.
func TestSingleFetchLateBrokerAskedElse(t *testing.T) {
	lc := newLateCluster(t)
	p := startSingle(t, config.OrderingConnection, lc.kc.ListenAddrs(), nil)
	rc := dialRaw(t, p.Addr())
	fetch := func(offsets ...int64) *kmsg.FetchResponse {
		t.Helper()
		return lateFetch(rc, fetchAll(lateTopic, offsets, lateWait, lateNoMin))
	}
	fr := lateFetch(rc, fetchAll(lateTopic, []int64{0, 0}, lateWait, 1))
	wantRecords(t, fr, lateTopic, 1, roundValue(1, 0))
	asked0 := lc.askedAt(0)

	release := lc.relays[1].Hold()
	defer release()
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

// TestSingleFetchSlowAnswerWaitedFor: an answer that has begun to come
// when the Fetch's wait ends is waited for, however long it takes to
// read, as from the broker itself: a partition's record of 900 KiB
// through a relay that delays every 32 KiB it forwards, its answer taking
// about twice the client's wait to arrive, is in the Fetch's answer.
// Taken for late at the deadline, the partition was answered with no
// records.
func TestSingleFetchSlowAnswerWaitedFor(t *testing.T) {
	lc := newLateCluster(t)
	p := startSingle(t, config.OrderingConnection, lc.kc.ListenAddrs(), nil)
	rc := dialRaw(t, p.Addr())
	fr := lateFetch(rc, fetchAll(lateTopic, []int64{0, 0}, lateWait, 1))
	wantRecords(t, fr, lateTopic, 1, roundValue(1, 0))

	big := make([]byte, 900<<10) // random: no codec shrinks it
	rand.NewChaCha8([32]byte{1}).Read(big)
	if err := lc.direct.ProduceSync(lc.ctx, &kgo.Record{Partition: 1, Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lc.produce(0, 1)
	lc.relays[1].SetDelay(20 * time.Millisecond)
	defer lc.relays[1].SetDelay(0)
	start := time.Now()
	fr = lateFetch(rc, fetchAll(lateTopic, []int64{1, 1}, lateWait, lateNoMin))
	if took := time.Since(start); took < lateWait {
		t.Fatalf("answered after %v, within the wait: the relay did not slow the answer down", took)
	}
	wantRecords(t, fr, lateTopic, 0, roundValue(0, 1))
	wantRecords(t, fr, lateTopic, 1, big)
}
