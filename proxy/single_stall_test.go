package proxy_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
)

// TestSingleStalledBroker stalls the broker that leads partition 0 of
// three: its relay keeps every connection open, accepts new ones and
// forwards nothing, as a stopped broker process or a host behind a
// network that drops everything does. One client connection pipelines
// Produce requests (acks=all, timeout 20 s) to the three partitions and a
// Metadata request:
//   - the first requests after the stall are answered once the stalled
//     part has waited the grace (5 s) and a probe of its broker the dial
//     timeout, well before the Produce timeout that a client waits for,
//     the other partitions written and the stalled broker's
//     NOT_LEADER_OR_FOLLOWER;
//   - later requests are answered without waiting for a deadline again:
//     the broker is down, its dials (which its host accepts) used only
//     once it answers a probe, and the proxy counts one stall;
//   - the Metadata request is answered every time;
//   - once the broker answers again, its partition is written again.
func TestSingleStalledBroker(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			testSingleStalledBroker(t, mode)
		})
	}
}

func testSingleStalledBroker(t *testing.T, mode config.Ordering) {
	const (
		topic       = "stall"
		dialTimeout = 300 * time.Millisecond
		grace       = 5 * time.Second // single's stallGrace
		timeout     = 20 * time.Second
	)
	kc, relays := relayedCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.DialTimeout = dialTimeout })

	leader := kc.LeaderFor(topic, 0)
	var stalled *hostile.Relay
	for _, r := range relays {
		if r.Addr() == kc.ListenAddrs()[leader] {
			stalled = r
		}
	}
	if stalled == nil {
		t.Fatalf("no relay for broker %d", leader)
	}

	rc := dialRaw(t, p.Addr())
	// batch pipelines n Produce requests of one record to each partition
	// and a Metadata request, reads the answers in order, and returns
	// each Produce answer's error code by partition.
	batch := func(n int) [][3]int16 {
		t.Helper()
		rc.c.SetDeadline(time.Now().Add(timeout + 10*time.Second))
		var frames []byte
		first := rc.corr + 1
		for range n {
			rc.corr++
			req := produceToThree(topic, -1, int32(timeout.Milliseconds()))
			frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, rc.corr)...)
		}
		rc.corr++
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 7
		frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, meta, rc.corr)...)
		if _, err := rc.c.Write(frames); err != nil {
			t.Fatal(err)
		}
		out := make([][3]int16, n)
		for i := range n {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 7
			if err := resp.ReadFrom(readResponse(t, rc.c, first+int32(i))); err != nil {
				t.Fatal(err)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					out[i][rp.Partition] = rp.ErrorCode
				}
			}
		}
		checkListsThree(t, readResponse(t, rc.c, rc.corr), topic)
		return out
	}
	during := func(when string, codes [][3]int16) {
		t.Helper()
		for i, c := range codes {
			if c[1] != 0 || c[2] != 0 {
				t.Fatalf("%s: request %d answered %v: a healthy broker's partition failed", when, i, c)
			}
			if c[0] != kerr.NotLeaderForPartition.Code {
				t.Fatalf("%s: request %d answered %v, want NOT_LEADER_OR_FOLLOWER (%d) for the stalled broker's partition",
					when, i, c, kerr.NotLeaderForPartition.Code)
			}
		}
	}

	for i, codes := range batch(2) {
		if codes != [3]int16{} {
			t.Fatalf("before the stall: request %d answered %v", i, codes)
		}
	}

	release := stalled.Hold()
	defer release()
	start := time.Now()
	during("the first requests of the stall", batch(3))
	took := time.Since(start)
	if took < grace-time.Second || took > grace+dialTimeout+3*time.Second {
		t.Fatalf("the first requests of the stall were answered after %v, want about %v (the grace and a probe's dial timeout)", took, grace+dialTimeout)
	}

	// The broker is down now: nothing waits for a deadline again, only
	// for a probe's dial timeout at most.
	start = time.Now()
	batches := 0
	for time.Since(start) < 2*time.Second {
		bs := time.Now()
		during("later in the stall", batch(3))
		if d := time.Since(bs); d > grace/2 {
			t.Fatalf("a request later in the stall took %v: it waited for the stalled broker", d)
		}
		batches++
	}
	if n := p.BrokerStalls(); n != 1 {
		t.Fatalf("%d stalls counted, want 1", n)
	}
	t.Logf("stall: first requests answered after %v, then %d batches in 2 s", took, batches)

	release()
	deadline := time.Now().Add(20 * time.Second)
	for {
		codes := batch(1)[0]
		if codes == [3]int16{} {
			break
		}
		if codes[1] != 0 || codes[2] != 0 {
			t.Fatalf("after the stall: answered %v: a healthy broker's partition failed", codes)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker answering again for 20 s, its partition still answered %d", codes[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.BrokerStalls(); n != 1 {
		t.Fatalf("%d stalls counted after the broker answered again, want 1", n)
	}
}

// TestSingleSlowBrokerNotStalled has the broker that leads partition 0
// of three hold one Produce (acks=all, timeout 20 s) for 8 s, as a broker
// waiting for its replicas does, while it answers everything else: the
// probe made after 5 s finds it alive, so the Produce is answered by the
// broker, every partition written, and no stall is counted.
func TestSingleSlowBrokerNotStalled(t *testing.T) {
	t.Parallel()
	const (
		topic = "slow"
		hold  = 8 * time.Second
	)
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) { c.DialTimeout = 300 * time.Millisecond })
	leader := kc.LeaderFor(topic, 0)
	var held atomic.Bool
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if kc.CurrentNode() == leader && held.CompareAndSwap(false, true) {
			kc.SleepControl(func() { time.Sleep(hold) })
		}
		return nil, nil, false
	})

	rc := dialRaw(t, p.Addr())
	start := time.Now()
	resp := rc.do(produceToThree(topic, -1, 20000)).(*kmsg.ProduceResponse)
	took := time.Since(start)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d answered error %d after %v: the slow broker was taken for stalled", rp.Partition, rp.ErrorCode, took)
			}
		}
	}
	if !held.Load() || took < hold-time.Second {
		t.Fatalf("the Produce was answered after %v, the broker holding it %v: it was not held", took, hold)
	}
	if n := p.BrokerStalls(); n != 0 {
		t.Fatalf("%d stalls counted for a broker that answers", n)
	}
}
