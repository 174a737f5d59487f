package proxy_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestAPIVersionCapFetch15: with Fetch capped at 15 the client fetches at
// v15 (no KIP-951 endpoints, so the proxy streams large responses unread)
// and consumes every record intact and in order.
func TestAPIVersionCapFetch15(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "capped"))
	fetchVersions := make(chan int16, 64)
	kc.ControlKey(1, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		select {
		case fetchVersions <- req.GetVersion():
		default:
		}
		return nil, nil, false
	})
	for _, tc := range []struct {
		mode config.Ordering
		tls  bool
	}{{config.OrderingConnection, false}, {config.OrderingNone, false}, {config.OrderingConnection, true}} {
		name := string(tc.mode)
		if tc.tls {
			name += "/tls"
		}
		t.Run(name, func(t *testing.T) {
			var dial []kgo.Opt
			p := startProxy(t, tc.mode, kc.ListenAddrs(), func(c *config.Config) {
				c.APIVersionCap = config.VersionCaps{1: 15}
				if tc.tls {
					// Streamed responses go through user space,
					// so a TLS client socket streams too.
					k := newPKI(t)
					c.TLSCert, c.TLSKey = k.files(t, "proxy", "127.0.0.1")
					dial = append(dial, kgo.DialTLSConfig(k.tlsConfig(t, "")))
				}
			})
			ctx := testContext(t, 30*time.Second)
			topic := "capped"
			prod, err := kgo.NewClient(append(dial, kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20))...)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			const n = 40
			val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
			for i := range n {
				prod.Produce(ctx, &kgo.Record{Value: val(i)}, nil)
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cons, err := kgo.NewClient(append(dial, kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(8<<20))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			got := 0
			for got < n {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d records: %v", got, n, err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) {
					if i := got % n; !bytes.Equal(r.Value, val(i)) {
						t.Fatalf("record %d differs", got)
					}
					got++
				})
			}
			seen := 0
			drain(fetchVersions, func(v int16) {
				seen++
				if v > 15 {
					t.Fatalf("the client fetched at v%d through a proxy capping Fetch at 15", v)
				}
			})
			if seen == 0 {
				t.Fatal("the backend saw no fetch")
			}
		})
	}
}

func drain(ch chan int16, f func(int16)) {
	for {
		select {
		case v := <-ch:
			f(v)
		default:
			return
		}
	}
}
