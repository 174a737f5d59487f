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
