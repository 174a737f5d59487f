package proxy_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// logBuffer collects the proxy's log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls cond until it holds or the deadline passes.
func (l *logBuffer) waitFor(t testing.TB, substr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(l.String(), substr) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("log never contained %q; log:\n%s", substr, l.String())
}

type testProxy struct {
	*proxy.Proxy
	log *logBuffer
}

// startProxy runs a proxy on ephemeral loopback ports in front of
// upstreams and closes it when the test ends.
func startProxy(t testing.TB, mode config.Ordering, upstreams []string, mut func(*config.Config), opts ...proxy.Option) *testProxy {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = upstreams
	cfg.UpstreamOrdering = mode
	cfg.DialTimeout = 5 * time.Second
	if mut != nil {
		mut(&cfg)
	}
	if cfg.MaxMemory > 0 && cfg.MaxMemory < config.MinMemory {
		// A budget too small for --max-memory, to reach its bounds
		// with little traffic.
		opts = append(opts, proxy.WithMemory(cfg.MaxMemory))
		cfg.MaxMemory = 0
	}
	lb := &logBuffer{}
	log := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, seen := leakChecked.LoadOrStore(t, true); !seen {
		// Registered before the first proxy's Close, so it runs after
		// every proxy of the test has closed.
		t.Cleanup(func() { checkNoProxyGoroutines(t) })
	}
	p, err := proxy.New(cfg, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		// Every connection has ended: whatever it reserved of the
		// memory budget must be back.
		if used := p.Stats().MemoryUsed; used != 0 {
			t.Errorf("%d bytes of the memory budget still reserved after Close", used)
		}
	})
	return &testProxy{Proxy: p, log: lb}
}

func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// dialRecorder records every address a kgo client dials, so a test can
// assert the client never went around the proxy.
type dialRecorder struct {
	mu    sync.Mutex
	addrs map[string]int
}

func (d *dialRecorder) opt() kgo.Opt {
	var dialer net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		d.mu.Lock()
		if d.addrs == nil {
			d.addrs = map[string]int{}
		}
		d.addrs[host]++
		d.mu.Unlock()
		return dialer.DialContext(ctx, network, host)
	})
}

func (d *dialRecorder) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for a := range d.addrs {
		out = append(out, a)
	}
	return out
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// proxyGoroutines returns the stacks of goroutines running proxy code.
func proxyGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "inorder/proxy.(*") && !strings.Contains(g, "proxy_test.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

var leakChecked sync.Map

// checkNoProxyGoroutines fails t if proxy goroutines outlive Close. Close
// waits for all of them, but one may still be returning from its last
// deferred call, so it allows a moment.
func checkNoProxyGoroutines(t testing.TB) {
	leakChecked.Delete(t)
	leaked := proxyGoroutines()
	for deadline := time.Now().Add(2 * time.Second); leaked != "" && time.Now().Before(deadline); leaked = proxyGoroutines() {
		time.Sleep(10 * time.Millisecond)
	}
	if leaked != "" {
		t.Errorf("goroutines left after Close:\n%s", leaked)
	}
}

// newReorderer starts a backend that answers pipelined requests in
// completion order after a random delay in [min, max], with topic seeded
// with partitions partitions, and closes it when the test ends.
func newReorderer(t testing.TB, min, max time.Duration, topic string, partitions int32) *hostile.Reorderer {
	t.Helper()
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MinDelay:  min,
		MaxDelay:  max,
		KfakeOpts: []kfake.Opt{kfake.SeedTopics(partitions, topic)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// findCounter returns the value of the counter (or gauge) name whose
// labels match the given name, value pairs, and whether there is one.
func findCounter(t *testing.T, m *metrics.Metrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range mt.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if g := mt.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			return mt.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// counter is findCounter's value; 0 if there is none.
func counter(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	v, _ := findCounter(t, m, name, labels...)
	return v
}

// streamedCounter returns inorder_streamed_total for kind once it is at
// least least, or after 5 s whatever it is then. A stream is counted once
// its last byte has moved, and by then the peer may have answered and the
// client have its response: reading the counter at once races with that.
func streamedCounter(t *testing.T, m *metrics.Metrics, kind metrics.Streamed, least float64) float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := counter(t, m, metrics.NameStreamed, "kind", string(kind))
		if n >= least || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
