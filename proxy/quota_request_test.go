package proxy_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

func metadataRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	return req
}

// TestQuotaRequestPercentage: a client id whose request_percentage is far
// below the proxy's own time on its requests (0.0001% of a core is 2µs
// over the test's 2s window; one Metadata, its addresses rewritten, takes
// more) has throttle_time_ms set in its answers, bounded by one sample
// of the window (200ms here, Kafka's 1s by default), and its connection
// is not read for that long; its throttled Fetch is answered empty, as
// Kafka answers one. Another client id on the same proxy, without that
// quota, is never throttled. The throttle shows under kind "request" of
// the configured entity; a reload that removes the quota ends it.
func TestQuotaRequestPercentage(t *testing.T) { quotaTopologies(t, testQuotaRequestPercentage) }

func testQuotaRequestPercentage(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "r"))
	direct, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if err := direct.ProduceSync(context.Background(), &kgo.Record{Topic: "r", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	mut := func(c *config.Config) {
		c.Quotas = parseQuotas(t, "- client-id: slow\n  request_percentage: 0.0001\n- client-id: free\n  producer_byte_rate: 1048576\n")
	}
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, mut), proxy.WithQuotaWindow(quotaWindow), proxy.WithMetrics(m))
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	slow, free := dial(), dial()
	sample := quotaWindow.Size

	// Every answer from the second on is throttled: the first request's
	// time alone may be within the quota.
	var throttles []time.Duration
	var sent, answered []time.Time
	for i := range 4 {
		sent = append(sent, time.Now())
		resp := roundTripAs(t, slow, "slow", metadataRequest(), int32(i+1)).(*kmsg.MetadataResponse)
		answered = append(answered, time.Now())
		throttles = append(throttles, time.Duration(resp.ThrottleMillis)*time.Millisecond)
		if len(resp.Brokers) != 1 {
			t.Fatalf("answer %d: %d brokers, want the answer itself kept", i, len(resp.Brokers))
		}
	}
	t.Logf("throttles of the slow client's Metadata answers: %v", throttles)
	for i, d := range throttles {
		if i > 0 && d <= 0 || d > sample {
			t.Errorf("answer %d: throttle_time_ms %v, want in (0, %v]", i, d, sample)
		}
	}
	// The mute holds the reader back for the throttle, counted from the
	// check, which came after the request was sent: its next request is
	// answered no sooner. throttle_time_ms is the throttle rounded up.
	for i := 1; i+1 < len(sent); i++ {
		if gap := answered[i+1].Sub(sent[i]); gap < throttles[i]-time.Millisecond {
			t.Errorf("request %d answered %v after request %d was sent, within its throttle of %v", i+1, gap, i, throttles[i])
		}
	}
	fetch := roundTripAs(t, slow, "slow", sessionlessFetch("r"), 10).(*kmsg.FetchResponse)
	if fetch.ThrottleMillis <= 0 || time.Duration(fetch.ThrottleMillis)*time.Millisecond > sample {
		t.Errorf("throttled Fetch: throttle_time_ms %d, want in (0, %v]", fetch.ThrottleMillis, sample)
	}
	if len(fetch.Topics) != 0 {
		t.Errorf("throttled Fetch answered with %d topics, want none (Kafka's throttled fetch)", len(fetch.Topics))
	}

	for i := range 5 {
		resp := roundTripAs(t, free, "free", metadataRequest(), int32(i+1)).(*kmsg.MetadataResponse)
		if resp.ThrottleMillis != 0 {
			t.Errorf("the client without request_percentage throttled %dms", resp.ThrottleMillis)
		}
	}
	if s := counter(t, m, metrics.NameQuotaThrottle, "kind", metrics.QuotaRequest, "entity", "clients/slow"); s <= 0 {
		t.Errorf("%s{kind=request,entity=clients/slow} = %v; want > 0", metrics.NameQuotaThrottle, s)
	}

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = kc.ListenAddrs()
	cfg.UpstreamOrdering = config.OrderingConnection
	cfg.Topology = topo
	cfg.DialTimeout = 5 * time.Second
	cfg.Quotas = parseQuotas(t, "- client-id: slow\n  producer_byte_rate: 1048576\n")
	if err := p.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sample + 50*time.Millisecond) // the last mute passes
	for i := range 3 {
		resp := roundTripAs(t, slow, "slow", metadataRequest(), int32(20+i)).(*kmsg.MetadataResponse)
		if resp.ThrottleMillis != 0 {
			t.Errorf("after the reload removed request_percentage: throttled %dms", resp.ThrottleMillis)
		}
	}
}
