package proxy_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/quota"
)

// benchQuotas are the quotas of bench/run.sh's security section: every
// level the bench client resolves through, none of them exceeded.
var benchQuotas = func() string {
	b, err := os.ReadFile("../bench/quotas.yaml")
	if err != nil {
		panic(fmt.Sprintf("the bench's quotas: %v", err))
	}
	return string(b)
}()

// benchRequestQuotas are benchQuotas with a request_percentage too, never
// exceeded: the proxy then times its work on every request.
var benchRequestQuotas = strings.Replace(benchQuotas, "client-id: kgo\n", "client-id: kgo\n  request_percentage: 1000000\n", 1)

// quotaCostRoundTrip starts a connection-mode proxy in front of a canned
// backend answering body, with the quotas of the doc quotas ("": none), and
// returns a round trip of frame over one connection, done once already
// (the connection's one-time state). Each round trip numbers its request
// one past the last, as kgo does, so that large ones go upstream unread.
// opts are the proxy's further options.
func quotaCostRoundTrip(tb testing.TB, body, frame []byte, quotas string, m *metrics.Metrics, opts ...proxy.Option) (func(), *testProxy) {
	tb.Helper()
	var mut func(*config.Config)
	if quotas != "" {
		q, err := quota.Parse([]byte(quotas))
		if err != nil {
			tb.Fatal(err)
		}
		mut = func(c *config.Config) { c.Quotas = q }
	}
	p := startProxy(tb, config.OrderingConnection, []string{cannedBackend(tb, body)}, mut, append(opts, proxy.WithMetrics(m))...)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	resp := make([]byte, 1<<20)
	corr := uint32(7)
	roundTrip := func() {
		binary.BigEndian.PutUint32(frame[8:], corr)
		corr++
		if err := roundTripFrame(c, frame, resp); err != nil {
			tb.Fatal(err)
		}
	}
	roundTrip()
	return roundTrip, p
}

// roundTripFrame writes the request frame to c and reads its response into
// resp, whose correlation id must be the request's. It allocates nothing
// but the error.
func roundTripFrame(c net.Conn, frame, resp []byte) error {
	if _, err := c.Write(frame); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, resp[:4]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(resp)
	if n > uint32(len(resp)) {
		return fmt.Errorf("response of %d bytes", n)
	}
	if _, err := io.ReadFull(c, resp[:n]); err != nil {
		return err
	}
	if got, want := binary.BigEndian.Uint32(resp), binary.BigEndian.Uint32(frame[8:]); got != want {
		return fmt.Errorf("response correlation id %d, want %d", got, want)
	}
	return nil
}

// quotaProduce is a Produce v9 request of kgo's client id to parts
// partitions, 16 KiB each, and the backend's answer to it.
func quotaProduce(parts int) (body, frame []byte) {
	ps := make([]int32, parts)
	labels := make([]string, parts)
	for j := range ps {
		ps[j], labels[j] = int32(j), "p"
	}
	req := multiProduce(9, "quota", ps, labels, 16<<10)
	return cannedProduce(0), kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo")).AppendRequest(nil, req, 5)
}

// quotaFetch is a Fetch v16 request of kgo's client id in a fetch
// session, and the backend's answer: 12 partitions of 40 KiB of records.
func quotaFetch() (body, frame []byte) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	resp.SessionID = 1
	for p := range int32(12) {
		tp := kmsg.NewFetchResponseTopicPartition()
		tp.Partition = p
		tp.RecordBatches = make([]byte, 40<<10)
		resp.Topics = append(resp.Topics, kmsg.FetchResponseTopic{Partitions: []kmsg.FetchResponseTopicPartition{tp}})
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 16
	req.MaxBytes = 50 << 20
	req.SessionID = 1
	req.SessionEpoch = 1
	return resp.AppendTo(nil), kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo")).AppendRequest(nil, req, 5)
}

// TestQuotaNotExceededAllocatesNothing counts the proxy's allocations
// per Produce (1 and 12 partitions) and per Fetch round trip with the
// bench's quotas configured and never exceeded: as without quotas, none.
// The client id is read, the client's quotas resolved and its rate
// recorded without a copy or a lookup per request. Like
// TestLargeFramesAllocateNothing it runs without the race detector.
func TestQuotaNotExceededAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p1Body, p1 := quotaProduce(1)
	p12Body, p12 := quotaProduce(12)
	fBody, f := quotaFetch()
	const runs = 200
	for _, tc := range []struct {
		name        string
		body, frame []byte
		kind        string
		// counted is the bytes one round trip counts against the
		// quota: the request's frame for a Produce, the response's for
		// a Fetch, less the length prefix and, for the response, the
		// correlation id and the empty header tags the backend adds.
		counted int
	}{
		{"produce1", p1Body, p1, "produce", len(p1) - 4},
		{"produce12", p12Body, p12, "produce", len(p12) - 4},
		{"fetch", fBody, f, "fetch", len(fBody) + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range quotaCostCases {
				m := metrics.New()
				rt, p := quotaCostRoundTrip(t, tc.body, tc.frame, q.doc, m)
				n := testing.AllocsPerRun(runs, rt)
				t.Logf("quotas %s: %.2f allocations per round trip", q.name, n)
				if n >= 0.5 {
					t.Errorf("quotas %s: %.2f allocations per round trip, want none", q.name, n)
				}
				if q.doc == "" {
					continue
				}
				// Every round trip counted, AllocsPerRun's warm-up
				// and the first included.
				want := float64((runs + 2) * tc.counted)
				if got := counter(t, m, metrics.NameQuotaBytes, "kind", tc.kind, "entity", "users/<default>/clients/kgo"); got != want {
					t.Errorf("quotas %s: %v bytes counted against the %s quota, want %v", q.name, got, tc.kind, want)
				}
				if q.doc == benchRequestQuotas {
					// Timed, never throttled.
					if d := p.RequestTime("users/<default>/clients/kgo"); d <= 0 {
						t.Errorf("no time counted against request_percentage")
					}
					if v, ok := findCounter(t, m, metrics.NameQuotaThrottle, "kind", metrics.QuotaRequest, "entity", "users/<default>/clients/kgo"); !ok || v != 0 {
						t.Errorf("request quota's throttle: %v (found %v), want 0", v, ok)
					}
				}
			}
		})
	}
}

// quotaCostCases are the quotas the cost of a round trip is measured
// under: none, the bench's byte rates, and those with request_percentage.
var quotaCostCases = []struct{ name, doc string }{
	{"none", ""},
	{"bytes", benchQuotas},
	{"request", benchRequestQuotas},
}

// BenchmarkQuotaCost measures Produce (1 and 12 partitions) and Fetch
// round trips through a connection-mode proxy without quotas, with the
// bench's quotas and with request_percentage as well, never exceeded: compare the proxy's share of CPU in
// quota code (-cpuprofile) rather than the wall time, which the
// loopback's own cost drowns.
func BenchmarkQuotaCost(b *testing.B) {
	p1Body, p1 := quotaProduce(1)
	p12Body, p12 := quotaProduce(12)
	fBody, f := quotaFetch()
	for _, tc := range []struct {
		name        string
		body, frame []byte
	}{
		{"produce1", p1Body, p1},
		{"produce12", p12Body, p12},
		{"fetch", fBody, f},
	} {
		for _, q := range quotaCostCases {
			b.Run(fmt.Sprintf("%s/quotas=%s", tc.name, q.name), func(b *testing.B) {
				rt, _ := quotaCostRoundTrip(b, tc.body, tc.frame, q.doc, metrics.New())
				b.ReportAllocs()
				for b.Loop() {
					rt()
				}
			})
		}
	}
}
