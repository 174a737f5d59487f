package proxy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// singleBatches are the record sizes every partition holds, one batch
// each, in offset order: a Fetch from offset o with a partition maximum m
// is answered with about the batches from o on that fit in m (and at
// least one), so fetches of random offsets and maxima over several
// brokers' partitions have merged answers of every size from a few
// hundred bytes to several MiB.
var singleBatches = []int{100, 1 << 10, 8 << 10, 32 << 10, 128 << 10, 512 << 10, 1 << 20, 3 << 20}

// singleMix returns a pipeline of n requests whose frames stay within
// maxFrame, with correlation ids from 1: Produce (acks -1, one to three
// partitions, small and large), OffsetCommit (small) and Fetch v11 (of one
// to all partitions, from a random offset, with a random partition and
// request maximum up to budget, and no wait).
func singleMix(rng *rand.Rand, n, maxFrame, partitions int, budget int64) [][]byte {
	frames := make([][]byte, 0, n)
	sizes := []int{10, 500, 4000, 12000, 40000, 120000}
	for i := range n {
		corr := int32(i + 1)
		switch rng.IntN(3) {
		case 0:
			var size int
			for {
				size = sizes[rng.IntN(len(sizes))]
				if size < maxFrame/2 {
					break
				}
			}
			parts := make([]int32, 1+rng.IntN(3))
			labels := make([]string, len(parts))
			for j := range parts {
				parts[j], labels[j] = int32(rng.IntN(partitions)), fmt.Sprintf("%d-%d", i, j)
			}
			req := multiProduce(9, "t", parts, labels, size/len(parts))
			frames = append(frames, kmsg.NewRequestFormatter().AppendRequest(nil, req, corr))
		case 1:
			frames = append(frames, paddedCommit(int32(rng.IntN(partitions)), sizes[rng.IntN(3)], corr))
		default:
			offsets := make([]int64, 1+rng.IntN(partitions))
			for j := range offsets {
				offsets[j] = int64(rng.IntN(len(singleBatches)))
			}
			req := fetchAll("t", offsets, 0, 1)
			req.MaxBytes = int32(1 + rng.Int64N(budget))
			for j := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[j].PartitionMaxBytes = int32(1 + rng.Int64N(budget))
			}
			frames = append(frames, kmsg.NewRequestFormatter().AppendRequest(nil, req, corr))
		}
	}
	return frames
}

// TestAnySinglePipelineIsAnsweredOrClosed is TestAnyPipelineIsAnsweredOrClosed
// in the single topology, where each request is decoded, split over three
// brokers and its parts' answers merged: for any mix of pipelined Produce,
// OffsetCommit and Fetch requests from several clients at once, in either
// ordering mode, with merged Fetch answers of every size up to the budget
// and beyond, every request is answered in order or its connection is
// closed with a reason in the log, and a client that asks for the
// cluster's versions meanwhile is answered every time. Rounds are seeded
// (the seed is logged; -budget-seed repeats them) and bounded in time.
//
// The budgets are the two smallest --max-memory takes, 16 and 32 MiB, not
// the 64 KiB-2 MiB of TestAnyPipelineIsAnsweredOrClosed: a split request
// holds its parts' answers until the last is read, with nothing to bound
// them below the budget, so where a few fetches of several MiB fill the
// budget, their answers wait for one another's memory until the response
// wait sheds them, and another client's answer meets the same wait (at 64
// KiB-8 MiB, in most seeded runs).
func TestAnySinglePipelineIsAnsweredOrClosed(t *testing.T) {
	defer proxy.SetResponseWait(2 * time.Second)()
	seed := *budgetSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-budget-seed repeats the rounds)", seed)
	rng := rand.New(rand.NewPCG(seed, 37))
	const partitions = 6
	kc := newCluster(t, kfake.SeedTopics(partitions, "t"), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "8388608"}))
	spreadLeaders(t, kc, "t", partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchMaxBytes(4<<20),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		for _, size := range singleBatches {
			r := &kgo.Record{Topic: "t", Partition: p, Value: make([]byte, size)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		budget := int64(config.MinMemory) << rng.IntN(2) // 16 and 32 MiB
		mode := []config.Ordering{config.OrderingNone, config.OrderingConnection}[rng.IntN(2)]
		maxFrame := int32(budget / 2)
		readTimeout := []time.Duration{0, 5 * time.Second}[rng.IntN(2)]
		clients := 1 + rng.IntN(4)
		t.Run(fmt.Sprintf("%d:%s/budget=%d/clients=%d/read-timeout=%s", round, mode, budget, clients, readTimeout), func(t *testing.T) {
			p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) {
				c.MaxMemory = budget
				c.MaxRequestSize = maxFrame
				c.ReadTimeout = readTimeout
			})
			pipelines := make([][][]byte, clients)
			for i := range pipelines {
				pipelines[i] = singleMix(rng, 20+rng.IntN(40), int(maxFrame), partitions, budget)
			}
			closed, asked := runBeside(t, p, pipelines)
			waits, waited := p.Stats().MemoryWaits, p.Stats().MemoryWaited
			t.Logf("%d pipelines, %d closed, %d ApiVersions answered meanwhile; %d waits for memory, %s in all", clients, closed, asked, waits, waited)
		})
	}
}
