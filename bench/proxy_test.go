package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/bench"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/twmb/franz-go/pkg/kgo"
)

func startProxy(tb testing.TB, upstream string, mode config.Ordering) *proxy.Proxy {
	tb.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = []string{upstream}
	cfg.UpstreamOrdering = mode
	cfg.ShutdownGrace = 0
	p, err := proxy.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Serve()
	}()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		_ = p.Close()
		<-done
	})
	return p
}

// benchTopic is seeded in every broker the Go benchmarks start.
const benchTopic = "produce-bench"

func startBroker(tb testing.TB, kind bench.BrokerKind) *bench.Broker {
	tb.Helper()
	b, err := bench.NewBroker(bench.BrokerConfig{Kind: kind, Topics: map[string]int32{benchTopic: 1}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b
}

func startRelayed(tb testing.TB, kind bench.BrokerKind) *bench.RelayedBroker {
	tb.Helper()
	rb, err := bench.NewRelayedBroker(bench.BrokerConfig{Kind: kind, Topics: map[string]int32{benchTopic: 1}}, "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rb.Close)
	return rb
}

// TestRunThroughProxy keeps the load generator and the proxy honest with
// each other: a short comparison of every path, each of which must move
// records without an error.
func TestRunThroughProxy(t *testing.T) {
	for _, kind := range []bench.BrokerKind{bench.Blackhole, bench.Synthetic} {
		t.Run(string(kind), func(t *testing.T) {
			direct := startBroker(t, kind)
			relayed := startRelayed(t, kind)
			conn := startProxy(t, direct.Addr(), config.OrderingConnection)
			none := startProxy(t, direct.Addr(), config.OrderingNone)
			o := bench.Default()
			o.Targets = []bench.Target{
				{Name: "inorder-connection", Addr: conn.Addr()},
				{Name: "inorder-none", Addr: none.Addr()},
				{Name: "relay", Addr: relayed.Addr()},
				{Name: "direct", Addr: direct.Addr()},
			}
			o.Produce, o.Consume = kind == bench.Blackhole, kind == bench.Synthetic
			o.Partitions = 3
			o.Rounds = 1
			o.Duration, o.Warmup = 300*time.Millisecond, 300*time.Millisecond
			if kind == bench.Synthetic {
				// A consume-only run has no count; under -race on a busy
				// machine one poll of a 1 MiB batch can outlast a short
				// window.
				o.Duration = 2 * time.Second
			}
			if kind == bench.Blackhole {
				// A count, not a time: under -race a saturating
				// producer may see no acknowledgement in a short window.
				o.Records = 2000
			}
			res, err := bench.Run(context.Background(), o, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range res.Targets {
				if s := tr.Rounds[0]; s.Produced+s.Consumed == 0 {
					t.Errorf("%s moved no records", tr.Target.Name)
				}
			}
		})
	}
}

// BenchmarkProduce forwards 1 KiB produce records over every path; with
// -cpuprofile it shows where the proxy spends its time, next to the client
// and the broker that share the process.
func BenchmarkProduce(b *testing.B) {
	direct := startBroker(b, bench.Blackhole)
	relayed := startRelayed(b, bench.Blackhole)
	paths := []struct {
		name string
		addr string
	}{
		{"direct", direct.Addr()},
		{"relay", relayed.Addr()},
		{"inorder-connection", startProxy(b, direct.Addr(), config.OrderingConnection).Addr()},
		{"inorder-none", startProxy(b, direct.Addr(), config.OrderingNone).Addr()},
	}
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i * 7)
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(p.addr),
				kgo.DefaultProduceTopic(benchTopic),
				kgo.ProducerLinger(0),
			)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			var failed atomic.Int64
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d records failed", n)
			}
		})
	}
}

// scaleConns is how many idle connections BenchmarkIdleConnections opens:
// small by default, INORDER_BENCH_CONNS=10000 for the real figure (raise
// ulimit -n to about four times that first: client, proxy both sides and
// broker share this process).
func scaleConns(b *testing.B) int {
	n := 200
	if s := os.Getenv("INORDER_BENCH_CONNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("INORDER_BENCH_CONNS=%q is not a positive number", s)
		}
		n = v
	}
	return n
}

// footprint is the process's live heap and goroutine stacks, and its
// goroutines, after a collection.
type footprint struct {
	bytes      int64
	goroutines int64
}

func measure() footprint {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	return footprint{
		bytes:      int64(s[0].Value.Uint64() + s[1].Value.Uint64()),
		goroutines: int64(s[2].Value.Uint64()),
	}
}

// settle waits for the goroutine count to come back to at most want, as
// connections closed on one side wind down on the other.
func settle(want int64) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && int64(runtime.NumGoroutine()) > want {
		time.Sleep(20 * time.Millisecond)
	}
}

// idleCost opens n idle connections to addr and returns what they added to
// the process.
func idleCost(b *testing.B, addr string, n int) footprint {
	base := measure()
	ic, err := bench.OpenIdle(context.Background(), addr, n, 32)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	with := measure()
	ic.Close()
	settle(base.goroutines + 2)
	return footprint{bytes: with.bytes - base.bytes, goroutines: with.goroutines - base.goroutines}
}

// BenchmarkIdleConnections reports what N idle client connections, each
// having completed one ApiVersions exchange, cost the proxy in heap, stacks
// and goroutines. Client, proxy and broker share the process, so the cost of
// the same connections made straight to the broker is subtracted; what is
// left is the proxy's, its client and upstream sides together.
func BenchmarkIdleConnections(b *testing.B) {
	n := scaleConns(b)
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		b.Run(fmt.Sprintf("%s/conns=%d", mode, n), func(b *testing.B) {
			broker := startBroker(b, bench.Blackhole)
			p := startProxy(b, broker.Addr(), mode)
			var direct, proxied footprint
			for b.Loop() {
				direct = idleCost(b, broker.Addr(), n)
				proxied = idleCost(b, p.Addr(), n)
			}
			mem := proxied.bytes - direct.bytes
			b.ReportMetric(float64(mem)/float64(n), "B/conn")
			b.ReportMetric(float64(mem)/(1<<20), "MiB")
			b.ReportMetric(float64(proxied.goroutines-direct.goroutines)/float64(n), "goroutines/conn")
		})
	}
}

// BenchmarkChurn opens a connection, completes one ApiVersions exchange and
// closes it, b.N times over 4 goroutines, and reports connections per
// second for each path.
func BenchmarkChurn(b *testing.B) {
	direct := startBroker(b, bench.Blackhole)
	relayed := startRelayed(b, bench.Blackhole)
	paths := []struct {
		name string
		addr string
	}{
		{"direct", direct.Addr()},
		{"relay", relayed.Addr()},
		{"inorder-connection", startProxy(b, direct.Addr(), config.OrderingConnection).Addr()},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			d := time.Second
			if s := os.Getenv("INORDER_BENCH_CHURN"); s != "" {
				v, err := time.ParseDuration(s)
				if err != nil {
					b.Fatal(err)
				}
				d = v
			}
			var rate float64
			for b.Loop() {
				r, err := bench.Churn(context.Background(), p.addr, d, 4)
				if err != nil {
					b.Fatal(err)
				}
				rate = r
			}
			b.ReportMetric(rate, "conns/s")
		})
	}
}
