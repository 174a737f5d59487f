package proxy_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestSingleBlackholedBroker puts the broker that leads partition 0 of
// three behind a black hole (it accepts nothing and refuses nothing, so
// that a dial to it waits for the proxy's dial timeout) while one client
// connection pipelines Produce requests to all three partitions, a
// Metadata request for every topic and a Fetch of the three partitions:
//   - every response comes, in request order;
//   - the other brokers' partitions are written and read every time, and
//     the dead broker's are answered NOT_LEADER_OR_FOLLOWER;
//   - a batch is slow (3/4 of the dial timeout or more) only while a dial to
//     the dead broker runs (one in 20 let pass, for a loaded machine), and
//     the proxy dials it at most once per second of the outage: its parts
//     wait for one dial, then fail at once while it is down, rather than
//     each request waiting out a dial of its own; the coordinator lookups
//     the DescribeGroups requests need do not dial it either;
//   - the Metadata request, which any broker answers, is answered by
//     another broker when the dead one's dial fails;
//   - once the broker is back, its partition is written again.
func TestSingleBlackholedBroker(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleBlackholedBroker(t, mode) })
	}
}

func testSingleBlackholedBroker(t *testing.T, mode config.Ordering) {
	const (
		topic       = "blackhole"
		dialTimeout = 300 * time.Millisecond
		outage      = 3 * time.Second
	)
	dials, restoreHook := proxy.CountSingleDials()
	t.Cleanup(restoreHook) // after the proxy's own cleanup, which comes later
	kc, relays := relayedCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.DialTimeout = dialTimeout })

	// The dead broker: partition 0's leader, and its relay.
	leader := kc.LeaderFor(topic, 0)
	var dead string
	for i, addr := range kc.ListenAddrs() {
		if int32(i) == leader {
			dead = addr
		}
	}
	var hole *hostile.Relay
	for _, r := range relays {
		if r.Addr() == dead {
			hole = r
		}
	}
	if hole == nil {
		t.Fatalf("no relay for broker %d at %s", leader, dead)
	}

	rc := dialRaw(t, p.Addr())
	// batch pipelines n Produce requests of one record to each of the
	// three partitions, a Metadata request for every topic, a Fetch of
	// the three partitions and a DescribeGroups of a group never asked
	// before (its coordinator is looked up first), reads the answers in
	// order, and returns each partition's error codes: the Produce
	// answers', then the Fetch answer's.
	batch := func(n int) [][3]int16 {
		t.Helper()
		var frames []byte
		first := rc.corr + 1
		for range n {
			rc.corr++
			req := produceToThree(topic, 1, 5000)
			frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, rc.corr)...)
		}
		rc.corr++
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 7
		frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, meta, rc.corr)...)
		rc.corr++
		fetch := fetchAll(topic, []int64{0, 0, 0}, 100*time.Millisecond, 1)
		frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, fetch, rc.corr)...)
		rc.corr++
		describe := kmsg.NewPtrDescribeGroupsRequest()
		describe.Version = 4
		describe.Groups = []string{fmt.Sprintf("group-%d", rc.corr)}
		frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, describe, rc.corr)...)
		if _, err := rc.c.Write(frames); err != nil {
			t.Fatal(err)
		}
		out := make([][3]int16, n+1)
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
		checkListsThree(t, readResponse(t, rc.c, rc.corr-2), topic)
		fresp := kmsg.NewPtrFetchResponse()
		fresp.Version = fetch.Version
		if err := fresp.ReadFrom(readResponse(t, rc.c, rc.corr-1)); err != nil {
			t.Fatal(err)
		}
		for _, rt := range fresp.Topics {
			for _, rp := range rt.Partitions {
				out[n][rp.Partition] = rp.ErrorCode
			}
		}
		dresp := kmsg.NewPtrDescribeGroupsResponse()
		dresp.Version = describe.Version
		if err := dresp.ReadFrom(readResponse(t, rc.c, rc.corr)); err != nil {
			t.Fatal(err)
		}
		if len(dresp.Groups) != 1 {
			t.Fatalf("DescribeGroups answered %d groups, want 1", len(dresp.Groups))
		}
		switch code := dresp.Groups[0].ErrorCode; code {
		case 0, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		default:
			t.Fatalf("DescribeGroups answered error %d", code)
		}
		return out
	}

	for i, codes := range batch(2) {
		if codes != [3]int16{} { // the Fetch's too
			t.Fatalf("before the outage: request %d answered %v", i, codes)
		}
	}

	restore, err := hole.Blackhole()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := dials(dead)
	start := time.Now()
	batches, slow := 0, 0
	for time.Since(start) < outage {
		bs := time.Now()
		for i, codes := range batch(4) { // request 4: the Fetch
			if codes[1] != 0 || codes[2] != 0 {
				t.Fatalf("during the outage: request %d answered %v: a healthy broker's partition failed", i, codes)
			}
			if codes[0] != kerr.NotLeaderForPartition.Code {
				t.Fatalf("during the outage: request %d answered %v, want NOT_LEADER_OR_FOLLOWER (%d) for the dead broker's partition",
					i, codes, kerr.NotLeaderForPartition.Code)
			}
		}
		batches++
		if time.Since(bs) >= dialTimeout*3/4 {
			slow++
		}
	}
	took := time.Since(start)
	n := dials(dead) - before
	if n < 1 {
		t.Fatal("the dead broker was never dialled during the outage")
	}
	if most := 1 + int(took/time.Second); n > most {
		t.Fatalf("the dead broker was dialled %d times in %v, want at most %d (one per second of backoff)", n, took, most)
	}
	// A loaded machine makes some batches slow with no dial: one in 20
	// is let pass. A batch waiting for a dial of its own each time would
	// make every batch slow.
	if slow > n+batches/20 {
		t.Fatalf("%d of %d batches took %v or more, with %d dials to the dead broker: requests waited for dials not their own", slow, batches, dialTimeout*3/4, n)
	}
	t.Logf("outage: %d batches in %v, %d slow, %d dials to the dead broker", batches, took, slow, n)

	if err := restore(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b := batch(1)
		codes := b[0]
		if codes == [3]int16{} {
			if b[1] != [3]int16{} {
				t.Fatalf("after the outage: the Produce was answered in full, the Fetch after it %v", b[1])
			}
			break
		}
		if codes[1] != 0 || codes[2] != 0 {
			t.Fatalf("after the outage: answered %v: a healthy broker's partition failed", codes)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker back for 20 s, its partition still answered %d", codes[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceToThree is a Produce v7 of one record to each of partitions 0
// to 2 of topic.
func produceToThree(topic string, acks int16, timeoutMillis int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, acks, timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for part := range int32(3) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = part, recordBatch([]byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

// checkListsThree fails t unless body, a Metadata v7 answer, lists topic
// with its 3 partitions.
func checkListsThree(t *testing.T, body []byte, topic string) {
	t.Helper()
	mresp := kmsg.NewPtrMetadataResponse()
	mresp.Version = 7
	if err := mresp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	for _, mt := range mresp.Topics {
		if mt.Topic != nil && *mt.Topic == topic && mt.ErrorCode == 0 && len(mt.Partitions) == 3 {
			return
		}
	}
	t.Fatalf("the Metadata answer does not list %s with its 3 partitions", topic)
}
