package proxy_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// commitFrame returns an OffsetCommit v2 frame committing offset to each of
// parts of topic for group, its metadata pad bytes long.
func commitFrame(group, topic string, parts []int32, offset int64, pad int, corr int32) []byte {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = 2, group
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	meta := strings.Repeat("m", pad)
	for _, p := range parts {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: offset, Metadata: &meta})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
}

// TestApacheKafkaCommitsUnderSmallBudget: through the proxy in none mode,
// under a 256 KiB budget and no read timeout, in front of Apache Kafka
// (testenv/kafka, INORDER_KAFKA_BOOTSTRAP), one connection pipelines 40
// OffsetCommits of 4 KB to one partition, a commit of 1,200 partitions
// (past the keys a write keeps: a barrier), and 40 more. The pending
// commits fill the budget, and every one is answered in order; the group's
// committed offset is the last commit's, so the scanned keys ordered them.
func TestApacheKafkaCommitsUnderSmallBudget(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	p := startProxy(t, config.OrderingNone, strings.Split(boot, ","), func(c *config.Config) {
		c.MaxMemory = 256 << 10
		c.MaxRequestSize, c.MaxResponseSize = 64<<10, 64<<10
		c.ReadTimeout = 0
	})
	ctx := testContext(t, 120*time.Second)
	topic := fmt.Sprintf("budget-commits-%d", time.Now().UnixNano())
	group := topic + "-group"
	createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The group's coordinator must be loaded before raw commits reach it:
	// commit through the client until one is accepted.
	for {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group = group
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 1}}
		oc.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp, err := oc.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].ErrorCode == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no coordinator for %s: %v", group, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var pipeline []byte
	var corrs []int32
	wide := int32(0)
	for i := range 81 {
		corr := int32(i + 1)
		corrs = append(corrs, corr)
		if i == 40 {
			parts := make([]int32, 1200)
			for j := range parts {
				parts[j] = int32(j)
			}
			wide = corr
			pipeline = append(pipeline, commitFrame(group, topic, parts, 0, 0, corr)...)
			continue
		}
		pipeline = append(pipeline, commitFrame(group, topic, []int32{0}, int64(corr), 4000, corr)...)
	}
	c := dial(t, p.Addr())
	go c.Write(pipeline)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for _, want := range corrs {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			t.Fatalf("waiting for commit %d: %v", want, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(head[:])-4)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(head[4:])); got != want {
			t.Fatalf("response %d where %d was owed", got, want)
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = 2
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && (want != wide || rp.Partition < 3) {
					t.Fatalf("commit %d, partition %d: %v", want, rp.Partition, err)
				}
			}
		}
	}
	if waits := p.Stats().MemoryWaits; waits == 0 {
		t.Errorf("no read waited for memory: the pending commits never filled the budget")
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = topic, []int32{0}
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{ft}
	got, err := fetch.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 || got.Topics[0].Partitions[0].Offset != int64(corrs[len(corrs)-1]) {
		t.Fatalf("committed offsets %+v, want the last commit's, %d", got.Topics, corrs[len(corrs)-1])
	}
}
