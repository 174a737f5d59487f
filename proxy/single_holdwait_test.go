package proxy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestSingleConsumersDoNotHoldWhatEachOtherWaitFor: six consumers read
// two partitions led by two brokers through the single endpoint, each
// asking for 50 MiB a request and a partition, as clients do by default,
// under a budget whose quarter is a whole number of the partitions'
// record batches. A broker fills each part's answer up to the bytes it
// asks for, as Apache Kafka does, so an answer's frame is just above a
// power of two, and was read into a pool's buffer of twice its size.
// Reserved one by one as they came, each consumer's Fetch held the answers
// of some parts while waiting for room for the rest, and the consumers
// together held what all of them waited for, until a wait for memory gave
// up and closed a connection. A Fetch reserves room for all its answers
// and its merged answer before its parts are sent, asking for less when
// the budget is short, and reads a large answer at its size: every
// consumer reads every record and no frame is refused.
func TestSingleConsumersDoNotHoldWhatEachOtherWaitFor(t *testing.T) {
	const topic, partitions, batches, value, consumers = "holdwait", 2, 400, 32_000, 6
	kc := batchedCluster(t, topic, partitions, batches, value)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// A part asks for a quarter of the budget shared by the parts:
	// make that k batches, just above 2 MiB.
	batch := int64(batchSize(t, kc.ListenAddrs()[0], topic))
	k := (2<<20 + batch - 1) / batch
	limit := 4 * partitions * k * batch
	t.Logf("batches of %d bytes, parts of %d batches (%d bytes), a budget of %d bytes", batch, k, k*batch, limit)
	// A wait for memory that cannot end gives up in 2 s rather than 30.
	t.Cleanup(proxy.SetResponseWait(2 * time.Second))
	m := metrics.New()
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil, proxy.WithMemory(limit), proxy.WithMetrics(m))

	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for i := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consumeAll(ctx, p.Addr(), topic, partitions*batches, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxMemory)); n != 0 {
		t.Errorf("%v frames refused for max-memory: a wait for memory gave up", n)
	}
	waitMemoryFree(t, p)
}

// batchSize returns the size of the first record batch of topic's
// partition 0, asked of its leader directly.
func batchSize(t *testing.T, leader, topic string) int {
	t.Helper()
	req := fetchAll(topic, []int64{0}, 0, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1
	resp := dialRaw(t, leader).do(req).(*kmsg.FetchResponse)
	var b kmsg.RecordBatch
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("an answer of %d topics", len(resp.Topics))
	}
	if err := b.ReadFrom(resp.Topics[0].Partitions[0].RecordBatches); err != nil {
		t.Fatal(err)
	}
	return 12 + int(b.Length)
}

// consumeAll reads topic from the start through addr with the clients'
// default fetch sizes until it has read want records, and says how far it
// got if it could not within ctx.
func consumeAll(ctx context.Context, addr, topic string, want, i int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(50<<20), kgo.BrokerMaxReadBytes(100<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	read := 0
	for read < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumer %d: %d of %d records read: %v", i, read, want, ctx.Err())
		}
		read += fs.NumRecords()
	}
	return nil
}
