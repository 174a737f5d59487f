package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleOldMetadataKeepsIDs: one client's Metadata v1 through the
// single endpoint, whose answer names no topic ids, does not leave the
// other clients' requests by id without a broker: a Fetch v13 naming the
// topic by id, on another connection, is answered by the leaders of its
// partitions, without UNKNOWN_TOPIC_ID.
func TestSingleOldMetadataKeepsIDs(t *testing.T) {
	const topic = "mixed"
	kc := newCluster(t, kfake.SeedTopics(2, topic))
	spreadLeaders(t, kc, topic, 2)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	direct, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	id := topicIDOf(ctx, t, direct, topic)

	for round := range 3 {
		old := dialRaw(t, p.Addr())
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1 // every topic, none by id
		if resp := old.do(md).(*kmsg.MetadataResponse); len(resp.Topics) == 0 {
			t.Fatalf("round %d: the v1 Metadata answer lists no topic", round)
		}
		rc := dialRaw(t, p.Addr())
		f := kmsg.NewPtrFetchRequest()
		f.Version, f.ReplicaID, f.MaxWaitMillis, f.MaxBytes = 13, -1, 10, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = id
		for part := range int32(2) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.PartitionMaxBytes = part, 1<<20
			ft.Partitions = append(ft.Partitions, fp)
		}
		f.Topics = append(f.Topics, ft)
		resp := rc.do(f).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("round %d: the Fetch by id after a v1 Metadata answered %+v", round, resp)
		}
		for _, fp := range resp.Topics[0].Partitions {
			if fp.ErrorCode != 0 {
				t.Errorf("round %d: partition %d by id after a v1 Metadata: %v", round, fp.Partition, kerr.ErrorForCode(fp.ErrorCode))
			}
		}
	}
}
