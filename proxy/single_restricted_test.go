package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleRestrictedMetadata: through the single endpoint, clients reach
// the broker as upstream users of their own, each described only the
// topics its ACLs allow. alice's Metadata for every topic, which leaves
// out bob's topic, and for it by name, answered TOPIC_AUTHORIZATION_FAILED,
// do not make the proxy's view of the cluster forget it: bob's next
// Produce to it, on the metadata his client holds, is written, not
// answered as a topic the proxy does not know.
func TestSingleRestrictedMetadata(t *testing.T) {
	kc, _ := aclCluster(t)
	p, opts := principalProxy(t, kc, config.TopologySingle, principalsFile(t, true, upPassB))
	ctx := testContext(t, 30*time.Second)
	// Produce by name (before v13), as a raw request names it.
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Produce), 12)
	client := func(user string) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: user, Pass: authUsers[user]}.AsSha256Mechanism()),
			kgo.DisableIdempotentWrite(), kgo.RequestRetries(0), kgo.MaxVersions(vs)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice, bob := client("alice"), client("bob")
	produce := func(round int) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "tb"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch([]byte("bob"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, bob)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("round %d: bob's Produce to tb: %v", round, kerr.ErrorForCode(code))
		}
	}
	produce(0)
	for round := 1; round <= 3; round++ {
		md := kmsg.NewPtrMetadataRequest() // every topic
		resp, err := md.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range resp.Topics {
			if mt.Topic != nil && *mt.Topic == "tb" && mt.ErrorCode == 0 {
				t.Fatal("alice was described tb: the test's ACLs do not restrict her")
			}
		}
		produce(round)
		// And asked by name: TOPIC_AUTHORIZATION_FAILED, which says
		// nothing of the topic.
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("tb")
		md.Topics = []kmsg.MetadataRequestTopic{mt}
		if resp, err = md.RequestWith(ctx, alice); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("alice asking for tb by name was answered %+v", resp.Topics)
		}
		produce(round)
	}
}
