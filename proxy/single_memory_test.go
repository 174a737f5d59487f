package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// The memory budget in the single topology, where a request is decoded,
// split and its answers merged: what that costs is reserved before it is
// allocated, a request that could never fit is refused at once, and a
// merged answer needs about its own size beside its parts' answers.

// TestSingleRequestTooWideToSplitIsRefusedAtOnce: a Produce v9 (acks=1)
// of 1,000,000 partitions is a 6 MB frame, which a 16 MiB budget holds,
// and about 600 MB once decoded, split, answered and merged, which it
// never could. Its connection is closed as soon as the frame is read,
// before anything is decoded, with the reason and the setting counted; the
// heap grows by little more than the frame; another client is served
// before and after. Before, the heap grew by 301 MiB and the connection
// closed only when the merged answer found no buffer.
func TestSingleRequestTooWideToSplitIsRefusedAtOnce(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(3, "t"))
	m := metrics.New()
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) {
		c.MaxMemory = smallestBudget
	}, proxy.WithMetrics(m))
	good := dial(t, p.Addr())
	ask(t, good)

	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, 1_000_000)
	for i := range rt.Partitions {
		rt.Partitions[i].Partition = int32(i)
	}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	wide := kmsg.NewRequestFormatter(kmsg.FormatterClientID("wide")).AppendRequest(nil, req, 1)
	req = nil
	t.Logf("frame of %d bytes", len(wide))

	big := dial(t, p.Addr())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := big.Write(wide); err != nil {
		t.Fatal(err)
	}
	took := closedWithin(t, big, 10*time.Second)
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("closed after %s; %d KiB allocated meanwhile", took, grew>>10)
	p.log.waitFor(t, "memory budget: a Produce of 6MiB needs about 733MiB to decode, split and merge, and --max-memory 16MiB holds at most 4MiB for one request: raise --max-memory")
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxMemory)); n != 1 {
		t.Fatalf("%v frames refused for max-memory, want 1", n)
	}
	// The frame (8 MiB once rounded to its pool class, after 2 MiB
	// of growth) and what the proxy, kfake and the test do meanwhile;
	// the decoded request alone would be 40 MB.
	if limit := uint64(smallestBudget + 8<<20); !raceEnabled && grew > limit {
		t.Errorf("the heap grew by %d KiB for a refused request, more than %d KiB", grew>>10, limit>>10)
	}
	ask(t, good)
	waitMemoryFree(t, p)
}

// TestSingleLargeMergedFetchIsAnswered: three partitions of about 1.5 MB
// each, led by three brokers, fetched in one request through the single
// endpoint under a 10 MiB budget. The parts' answers take 4.5 MB (6 MiB in
// their pools' classes) and the merged answer 4.6 MB: it is answered,
// where before finish reserved the parts' classes again and waited for
// memory that could never come.
func TestSingleLargeMergedFetchIsAnswered(t *testing.T) {
	const topic, partitions, size = "big", 3, 1_500_000
	kc := newCluster(t, kfake.SeedTopics(partitions, topic), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4194304"}))
	spreadLeaders(t, kc, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchMaxBytes(2<<20),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(partitions) {
		value := bytes.Repeat([]byte{byte('a' + p)}, size)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) {
				c.MaxMemory = 10 << 20
			})
			raw := dialRaw(t, p.Addr())
			req := fetchAll(topic, make([]int64, partitions), 100*time.Millisecond, 1)
			req.MaxBytes = 50 << 20
			for i := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[i].PartitionMaxBytes = 2 << 20
			}
			start := time.Now()
			resp := raw.do(req).(*kmsg.FetchResponse)
			got := 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
					}
					if len(rp.RecordBatches) < size {
						t.Fatalf("partition %d: %d bytes of records, want at least %d", rp.Partition, len(rp.RecordBatches), size)
					}
					// The answers are moved to frames of their
					// own size before the merged one is encoded:
					// the records must be theirs still.
					if want := bytes.Repeat([]byte{byte('a' + rp.Partition)}, size); !bytes.Contains(rp.RecordBatches, want) {
						t.Fatalf("partition %d: its records are not the ones written", rp.Partition)
					}
					got += len(rp.RecordBatches)
				}
			}
			t.Logf("%d bytes of records in %s", got, time.Since(start))
			if got < partitions*size {
				t.Fatalf("%d bytes of records, want at least %d", got, partitions*size)
			}
			raw.c.Close()
			waitMemoryFree(t, p)
		})
	}
}

// TestSingleFetchAskingMoreThanTheBudgetIsAnswered: a Fetch of three
// partitions led by three brokers, each holding 4 MB in batches of 100 KB,
// that asks for up to 50 MiB under a 16 MiB budget. Merged whole, its
// answer (12 MB beside its parts' 12 MB) could never fit, and the consumer
// would ask the same again for ever; its parts ask for half the budget
// together instead (its merged answer is a head and their record sets),
// and the consumer reads it all over a few fetches.
func TestSingleFetchAskingMoreThanTheBudgetIsAnswered(t *testing.T) {
	const topic, partitions, batches, size = "wide", 3, 40, 100_000
	kc := batchedCluster(t, topic, partitions, batches, size)
	m := metrics.New()
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) {
		c.MaxMemory = smallestBudget
	}, proxy.WithMetrics(m))
	raw := dialRaw(t, p.Addr())
	offsets := make([]int64, partitions)
	fetches, largest := 0, 0
	for read := 0; read < partitions*batches; {
		req := fetchAll(topic, offsets, 0, 1)
		req.MaxBytes = 50 << 20
		for i := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[i].PartitionMaxBytes = 50 << 20
		}
		resp := raw.do(req).(*kmsg.FetchResponse)
		fetches++
		got := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
				}
				got += len(rp.RecordBatches)
				recs := kmsg.RecordBatch{}
				for b := rp.RecordBatches; len(b) > 0; {
					if err := recs.ReadFrom(b); err != nil {
						t.Fatal(err)
					}
					offsets[rp.Partition] = recs.FirstOffset + int64(recs.LastOffsetDelta) + 1
					read += int(recs.NumRecords)
					b = b[12+recs.Length:]
				}
			}
		}
		largest = max(largest, got)
		if got == 0 || fetches > 20 {
			t.Fatalf("fetch %d: %d bytes of records, offsets %v", fetches, got, offsets)
		}
	}
	t.Logf("%d records read in %d fetches, at most %d bytes of records in one", partitions*batches, fetches, largest)
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxMemory)); n != 0 {
		t.Fatalf("%v frames refused for max-memory", n)
	}
}

// TestSingleFetchAnswerIsNoLargerThanAsked: a Fetch of three partitions
// led by three brokers asking for 2 MiB (partitions of 4 MB in batches of
// 100 KB) and for 50 MiB, what clients ask by default (partitions of 18 MB
// in batches of 400 KB), under the default budget. Each broker answers at
// most what its part asks for, so the parts share the client's maximum:
// the merged answer holds at most what was asked and one batch, as
// Kafka's own (KIP-74), not the maximum from each broker (a client asking
// for 50 MiB was answered with up to 150 MiB, past the 100 MiB franz-go
// reads).
func TestSingleFetchAnswerIsNoLargerThanAsked(t *testing.T) {
	for _, tc := range []struct {
		asked, batches, size int
	}{{2 << 20, 40, 100_000}, {50 << 20, 45, 400_000}} {
		t.Run(fmt.Sprint(tc.asked>>20, "MiB"), func(t *testing.T) {
			fetchNoLargerThanAsked(t, tc.asked, tc.batches, tc.size)
		})
	}
}

func fetchNoLargerThanAsked(t *testing.T, asked, batches, size int) {
	const topic, partitions = "asked", 3
	kc := batchedCluster(t, topic, partitions, batches, size)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	raw := dialRaw(t, p.Addr())
	offsets := make([]int64, partitions)
	fetches, largest := 0, 0
	for read := 0; read < partitions*batches; {
		req := fetchAll(topic, offsets, 0, 1)
		req.MaxBytes = int32(asked)
		for i := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[i].PartitionMaxBytes = int32(asked)
		}
		resp := raw.do(req).(*kmsg.FetchResponse)
		fetches++
		got := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
				}
				got += len(rp.RecordBatches)
				recs := kmsg.RecordBatch{}
				for b := rp.RecordBatches; len(b) > 0; {
					if err := recs.ReadFrom(b); err != nil {
						t.Fatal(err)
					}
					offsets[rp.Partition] = recs.FirstOffset + int64(recs.LastOffsetDelta) + 1
					read += int(recs.NumRecords)
					b = b[12+recs.Length:]
				}
			}
		}
		largest = max(largest, got)
		if got == 0 || fetches > 100 {
			t.Fatalf("fetch %d: %d bytes of records, offsets %v", fetches, got, offsets)
		}
	}
	t.Logf("%d records read in %d fetches, at most %d bytes of records in one", partitions*batches, fetches, largest)
	// A batch of one record is a little over the record.
	if limit := asked + size + 1<<10; largest > limit {
		t.Fatalf("a Fetch asking for %d bytes was answered with %d bytes of records, above %d", asked, largest, limit)
	}
	// Where there was more than was asked, nearly all of it is answered.
	if total := partitions * batches * size; total > asked && largest < asked*3/4 {
		t.Fatalf("a Fetch asking for %d bytes of %d was answered with at most %d", asked, total, largest)
	}
}

// batchedCluster starts a three-broker kfake whose topic has partitions
// led by every broker, each holding batches record batches of one record
// of size bytes, uncompressed.
func batchedCluster(t *testing.T, topic string, partitions int32, batches, size int) *kfake.Cluster {
	t.Helper()
	kc := newCluster(t, kfake.SeedTopics(partitions, topic))
	spreadLeaders(t, kc, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range partitions {
		for range batches {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, size)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return kc
}
