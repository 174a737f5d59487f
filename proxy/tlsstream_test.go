package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestStreamedOverTLS: with TLS on the client side, the upstream side or
// both, where nothing can be spliced, large Produce requests still stream,
// their bodies copied through a bounded chunk (in none mode their
// partitions found on the way), and large Fetch v16+ responses through a
// walk of their body, in both modes: an idempotent producer's batches of
// 64 KiB reach every partition in order and a consumer reads them back.
func TestStreamedOverTLS(t *testing.T) {
	for _, side := range []string{"client", "upstream", "both"} {
		for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
			t.Run(side+"/"+string(mode), func(t *testing.T) {
				k := newPKI(t)
				var kopts []kfake.Opt
				if side != "client" {
					kopts = append(kopts, kfake.TLS(k.tlsConfig(t, "broker")))
				}
				kc := newCluster(t, append(kopts, kfake.SeedTopics(3, "tls"))...)
				m := metrics.New()
				cert, key := k.files(t, "proxy", "127.0.0.1")
				p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) {
					if side != "upstream" {
						c.TLSCert, c.TLSKey = cert, key
					}
					if side != "client" {
						c.UpstreamTLSCA = k.caFile
					}
				}, proxy.WithMetrics(m))
				opts := []kgo.Opt{kgo.SeedBrokers(p.Addr())}
				if side != "upstream" {
					opts = append(opts, kgo.DialTLSConfig(k.tlsConfig(t, "")))
				}
				ctx := testContext(t, 60*time.Second)
				produceLarge(t, ctx, "tls", 3, 40, opts...)
				kind := metrics.StreamedRequestSpliced
				if mode == config.OrderingNone {
					kind = metrics.StreamedRequestScanned
				}
				if n := streamedCounter(t, m, kind, 1); n < 1 {
					t.Fatalf("no request streamed as %s", kind)
				}
				if n := streamedCounter(t, m, metrics.StreamedResponseScanned, 1); n < 1 {
					t.Fatal("no Fetch response streamed through a walk")
				}
			})
		}
	}
}

// produceLarge produces n records of 64 KiB to each of partitions
// partitions of topic, each in a batch of its own, with an idempotent
// producer, and reads them back, checking every partition's order.
func produceLarge(t *testing.T, ctx context.Context, topic string, partitions int32, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := func(part int32, i int) []byte {
		v := bytes.Repeat([]byte{byte(i)}, 64<<10)
		binary.BigEndian.PutUint32(v, uint32(part))
		binary.BigEndian.PutUint32(v[4:], uint32(i))
		return v
	}
	for i := range n {
		for part := range partitions {
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: value(part, i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("partition %d record %d: %v", part, i, err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := make([]int, partitions)
	for got := 0; got < n*int(partitions); {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := value(r.Partition, next[r.Partition]); !bytes.Equal(r.Value, want) {
				t.Fatalf("partition %d offset %d: not record %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
	for part, k := range next {
		if k != n {
			t.Fatalf("partition %d: read %d records, want %d", part, k, n)
		}
	}
}
