package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pages"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestSingleFetchCutsAnAnswerBeyondMaxBytes: brokers that answer every
// partition of a Fetch with a 1 MiB batch, whatever its max_bytes (kfake's
// synthetic mode), answer each part of a 36-partition fetch with 12 MiB,
// more than a 16 MiB budget can hold for the three parts together. A
// consumer through the single endpoint still reads records at once (not
// after the response wait, 30 s, nor never), each partition's in order
// and whole; the answers were cut, and another client is served beside
// it; the records the cuts kept were parked in pipes, and no memory is
// held or mapped once both are gone.
//
// The consumer's first Fetch may name only some of the partitions:
// franz-go makes each partition usable as its offset is set, and the
// Fetch it sends at the first holds those usable by then, an answer that
// can fit. So the consumer reads on until an answer was cut and a poll
// begun after it returned records; its later Fetches name all 36.
func TestSingleFetchCutsAnAnswerBeyondMaxBytes(t *testing.T) {
	const topic, partitions, valueSize, want = "over", 36, 8000, 400
	kc := newCluster(t, kfake.SeedTopics(partitions, topic),
		kfake.SyntheticFetch(kfake.SyntheticBatch{Records: 128, RecordBytes: valueSize}))
	spreadLeaders(t, kc, topic, partitions)
	m := metrics.New()
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) { c.MaxMemory = smallestBudget }, proxy.WithMetrics(m))
	ctx := testContext(t, 25*time.Second)
	only := &onlyProxy{addr: p.Addr()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), only.opt(), kgo.ConsumeTopics(topic),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(1<<20), kgo.BrokerMaxReadBytes(100<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	mapped := pages.Live()
	start := time.Now()
	next := map[int32]int64{}
	got, afterCut := 0, 0
	for got < want || afterCut == 0 {
		cutBefore := p.FetchCuts() > 0
		fetches := cl.PollRecords(ctx, max(want-got, 100))
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d records in %s, want %d and some after an answer was cut (%d cut, %d records after): %v",
				got, time.Since(start).Round(time.Millisecond), want, p.FetchCuts(), afterCut, err)
		}
		fetches.EachError(func(topic string, part int32, err error) {
			t.Fatalf("partition %d: %v", part, err)
		})
		for _, r := range fetches.Records() {
			if n, ok := next[r.Partition]; ok && r.Offset != n {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, n-1)
			}
			if len(r.Value) != valueSize {
				t.Fatalf("partition %d offset %d: a value of %d bytes, want %d", r.Partition, r.Offset, len(r.Value), valueSize)
			}
			next[r.Partition] = r.Offset + 1
			got++
			if cutBefore {
				afterCut++
			}
		}
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("%d records took %s", got, took)
	}
	if v, ok := findCounter(t, m, metrics.NameFetchAnswersCut); !ok || v == 0 || v > float64(p.FetchCuts()) {
		t.Fatalf("%s = %v (exported: %v), %d cut", metrics.NameFetchAnswersCut, v, ok, p.FetchCuts())
	}
	only.check(t)
	if sockio.CanDiscard && p.FetchParks() == 0 {
		t.Fatalf("%d answers cut, none with the records it kept parked in pipes", p.FetchCuts())
	}

	other, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), only.opt())
	if err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	resp, err := md.RequestWith(ctx, other)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
		t.Fatalf("another client's Metadata beside the consumer: %v", err)
	}
	other.Close()
	cl.Close()
	waitMemoryFree(t, p)
	waitUnmapped(t, mapped)
}
