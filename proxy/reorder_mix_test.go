package proxy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestReorderingBackendPartitionsAndCommits pipelines, on one connection
// through the proxy in none mode, Produce requests spread over four
// partitions with OffsetCommits to the same partitions interleaved, to a
// backend that handles requests concurrently and answers in completion
// order. Nothing may overtake what it must not: the responses come back in
// request order, each partition's log holds its records in send order,
// and each partition's committed offset is the last one sent.
func TestReorderingBackendPartitionsAndCommits(t *testing.T) {
	const n, partitions = 240, 4
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MaxDelay:  2 * time.Millisecond,
		KfakeOpts: []kfake.Opt{kfake.SeedTopics(partitions, "m")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, nil)

	var reqs []kmsg.Request
	sent := map[int32][]string{}
	lastCommit := map[int32]int64{}
	for i := range n {
		part := int32(i*7%partitions+i/partitions) % partitions
		v := fmt.Sprintf("%d-%d", part, len(sent[part]))
		sent[part] = append(sent[part], v)
		reqs = append(reqs, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: "m", Partition: part, Value: []byte(v), Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: 1, Timeout: 5 * time.Second,
		}))
		if i%3 == 0 {
			commit := kmsg.NewPtrOffsetCommitRequest()
			commit.Version, commit.Group, commit.Generation = 8, "g", -1
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = "m"
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = part, int64(i)
			ct.Partitions = append(ct.Partitions, cp)
			commit.Topics = append(commit.Topics, ct)
			reqs = append(reqs, commit)
			lastCommit[part] = int64(i)
		}
	}
	ctx := testContext(t, 60*time.Second)
	// Directly, the same run comes back out of order, so the checks below
	// can fail.
	reordersDirectly(t, ctx, func() *hostile.Reorderer {
		direct, err := hostile.NewReorderer(hostile.ReordererConfig{
			MaxDelay:  2 * time.Millisecond,
			KfakeOpts: []kfake.Opt{kfake.SeedTopics(partitions, "m")},
		})
		if err != nil {
			t.Fatal(err)
		}
		return direct
	}, reqs)
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inOrderNoErrors(t, res)
	for part := range int32(partitions) {
		got, err := pipeprobe.ReadPartition(ctx, b.KfakeAddr(), "m", part, pipeprobe.PinTo(b.KfakeAddr()))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, sent[part]) {
			t.Fatalf("partition %d holds %v, sent %v", part, got, sent[part])
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, "g"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic = "m"
	for part := range int32(partitions) {
		ft.Partitions = append(ft.Partitions, part)
	}
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := pipeprobe.Do(ctx, b.KfakeAddr(), fetch)
	if err != nil {
		t.Fatal(err)
	}
	for _, fp := range resp.(*kmsg.OffsetFetchResponse).Topics[0].Partitions {
		if fp.Offset != lastCommit[fp.Partition] {
			t.Fatalf("partition %d committed offset %d, the last commit sent was %d", fp.Partition, fp.Offset, lastCommit[fp.Partition])
		}
	}
}
