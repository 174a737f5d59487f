package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/quotaprobe"
)

// The load of TestQuotaHeldOverThirtySeconds: a producer and a consumer
// with a quota of quotaRate each, at three times it or more, and a client
// with no quota producing at quotaFreeRate throughout.
const (
	quotaRate     = 512 << 10
	quotaFreeRate = 1 << 20
	quotaValue    = 8 << 10
	quotaBatch    = 32 << 10
	// quotaBaseline is how long the client with no quota and its twin run
	// alone; quotaWarm how long the producer and the consumer then go at
	// their quota, filling the window; quotaSettle how long they go at
	// three times it or more before the measurement, quotaMeasure.
	quotaBaseline = 12 * time.Second
	quotaWarm     = 12 * time.Second
	quotaSettle   = 2 * time.Second
	quotaMeasure  = 30 * time.Second
	// quotaFill is what the consumer finds to read: more than it may
	// read at its quota over the run, the burst a new client is allowed
	// included.
	quotaFill = 48 << 20
)

// TestQuotaHeldOverThirtySeconds runs the built binary with the Kafka
// window (11 samples of 1 s) in front of the embedded broker and, when
// INORDER_KAFKA_BOOTSTRAP names one, Apache Kafka. A producer offering
// three times its producer_byte_rate and a consumer with far more to read
// than its consumer_byte_rate are each held within 10% of the quota over
// 30 s, after a warm-up of one window, and their responses carry
// throttle_time_ms. A client of another client id, with no quota, is
// never throttled and sends as much while they run as it did beside its
// twin before they started, within the gap between the twins.
func TestQuotaHeldOverThirtySeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a minute of load per broker through the built binary")
	}
	if raceEnabled {
		t.Skip("measures throughput; .ci/run runs it without the race detector")
	}
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "quota-p", "quota-c", "quota-free"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		quotaLoad(t, kc.ListenAddrs()[0], "")
	})
	t.Run("kafka", func(t *testing.T) {
		boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
		if boot == "" {
			t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
		}
		quotaLoad(t, boot, fmt.Sprintf("-%d", time.Now().UnixNano()))
	})
}

// quotaLoad runs the load of TestQuotaHeldOverThirtySeconds through the
// binary in front of upstream; topics are named with suffix, and created
// when it is not empty.
func quotaLoad(t *testing.T, upstream, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topicP, topicC, topicFree := "quota-p"+suffix, "quota-c"+suffix, "quota-free"+suffix
	if suffix != "" {
		createQuotaTopics(t, ctx, upstream, topicP, topicC, topicFree)
	}
	fillTopic(t, ctx, upstream, topicC, quotaFill)

	cfg := filepath.Join(t.TempDir(), "inorder.yaml")
	doc := fmt.Sprintf("quotas:\n  - client-id: quota-producer\n    producer_byte_rate: %d\n  - client-id: quota-consumer\n    consumer_byte_rate: %d\n", quotaRate, quotaRate)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream,
		"--config", cfg, "--admin-listen", "", "--log-level", "warn")

	// The baseline: the client with no quota and its twin, alone, after
	// three seconds to connect and reach their pace.
	start := time.Now()
	baseFrom, baseTo := start.Add(3*time.Second), start.Add(quotaBaseline)
	freeBase, twinBase := quotaprobe.NewSpan(baseFrom, baseTo), quotaprobe.NewSpan(baseFrom, baseTo)
	warmTo := baseTo.Add(quotaWarm)
	measureFrom := warmTo.Add(quotaSettle)
	measureTo := measureFrom.Add(quotaMeasure)
	window := func() *quotaprobe.Span { return quotaprobe.NewSpan(measureFrom, measureTo) }
	// The quotas count bytes on the wire; the records delivered are
	// fewer: a Fetch response from Kafka may end in a part of a batch,
	// which the client drops and fetches again whole.
	freeHeld, prodHeld, consHeld := window(), window(), window()
	prodWire, consWire := window(), window()

	client := func(id string, h *quotaprobe.Hook, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(id), kgo.WithHooks(h)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	producerOpts := []kgo.Opt{kgo.ProducerBatchMaxBytes(quotaBatch), kgo.MaxBufferedRecords(16),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())}
	var freeHook, twinHook quotaprobe.Hook
	prodHook, consHook := &quotaprobe.Hook{Key: quotaprobe.Produce, Wire: prodWire}, &quotaprobe.Hook{Key: quotaprobe.Fetch, Wire: consWire}
	free := client("quota-free", &freeHook, producerOpts...)
	twin := client("quota-free-twin", &twinHook, producerOpts...)
	prod := client("quota-producer", prodHook, producerOpts...)
	cons := client("quota-consumer", consHook, kgo.ConsumeTopics(topicC), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10))

	val := make([]byte, quotaValue)
	rand.Read(val) // incompressible: the bytes counted are the bytes sent
	freeCtx, freeStop := context.WithDeadline(ctx, measureTo)
	defer freeStop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		quotaprobe.ProduceAt(freeCtx, free, topicFree, val, quotaFreeRate, freeBase, freeHeld)
	}()
	twinCtx, twinStop := context.WithDeadline(ctx, baseTo)
	defer twinStop()
	quotaprobe.ProduceAt(twinCtx, twin, topicFree, val, quotaFreeRate, twinBase)

	quotaCtx, quotaStop := context.WithDeadline(ctx, measureTo)
	defer quotaStop()
	wg.Add(2)
	// The warm-up goes at the quota: a client new to Kafka's window may
	// send the quota of all its samples at once, and that burst, sent
	// again each time its sample leaves the window, would be measured in
	// 30 s two or three times as it happens to fall.
	warmCtx, warmStop := context.WithDeadline(ctx, warmTo)
	defer warmStop()
	go func() {
		defer wg.Done()
		quotaprobe.ProduceAt(warmCtx, prod, topicP, val, quotaRate)
		quotaprobe.ProduceAt(quotaCtx, prod, topicP, val, 3*quotaRate, prodHeld)
	}()
	go func() {
		defer wg.Done()
		var next, read int64 // none lost, none twice
		warm := time.Now()
		for quotaCtx.Err() == nil {
			cons.PollFetches(quotaCtx).EachRecord(func(r *kgo.Record) {
				if r.Offset != next {
					t.Errorf("consumer: record at offset %d; want %d", r.Offset, next)
				}
				next = r.Offset + 1
				read += int64(len(r.Value))
				consHeld.Add(len(r.Value))
			})
			if due := warm.Add(time.Duration(float64(read) / quotaRate * float64(time.Second))); due.Before(warmTo) {
				time.Sleep(time.Until(due))
			}
		}
	}()
	wg.Wait()

	ratio := func(s *quotaprobe.Span) float64 { return s.Rate() / quotaRate }
	t.Logf("producer held to %.0f B/s of requests, %.3f of its quota (records: %.3f); %d throttled responses",
		prodWire.Rate(), ratio(prodWire), ratio(prodHeld), prodHook.Throttled())
	t.Logf("consumer held to %.0f B/s of responses, %.3f of its quota (records: %.3f); %d throttled responses",
		consWire.Rate(), ratio(consWire), ratio(consHeld), consHook.Throttled())
	for _, c := range []struct {
		name string
		hook *quotaprobe.Hook
	}{{"producer", prodHook}, {"consumer", consHook}} {
		if r := ratio(c.hook.Wire); r < 0.9 || r > 1.1 {
			t.Errorf("%s held to %.3f of its quota over %v; want within 10%%", c.name, r, quotaMeasure)
		}
		if c.hook.Throttled() == 0 {
			t.Errorf("no %s response carried throttle_time_ms", c.name)
		}
	}

	a, b, held := freeBase.Rate(), twinBase.Rate(), freeHeld.Rate()
	gap := math.Abs(a-b) / ((a + b) / 2)
	moved := math.Abs(held-a) / a
	t.Logf("client with no quota: %.0f B/s beside its twin (%.0f B/s, a gap of %.4f), %.0f B/s beside the quotas (%.4f from before)",
		a, b, gap, held, moved)
	// Records are acknowledged a batch at a time: each window may gain or
	// lose one at either end.
	grain := 2 * float64(quotaBatch) / quotaFreeRate * (1/baseTo.Sub(baseFrom).Seconds() + 1/quotaMeasure.Seconds())
	if moved > gap+grain {
		t.Errorf("the client with no quota went from %.0f B/s to %.0f B/s beside the quotas, %.4f; want within the twins' gap %.4f (+%.4f)", a, held, moved, gap, grain)
	}
	if n := freeHook.Throttled() + twinHook.Throttled(); n != 0 {
		t.Errorf("the clients with no quota saw %d throttled responses", n)
	}
}

// fillTopic writes bytes of records to topic straight at the broker.
func fillTopic(t *testing.T, ctx context.Context, boot, topic string, bytes int) {
	t.Helper()
	// Small batches: a fetch returns whole batches, and one of the
	// default 1 MiB would be two seconds of the consumer's quota at once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(quotaBatch), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	val := make([]byte, quotaValue)
	rand.Read(val)
	for range bytes / quotaValue {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("fill: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// createQuotaTopics creates the topics, of one partition each.
func createQuotaTopics(t *testing.T, ctx context.Context, boot string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Topics {
		if r.ErrorCode != 0 {
			t.Fatalf("create %s: error %d", r.Topic, r.ErrorCode)
		}
	}
}
