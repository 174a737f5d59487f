package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pages"
	"github.com/inorder-proxy/inorder/internal/quotaprobe"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/proxy"
)

// parkValue is record i of partition part: its size one of a few, from a
// few bytes to 300 KiB, so that a Fetch answer mixes record sets read
// whole with ones parked in pipes.
func parkValue(part int32, i int) []byte {
	sizes := []int{16, 3 << 10, 20 << 10, 70 << 10, 300 << 10}
	v := bytes.Repeat([]byte{byte(int(part)*31 + i)}, sizes[(int(part)+i)%len(sizes)])
	binary.BigEndian.PutUint32(v, uint32(part))
	binary.BigEndian.PutUint32(v[4:], uint32(i))
	return v
}

// TestSingleFetchParked: three consumers at once, each with its own fetch
// sizes, read through the single endpoint in front of three brokers
// records of many sizes from six partitions led by all three: every
// record arrives whole and in its partition's order, in both ordering
// modes, the large record sets having gone from the brokers' sockets to
// the client's through pipes, and the memory and the pipes come back.
func TestSingleFetchParked(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			const topic, partitions, perPart = "parked", 6, 20
			kc := newCluster(t, kfake.SeedTopics(partitions, topic))
			spreadLeaders(t, kc, topic, partitions)
			ctx := testContext(t, 90*time.Second)
			prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerLinger(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			for i := range perPart {
				for part := range int32(partitions) {
					prod.Produce(ctx, &kgo.Record{Partition: part, Value: parkValue(part, i)}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				}
			}
			if err := prod.Flush(ctx); err != nil || t.Failed() {
				t.Fatal("produce failed", err)
			}

			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			only := &onlyProxy{addr: p.Addr()}
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for _, sizes := range [][2]int32{{50 << 20, 1 << 20}, {400 << 10, 100 << 10}, {2 << 20, 512 << 10}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- consumeParked(ctx, topic, partitions, perPart, kgo.SeedBrokers(p.Addr()), only.opt(),
						kgo.FetchMaxBytes(sizes[0]), kgo.FetchMaxPartitionBytes(sizes[1]))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			only.check(t)
			parks, piped := p.FetchParks(), p.FetchPiped()
			t.Logf("%d parts' answers parked, %d merged answers spliced", parks, piped)
			if parks < 3 || piped < 3 {
				t.Fatalf("%d answers parked, %d spliced: the record sets were copied", parks, piped)
			}
			waitMemoryFree(t, p)
		})
	}
}

func consumeParked(ctx context.Context, topic string, partitions int32, perPart int, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := make([]int, partitions)
	var bad error
	for got := 0; got < perPart*int(partitions) && bad == nil; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("consume after %d records: %w", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if bad == nil && !bytes.Equal(r.Value, parkValue(r.Partition, next[r.Partition])) {
				bad = fmt.Errorf("partition %d offset %d: not record %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
	return bad
}

// TestSingleFetchParkedFaults: while consumers read large record sets
// through the single endpoint, slowed so that each answer is a while in
// passing, the brokers' connections are reset again and again, and other
// consumers go away in the middle of their fetches. Every record still
// arrives whole and in order to the consumers that stay, and once they
// are gone no memory is held, mapped or in a pipe: an answer cut in the
// middle of a parked record set gives back what it held.
func TestSingleFetchParkedFaults(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			const topic, partitions, perPart = "parked-faults", 6, 30
			kc, relays := relayedCluster(t, kfake.SeedTopics(partitions, topic))
			spreadLeaders(t, kc, topic, partitions)
			ctx := testContext(t, 90*time.Second)
			produceParked(ctx, t, kc.ListenAddrs(), topic, partitions, perPart)
			pipes0, mapped := sockio.PipesOut(), pages.Live()
			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			for _, r := range relays {
				r.SetDelay(2 * time.Millisecond) // each 32 KiB chunk
			}
			only := &onlyProxy{addr: p.Addr()}

			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- consumeParked(ctx, topic, partitions, perPart, kgo.SeedBrokers(p.Addr()), only.opt(),
						kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(1<<20), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()

			// Consumers that leave mid-fetch, and resets, until the
			// others are done or the faults run out.
			cuts, left := 0, 0
		faults:
			for i := 0; i < 80; i++ {
				select {
				case <-done:
					break faults
				case <-time.After(25 * time.Millisecond):
				}
				cuts += relays[i%len(relays)].Cut()
				if i%8 == 0 {
					cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), only.opt(), kgo.ConsumeTopics(topic),
						kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(50<<20))
					if err != nil {
						t.Fatal(err)
					}
					pctx, cancel := context.WithTimeout(ctx, time.Duration(20+5*i)*time.Millisecond)
					cl.PollFetches(pctx)
					cancel()
					cl.Close()
					left++
				}
			}
			<-done
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			only.check(t)
			t.Logf("%d broker connections reset, %d consumers gone mid-fetch, %d parts' answers parked, %d reset while parking",
				cuts, left, p.FetchParks(), p.FetchParkCuts())
			if p.FetchParks() == 0 || p.FetchParkCuts() == 0 {
				t.Fatalf("%d answers parked, %d reset while parking: the premise fails", p.FetchParks(), p.FetchParkCuts())
			}
			waitMemoryFree(t, p)
			waitPipesBack(t, pipes0)
			waitUnmapped(t, mapped)
		})
	}
}

// TestSingleFetchParkedThrottled: a consumer over its consumer_byte_rate
// through the single endpoint is answered empty while throttled, its
// parts' answers parked and then dropped unread; it still reads every
// record in order, and no memory is held and no pipe out afterwards.
func TestSingleFetchParkedThrottled(t *testing.T) {
	const topic, partitions, perPart = "parked-throttled", 6, 8
	kc := newCluster(t, kfake.SeedTopics(partitions, topic))
	spreadLeaders(t, kc, topic, partitions)
	ctx := testContext(t, 60*time.Second)
	produceParked(ctx, t, kc.ListenAddrs(), topic, partitions, perPart)
	pipes0, mapped := sockio.PipesOut(), pages.Live()
	q := parseQuotas(t, "- client-id: slow\n  consumer_byte_rate: 1048576\n")
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) { c.Quotas = q }, proxy.WithQuotaWindow(quotaWindow))
	only := &onlyProxy{addr: p.Addr()}
	hook := &quotaprobe.Hook{}
	if err := consumeParked(ctx, topic, partitions, perPart, kgo.SeedBrokers(p.Addr()), only.opt(), kgo.ClientID("slow"), kgo.WithHooks(hook),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(1<<20)); err != nil {
		t.Fatal(err)
	}
	only.check(t)
	t.Logf("%d throttled answers, %d parts' answers parked, %d of them dropped unread", hook.Throttled(), p.FetchParks(), p.FetchParkDrops())
	if hook.Throttled() == 0 || p.FetchParks() == 0 {
		t.Fatalf("%d throttled answers, %d parked: the premise fails", hook.Throttled(), p.FetchParks())
	}
	if p.FetchParkDrops() == 0 {
		t.Fatal("no throttled answer dropped its parked record sets unread")
	}
	waitMemoryFree(t, p)
	waitPipesBack(t, pipes0)
	waitUnmapped(t, mapped)
}

// waitUnmapped waits up to 10 s for the memory mapped for parked answers
// (internal/pages) to be no more than before the test's proxy started.
// It does not collect garbage: a frame is unmapped when it is put, and
// one left to the collector's cleanup is a leak this finds.
func waitUnmapped(t *testing.T, before int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pages.Live() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes mapped, %d before the proxy started", pages.Live(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPipesBack waits up to 10 s for the pipes given out to be as many as
// before the test's proxy started.
func waitPipesBack(t *testing.T, before int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for sockio.PipesOut() != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d pipes out, %d before the proxy started", sockio.PipesOut(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// produceParked writes perPart records of parkValue to each partition of
// topic, one at a time.
func produceParked(ctx context.Context, t *testing.T, brokers []string, topic string, partitions int32, perPart int) {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range perPart {
		for part := range partitions {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: part, Value: parkValue(part, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
