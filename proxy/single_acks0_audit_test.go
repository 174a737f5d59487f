package proxy_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestSingleAcksZeroAuditUnsent: in the single topology, audited in
// connection mode, acks=0 Produce requests to three
// partitions led by three brokers while partition 0's leader cannot be
// reached (its address refuses connections): first while the client
// connection's dial to it runs and fails (the parts that waited for it),
// then while the proxy knows it down (the parts that find no broker), by
// topic name (v9) and by topic id (v13). Each request has its event,
// those of requests to partition 0 alone too: partition 0 carries
// NOT_LEADER_OR_FOLLOWER, the error an answer would have given it, and
// no offsets, never named written; partitions 1 and 2 carry no error and
// no offsets, and their records and bytes, which reached their brokers in
// the order sent. A request to a topic the cluster lacks, which goes
// nowhere, leaves its connection open and its event carries
// UNKNOWN_TOPIC_OR_PARTITION. In a summary, the partitions carry the
// same errors and count the records of every request.
func TestSingleAcksZeroAuditUnsent(t *testing.T) {
	for _, dataPath := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
		t.Run(dataPath, func(t *testing.T) { testSingleAcksZeroAuditUnsent(t, dataPath) })
	}
}

func testSingleAcksZeroAuditUnsent(t *testing.T, dataPath string) {
	const topic = "unsent"
	kc, relays := relayedCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	p, stop := auditTrailProxy(t, kc, config.OrderingConnection, dataPath, func(c *config.Config) {
		c.Topology, c.DialTimeout = config.TopologySingle, time.Second
	})
	ctx := testContext(t, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	cl.Close()
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("topic %s: %v, %v", topic, err, topics[topic].Err)
	}
	topicID := topics[topic].ID
	// Closed before the client connection has an upstream connection
	// to it (a part written to a socket the broker closed a moment ago
	// goes, as far as anyone can tell): its first parts wait for a dial
	// that is refused.
	dead := kc.LeaderFor(topic, 0)
	if dead == kc.LeaderFor(topic, 1) || dead == kc.LeaderFor(topic, 2) {
		t.Fatalf("partition 0's leader %d leads another partition", dead)
	}
	if err := relays[dead].Close(); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, p.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)

	// round pipelines, per version, a request to the three partitions
	// and one to partition 0 alone, then a Metadata request, whose
	// answer is the first read: none comes for acks=0.
	const nosuch = "nosuch"
	sent, unknown := 0, 0  // Produce requests sent, to nosuch
	var want [3][]string   // the values written to each partition, in order
	var alone []string     // the values of the requests to partition 0 alone
	round := func(r int) { // r: the round, in the values
		t.Helper()
		var frames []byte
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("unsent"))
		for _, version := range []int16{9, 13} {
			for _, parts := range [][]int32{{0, 1, 2}, {0}} {
				req := kmsg.NewPtrProduceRequest()
				req.Version, req.Acks, req.TimeoutMillis = version, 0, 5000
				rt := kmsg.NewProduceRequestTopic()
				if version >= 13 {
					rt.TopicID = topicID
				} else {
					rt.Topic = topic
				}
				v := fmt.Sprintf("r%d-v%d-n%d", r, version, len(parts))
				for _, part := range parts {
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition = part
					rp.Records = pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: part, Value: []byte(v), Version: 9}).Topics[0].Partitions[0].Records
					rt.Partitions = append(rt.Partitions, rp)
					want[part] = append(want[part], v)
				}
				if len(parts) == 1 {
					alone = append(alone, v)
				}
				req.Topics = append(req.Topics, rt)
				rc.corr++
				sent++
				frames = append(frames, f.AppendRequest(nil, req, rc.corr)...)
			}
		}
		// A topic the cluster does not have: no part goes upstream.
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 0, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = nosuch
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: nosuch, Value: []byte("x"), Version: 9}).Topics[0].Partitions[0].Records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.corr++
		sent++
		unknown++ // one record
		frames = append(frames, f.AppendRequest(nil, req, rc.corr)...)
		// v12, which names topics with their ids: the proxy's view
		// learns from the answer.
		rc.corr++
		frames = append(frames, f.AppendRequest(nil, md, rc.corr)...)
		if _, err := rc.c.Write(frames); err != nil {
			t.Fatal(err)
		}
		readResponse(t, rc.c, rc.corr)
	}
	round(0) // the first parts to partition 0 wait for a dial that fails
	round(1) // its broker is down: no broker for them
	round(2)

	// The healthy partitions hold their records in order.
	only := &onlyProxy{addr: p.Addr()}
	for part := int32(1); part < 3; part++ {
		var got []string
		for end := time.Now().Add(10 * time.Second); len(got) < len(want[part]) && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			var err error
			if got, err = pipeprobe.ReadPartition(ctx, p.Addr(), topic, part, only.opt()); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want[part]) {
			t.Fatalf("partition %d holds %v, want %v", part, got, want[part])
		}
	}

	id := base64.RawURLEncoding.EncodeToString(topicID[:])
	produces := produceEvents(stop())
	perRequest := dataPath == config.AuditDataPathRequest
	if perRequest && len(produces) != sent {
		t.Fatalf("%d Produce events, want one per request, %d", len(produces), sent)
	}
	// What the events count per partition, the topic named either way
	// (3: nosuch's partition), and the requests to partition 0 alone. A
	// v13 request names the topic by id: its event names it by its name
	// once the Metadata answer of the first round taught it, by the id
	// before.
	var records [4]int64
	onlyUnsent, learned := 0, 0
	for _, e := range produces {
		if perRequest && len(e.Resources) != 1 {
			t.Fatalf("a Produce event names %+v", e.Resources)
		}
		for _, res := range e.Resources {
			if res.Name != topic && res.Name != id && res.Name != nosuch {
				t.Fatalf("a Produce event names %+v", e.Resources)
			}
			if perRequest && e.APIVersion < 13 && res.Name == id {
				t.Errorf("a v%d Produce event names its topic %q", e.APIVersion, res.Name)
			}
			if e.APIVersion >= 13 && res.Name == topic {
				learned++
			}
			for _, part := range res.Partitions {
				if part.First != nil || part.Last != nil || part.Records <= 0 || part.Bytes <= 0 || perRequest && part.Records != 1 {
					t.Errorf("an acks=0 event's partition %s/%d: %+v, want its records and bytes, no offsets", res.Name, part.Partition, part)
				}
				at, code := part.Partition, int16(0)
				switch {
				case res.Name == nosuch:
					at, code = 3, kerr.UnknownTopicOrPartition.Code
				case part.Partition == 0:
					code = kerr.NotLeaderForPartition.Code
				}
				if part.ErrorCode != code {
					t.Errorf("partition %s/%d is recorded with error %d, want %d", res.Name, part.Partition, part.ErrorCode, code)
				}
				records[at] += part.Records
			}
			if len(res.Partitions) == 1 && res.Name != nosuch && res.Partitions[0].Partition == 0 {
				onlyUnsent++
			}
		}
	}
	if perRequest && learned == 0 {
		t.Errorf("no v13 Produce event names its topic by the name the Metadata answers taught")
	}
	if want := [4]int64{int64(len(want[0])), int64(len(want[1])), int64(len(want[2])), int64(unknown)}; records != want {
		t.Errorf("the events count %v records in partitions 0, 1, 2 and %s's, want %v", records, nosuch, want)
	}
	if perRequest && onlyUnsent != len(alone) {
		t.Errorf("%d events of requests to partition 0 alone, want %d", onlyUnsent, len(alone))
	}
}
