package proxy_test

import (
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/admin"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// scrape is what one GET /metrics returned: every sample by
// name{label="value",...}, labels sorted; histograms as _count and _sum.
type scrape map[string]float64

// serveMetrics serves m on a loopback admin endpoint for the test and
// returns a function that scrapes it.
func serveMetrics(t *testing.T, m *metrics.Metrics) func() scrape {
	t.Helper()
	s, err := admin.Listen(admin.Options{Listen: "127.0.0.1:0", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return func() scrape {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("scrape does not parse: %v", err)
		}
		out := scrape{}
		for name, f := range fams {
			for _, mt := range f.GetMetric() {
				var labels []string
				for _, l := range mt.GetLabel() {
					labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
				}
				sort.Strings(labels)
				key := name
				if len(labels) > 0 {
					key += "{" + strings.Join(labels, ",") + "}"
				}
				switch {
				case mt.Counter != nil:
					out[key] = mt.GetCounter().GetValue()
				case mt.Gauge != nil:
					out[key] = mt.GetGauge().GetValue()
				case mt.Histogram != nil:
					out[strings.Replace(key, name, name+"_count", 1)] = float64(mt.GetHistogram().GetSampleCount())
					out[strings.Replace(key, name, name+"_sum", 1)] = mt.GetHistogram().GetSampleSum()
				}
			}
		}
		return out
	}
}

// waitFigure scrapes until key reaches want, then returns a scrape taken
// after that one: figures recorded when a connection ends land just after
// the client sees it close. One scrape is no snapshot, since the registry
// runs its collectors concurrently: the scrape that sees a close counted
// may hold gauges read before the connection left them (it leaves before
// its close is counted). The next scrape starts after both.
func waitFigure(t *testing.T, get func() scrape, key string, want float64) scrape {
	t.Helper()
	var s scrape
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s = get(); s[key] == want {
			return get()
		}
	}
	t.Fatalf("%s = %v, want %v", key, s[key], want)
	return nil
}

func checkFigures(t *testing.T, s scrape, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

// TestMetricsAfterReorderingWorkload pipelines n Produce requests through
// the proxy in connection mode to a backend that answers in completion
// order, then scrapes /metrics: every request counted and timed once, the
// out-of-order responses exactly as many as the backend says it reordered,
// and nothing left in flight.
func TestMetricsAfterReorderingWorkload(t *testing.T) {
	const n = 200
	b := newReorderer(t, 0, 2*time.Millisecond, "m", 1)
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, []string{b.Addr()}, nil, proxy.WithMetrics(m))
	get := serveMetrics(t, m)

	res, err := pipeprobe.ProducePipelined(testContext(t, 30*time.Second), p.Addr(), "m", 0, n, pipeprobe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Responses) != n {
		t.Fatalf("%d responses, want %d", len(res.Responses), n)
	}
	s := waitFigure(t, get, `inorder_connections_closed_total{reason="client_closed"}`, 1)
	reordered := float64(b.Reordered())
	if reordered == 0 {
		t.Fatal("the backend reordered nothing: the out-of-order figure is not tested")
	}
	checkFigures(t, s, map[string]float64{
		`inorder_requests_total{api="Produce"}`:                       n,
		`inorder_request_duration_seconds_count{api="Produce"}`:       n,
		`inorder_upstream_duration_seconds_count{api="Produce"}`:      n,
		`inorder_write_wait_seconds_count{phase="queued"}`:            n,
		`inorder_write_wait_seconds_count{phase="accept"}`:            n,
		`inorder_upstream_out_of_order_responses_total`:               reordered,
		`inorder_connections_accepted_total{listener="bootstrap"}`:    1,
		`inorder_connections_open`:                                    0,
		`inorder_requests_in_flight`:                                  0,
		`inorder_held_bytes`:                                          0,
		`inorder_upstream_dial_errors_total{reason="refused"}`:        0,
		`inorder_connections_closed_total{reason="upstream_failure"}`: 0,
	})
	total, up := s[`inorder_request_duration_seconds_sum{api="Produce"}`], s[`inorder_upstream_duration_seconds_sum{api="Produce"}`]
	if up <= 0 || total < up {
		t.Errorf("latency sum %v, upstream share sum %v: want 0 < share <= total", total, up)
	}
}

// TestMetricsBackpressureAndNoneMode: in none mode, writes to one
// partition go one at a time, so none is answered out of order; with three
// in flight allowed, the client reader pauses and the pauses are counted.
func TestMetricsBackpressureAndNoneMode(t *testing.T) {
	const n = 60
	b := newReorderer(t, 0, time.Millisecond, "bp", 1)
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, func(c *config.Config) { c.MaxInFlight = 3 }, proxy.WithMetrics(m))
	get := serveMetrics(t, m)
	if _, err := pipeprobe.ProducePipelined(testContext(t, 30*time.Second), p.Addr(), "bp", 0, n, pipeprobe.Options{}); err != nil {
		t.Fatal(err)
	}
	s := waitFigure(t, get, `inorder_connections_closed_total{reason="client_closed"}`, 1)
	checkFigures(t, s, map[string]float64{
		`inorder_requests_total{api="Produce"}`:            n,
		`inorder_write_wait_seconds_count{phase="queued"}`: n,
		`inorder_write_wait_seconds_count{phase="accept"}`: n,
		`inorder_upstream_out_of_order_responses_total`:    0,
	})
	if s[`inorder_client_read_pauses_total{reason="in_flight"}`] < 1 || s[`inorder_client_read_paused_seconds_total{reason="in_flight"}`] <= 0 {
		t.Errorf("no backpressure pause recorded with max-in-flight 3 and %d pipelined: pauses %v, seconds %v", n,
			s[`inorder_client_read_pauses_total{reason="in_flight"}`], s[`inorder_client_read_paused_seconds_total{reason="in_flight"}`])
	}
	// Queued waits are real in none mode: each write waited for the one
	// before it to the same partition.
	if s[`inorder_write_wait_seconds_sum{phase="queued"}`] <= 0 {
		t.Error("none-mode writes to one partition never waited in the queue")
	}
}

// TestMetricsCloseReasons: a bad frame and an upstream that refuses are
// counted by reason.
func TestMetricsCloseReasons(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	c := newCluster(t)
	m := metrics.New()
	good := startProxy(t, config.OrderingNone, c.ListenAddrs(), nil, proxy.WithMetrics(m))
	bad := startProxy(t, config.OrderingNone, []string{refused}, nil, proxy.WithMetrics(m))
	get := serveMetrics(t, m)

	send := func(addr string, frame []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write(frame)
		io.Copy(io.Discard, nc) // until the proxy closes
	}
	// A length prefix of 2 GiB: refused before anything is allocated.
	send(good.Addr(), []byte{0x7f, 0xff, 0xff, 0xff})
	waitFigure(t, get, `inorder_connections_closed_total{reason="bad_request"}`, 1)
	send(bad.Addr(), nil)
	s := waitFigure(t, get, `inorder_connections_closed_total{reason="upstream_failure"}`, 1)
	checkFigures(t, s, map[string]float64{
		`inorder_upstream_dial_errors_total{reason="refused"}`:     1,
		`inorder_connections_accepted_total{listener="bootstrap"}`: 2,
	})
}

// TestMetricsStreamedResponses: responses streamed from the upstream socket
// to the client are timed like those read whole.
func TestMetricsStreamedResponses(t *testing.T) {
	const n = 6
	sent := make(chan []byte, n)
	up := scriptedUpstream(t, sent, func(i int, h wire.RequestHeader) []byte {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = h.Version
		size := 300 << 10 // streamed
		if i%3 == 2 {
			size = 100 // read whole
		}
		resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: int32(i), RecordBatches: make([]byte, size)}}}}
		return resp.AppendTo(nil)
	})
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, []string{up}, nil, proxy.WithMetrics(m))
	get := serveMetrics(t, m)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var out []byte
	for i := range n {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 15
		out = append(out, kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(i))...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	var lb [4]byte
	for i := range n {
		buf, err := wire.ReadFrame(c, &lb, wire.MinResponseFrame, 1<<30)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		wire.Put(buf)
		<-sent
	}
	c.Close()
	s := waitFigure(t, get, `inorder_connections_closed_total{reason="client_closed"}`, 1)
	checkFigures(t, s, map[string]float64{
		`inorder_requests_total{api="Fetch"}`:                  n,
		`inorder_request_duration_seconds_count{api="Fetch"}`:  n,
		`inorder_upstream_duration_seconds_count{api="Fetch"}`: n,
		`inorder_requests_in_flight`:                           0,
	})
}
