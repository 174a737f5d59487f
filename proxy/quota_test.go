package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/quotaprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/quota"
)

// quotaWindow is the quota window of these tests: Kafka's 11 samples,
// of 200ms each in place of 1s, so that a rate is held within seconds
// (with 1s samples, Kafka's rate lets a new client send ten seconds of
// its quota before it is throttled at all).
var quotaWindow = quota.Window{Samples: 11, Size: 200 * time.Millisecond}

// quotaTopologies runs test in the port-per-broker topology and in the
// single one, which applies the quotas to its merged answers.
func quotaTopologies(t *testing.T, test func(*testing.T, config.Topology)) {
	for _, topo := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		t.Run(string(topo), func(t *testing.T) { test(t, topo) })
	}
}

// inTopology is mut in the topology topo ("": the default).
func inTopology(topo config.Topology, mut func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		if topo != "" {
			c.Topology = topo
		}
		if mut != nil {
			mut(c)
		}
	}
}

func parseQuotas(t *testing.T, doc string) *quota.Config {
	t.Helper()
	q, err := quota.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// randomValue is a record value of n bytes that no compression shrinks,
// so that the bytes a quota counts are the bytes the test counts.
func randomValue(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestQuotaProduceHeldToRate: a producer offering three times its
// producer_byte_rate is held to it within 10% over 5s, after 2.5s at its
// quota and 0.5s at three times it, in both ordering modes; its
// responses carry throttle_time_ms, while another client id on the same
// proxy, with no quota, is never throttled.
func TestQuotaProduceHeldToRate(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) { testQuotaProduceHeldToRate(t, mode, "") })
	}
	t.Run("single", func(t *testing.T) { testQuotaProduceHeldToRate(t, config.OrderingConnection, config.TopologySingle) })
}

func testQuotaProduceHeldToRate(t *testing.T, mode config.Ordering, topo config.Topology) {
	const rate = 1 << 20
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "q", "free"))
	q := parseQuotas(t, "- client-id: slow\n  producer_byte_rate: 1048576\n")
	m := metrics.New()
	p := startProxy(t, mode, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = q }), proxy.WithQuotaWindow(quotaWindow), proxy.WithMetrics(m))

	client := func(id string, h *quotaprobe.Hook) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ClientID(id), kgo.WithHooks(h),
			kgo.ProducerBatchMaxBytes(64<<10), kgo.MaxBufferedRecords(16), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	start := time.Now()
	held := quotaprobe.NewSpan(start.Add(3*time.Second), start.Add(8*time.Second))
	wire := quotaprobe.NewSpan(held.From, held.To)
	other := quotaprobe.NewSpan(start, start.Add(8*time.Second))
	slowHook, freeHook := &quotaprobe.Hook{Key: quotaprobe.Produce, Wire: wire}, &quotaprobe.Hook{}
	slow, free := client("slow", slowHook), client("free", freeHook)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(8*time.Second))
	defer cancel()
	// The producer goes at its quota first: a client new to the window
	// may send the quota of all its samples at once, and that burst,
	// sent again each time its sample leaves the window, would be
	// measured once or twice as it happens to fall.
	warm, warmStop := context.WithDeadline(ctx, start.Add(2500*time.Millisecond))
	defer warmStop()
	val := randomValue(16 << 10)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		quotaprobe.ProduceAt(warm, slow, "q", val, rate)
		quotaprobe.ProduceAt(ctx, slow, "q", val, 3*rate, held)
	}()
	go func() { defer wg.Done(); quotaprobe.ProduceAt(ctx, free, "free", val, rate/2, other) }()
	wg.Wait()

	got := wire.Rate()
	t.Logf("held to %.0f B/s of requests (quota %d B/s, %.3f of it; records %.3f); %d throttled responses; the other client sent %.0f B/s",
		got, rate, got/rate, held.Rate()/rate, slowHook.Throttled(), other.Rate())
	if got < 0.9*rate || got > 1.1*rate {
		t.Errorf("producer held to %.0f B/s; want %d ±10%%", got, rate)
	}
	if slowHook.Throttled() == 0 {
		t.Error("no produce response carried throttle_time_ms")
	}
	if n := freeHook.Throttled(); n != 0 {
		t.Errorf("the client with no quota saw %d throttled responses", n)
	}
	if o := other.Rate(); o < 0.8*rate/2 {
		t.Errorf("the client with no quota sent %.0f B/s of its %d", o, rate/2)
	}
	// Counted under the configured entity only: the other client's
	// bytes are under no label.
	if s := counter(t, m, metrics.NameQuotaThrottle, "kind", "produce", "entity", "clients/slow"); s <= 0 {
		t.Errorf("%s{kind=produce,entity=clients/slow} = %v; want > 0", metrics.NameQuotaThrottle, s)
	}
	b := counter(t, m, metrics.NameQuotaBytes, "kind", "produce", "entity", "clients/slow")
	if b < float64(held.Bytes()) {
		t.Errorf("%s{kind=produce,entity=clients/slow} = %v; want at least the %d bytes acknowledged in the window", metrics.NameQuotaBytes, b, held.Bytes())
	}
	fams, _ := m.Registry().Gather()
	for _, f := range fams {
		if f.GetName() == metrics.NameQuotaBytes && len(f.GetMetric()) != 1 {
			t.Errorf("%s has %d series; want the one configured entity", f.GetName(), len(f.GetMetric()))
		}
	}
}

// TestQuotaFetchHeldToRate: a consumer with far more to read than its
// consumer_byte_rate is held to it within 10% over 5s, after 2.5s at its
// quota and 0.5s as fast as it may; its throttled fetches come back
// empty, the records fetched again later, none lost; another client id
// reading the same records is never throttled.
func TestQuotaFetchHeldToRate(t *testing.T) { quotaTopologies(t, testQuotaFetchHeldToRate) }

func testQuotaFetchHeldToRate(t *testing.T, topo config.Topology) {
	const (
		rate  = 1 << 20
		size  = 8 << 10
		total = 14 << 20
	)
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "c"))
	seed, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchMaxBytes(10<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	val := randomValue(size)
	for range total / size {
		seed.Produce(context.Background(), &kgo.Record{Topic: "c", Value: val}, nil)
	}
	if err := seed.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed.Close()

	q := parseQuotas(t, "- client-id: slow\n  consumer_byte_rate: 1048576\n")
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = q }), proxy.WithQuotaWindow(quotaWindow))
	consumer := func(id string, h *quotaprobe.Hook) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ClientID(id), kgo.WithHooks(h),
			kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(16<<10), kgo.FetchMaxPartitionBytes(16<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	start := time.Now()
	held := quotaprobe.NewSpan(start.Add(3*time.Second), start.Add(8*time.Second))
	wire := quotaprobe.NewSpan(held.From, held.To)
	slowHook, freeHook := &quotaprobe.Hook{Key: quotaprobe.Fetch, Wire: wire}, &quotaprobe.Hook{}
	slow, free := consumer("slow", slowHook), consumer("free", freeHook)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(8*time.Second))
	defer cancel()
	var freeRead atomic.Int64
	go func() {
		for ctx.Err() == nil {
			free.PollFetches(ctx).EachRecord(func(r *kgo.Record) { freeRead.Add(int64(len(r.Value))) })
		}
	}()
	// The consumer reads at its quota first, for the reason the producer
	// of TestQuotaProduceHeldToRate does.
	warmTo := start.Add(2500 * time.Millisecond)
	var next, read int64 // the next offset expected: none lost, none twice
	for ctx.Err() == nil {
		fs := slow.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Errorf("record at offset %d; want %d", r.Offset, next)
			}
			next = r.Offset + 1
			read += int64(len(r.Value))
			held.Add(len(r.Value))
		})
		if due := start.Add(time.Duration(float64(read) / rate * float64(time.Second))); due.Before(warmTo) {
			time.Sleep(time.Until(due))
		}
	}
	got := wire.Rate()
	t.Logf("held to %.0f B/s of responses (quota %d B/s, %.3f of it; records %.3f); %d throttled responses; the other client read %d B",
		got, rate, got/rate, held.Rate()/rate, slowHook.Throttled(), freeRead.Load())
	if got < 0.9*rate || got > 1.1*rate {
		t.Errorf("consumer held to %.0f B/s; want %d ±10%%", got, rate)
	}
	if slowHook.Throttled() == 0 {
		t.Error("no fetch response carried throttle_time_ms")
	}
	if n := freeHook.Throttled(); n != 0 {
		t.Errorf("the client with no quota saw %d throttled responses", n)
	}
	if r := freeRead.Load(); r != total {
		t.Errorf("the client with no quota read %d of %d bytes", r, total)
	}
}

// apiVersionsVia sends an ApiVersions request on nc and reads the answer.
func apiVersionsVia(nc net.Conn) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(nc, make([]byte, binary.BigEndian.Uint32(size[:])))
	return err
}

// TestQuotaConnectionsPerIP: with --max-connections-per-ip 2 the third
// connection from the address is closed at once, with a log line, and
// one more is served once one of the two closes.
func TestQuotaConnectionsPerIP(t *testing.T) { quotaTopologies(t, testQuotaConnectionsPerIP) }

func testQuotaConnectionsPerIP(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.MaxConnectionsPerIP = 2 }))
	var open []net.Conn
	for i := range 2 {
		nc := dialProxy(t, p.Addr())
		if err := apiVersionsVia(nc); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		open = append(open, nc)
	}
	third := dialProxy(t, p.Addr())
	if err := apiVersionsVia(third); err == nil {
		t.Fatal("the third connection from one address was served")
	}
	p.log.waitFor(t, "too many connections from this address")
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc := dialProxy(t, p.Addr())
		err := apiVersionsVia(nc)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one of two closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuotaReloadAppliesToOpenConnections: a producer_byte_rate added by
// a reload throttles a client on the connection it already had open.
func TestQuotaReloadAppliesToOpenConnections(t *testing.T) {
	quotaTopologies(t, testQuotaReloadAppliesToOpenConnections)
}

func testQuotaReloadAppliesToOpenConnections(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "q"))
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, nil), proxy.WithQuotaWindow(quotaWindow))
	var h quotaprobe.Hook
	var dials atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ClientID("slow"), kgo.WithHooks(&h),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	val := randomValue(16 << 10)
	produce := func(n int) {
		for range n {
			cl.Produce(context.Background(), &kgo.Record{Topic: "q", Value: val}, nil)
		}
		if err := cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	produce(64)
	if n := h.Throttled(); n != 0 {
		t.Fatalf("%d throttled responses with no quota", n)
	}
	before := dials.Load()

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = kc.ListenAddrs()
	cfg.UpstreamOrdering = config.OrderingConnection
	cfg.DialTimeout = 5 * time.Second
	cfg.Topology = topo
	cfg.Quotas = parseQuotas(t, "- client-id: slow\n  producer_byte_rate: 262144\n")
	if err := p.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	produce(64)
	if h.Throttled() == 0 {
		t.Error("no throttled response after the quota was reloaded")
	}
	if d := dials.Load(); d != before {
		t.Errorf("the client dialed %d more times; the quota must apply to its open connections", d-before)
	}
	if !strings.Contains(strings.Join(proxy.ReloadableSettings, " "), config.KeyQuotas) {
		t.Error("quotas not among the reloadable settings")
	}
}

// quotaRoundTrip sends req as client id "slow" on nc and returns the body of
// its response, read at req's version.
func quotaRoundTrip(t *testing.T, nc net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	return roundTripAs(t, nc, "slow", req, corr)
}

// roundTripAs sends req as client id id on nc and returns its response,
// read at req's version.
func roundTripAs(t *testing.T, nc net.Conn, id string, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID(id)).AppendRequest(nil, req, corr)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, frame); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // the response header's empty tag section
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// sessionlessFetch is a Fetch outside any fetch session of partition 0
// of topic from offset 0.
func sessionlessFetch(topic string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 64 << 10
	req.SessionEpoch = -1
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = 64 << 10
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	return req
}

// TestQuotaThrottledFetchAnsweredByProxy: a sessionless Fetch from a
// client already over its consumer_byte_rate (here, after a reload
// lowered it below what it had fetched) is answered by the proxy at
// once, empty, with throttle_time_ms set and no session, without reaching
// the broker; then the connection is not read for the throttle time.
func TestQuotaThrottledFetchAnsweredByProxy(t *testing.T) {
	quotaTopologies(t, testQuotaThrottledFetchAnsweredByProxy)
}

func testQuotaThrottledFetchAnsweredByProxy(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "c"))
	seed, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	for range 16 {
		seed.Produce(context.Background(), &kgo.Record{Topic: "c", Value: randomValue(8 << 10)}, nil)
	}
	if err := seed.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed.Close()
	var fetches atomic.Int64
	kc.ControlKey(1, func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = kc.ListenAddrs()
	cfg.UpstreamOrdering = config.OrderingConnection
	cfg.DialTimeout = 5 * time.Second
	cfg.Topology = topo
	cfg.Quotas = parseQuotas(t, "- client-id: slow\n  consumer_byte_rate: 1048576\n")
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = cfg.Quotas }), proxy.WithQuotaWindow(quotaWindow), proxy.WithMetrics(m))
	nc := dialProxy(t, p.Addr())

	first := quotaRoundTrip(t, nc, sessionlessFetch("c"), 1).(*kmsg.FetchResponse)
	if first.ThrottleMillis != 0 || len(first.Topics) != 1 || len(first.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("the first fetch: throttle %dms, %d topics; want records and no throttle", first.ThrottleMillis, len(first.Topics))
	}
	before := fetches.Load()

	// Lowered to a third of what the first fetch got, which over the
	// window of 10 samples of 200ms is half of it a second (a throttle of
	// 1s), however the seed's records were batched (a fetch stops at a
	// batch past its max_bytes).
	got := 0
	for _, tp := range first.Topics[0].Partitions {
		got += len(tp.RecordBatches)
	}
	cfg.Quotas = parseQuotas(t, fmt.Sprintf("- client-id: slow\n  consumer_byte_rate: %d\n", max(got/3, 1)))
	if err := p.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	second := quotaRoundTrip(t, nc, sessionlessFetch("c"), 2).(*kmsg.FetchResponse)
	if second.ThrottleMillis <= 0 || len(second.Topics) != 0 || second.SessionID != 0 || second.ErrorCode != 0 {
		t.Fatalf("the throttled fetch: throttle %dms, %d topics, session %d, error %d; want a throttle, no topics, no session, no error",
			second.ThrottleMillis, len(second.Topics), second.SessionID, second.ErrorCode)
	}
	if n := fetches.Load() - before; n != 0 {
		t.Errorf("the throttled fetch reached the broker (%d fetches)", n)
	}
	if s := counter(t, m, metrics.NameQuotaThrottle, "kind", "fetch", "entity", "clients/slow"); s < float64(second.ThrottleMillis-1)/1000 {
		t.Errorf("%s{kind=fetch,entity=clients/slow} = %v; want the %dms handed out", metrics.NameQuotaThrottle, s, second.ThrottleMillis)
	}
	// The mute: the next request is read only once the throttle has
	// passed. As a broker does, the proxy counts it from when it
	// throttles, before the answer is written, which a loaded machine
	// can delay by hundreds of milliseconds: it is measured here from
	// before the throttled fetch was sent, which comes before that (a
	// millisecond of slack for the rounding to milliseconds).
	throttle := time.Duration(second.ThrottleMillis) * time.Millisecond
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	quotaRoundTrip(t, nc, req, 3)
	if took := time.Since(asked); took < throttle-time.Millisecond {
		t.Errorf("the next request was answered %v after the throttled fetch was sent; want at least its %v throttle", took, throttle)
	}
	t.Logf("throttled for %v; the next request answered %v after the throttled fetch was sent", throttle, time.Since(asked))
}

// TestQuotaConnectionsPerUser: with max_connections 1 for alice, her
// second connection is closed once it authenticates, its answer given
// first; another user is not affected, and alice may connect again once
// her first connection closes.
func TestQuotaConnectionsPerUser(t *testing.T) { quotaTopologies(t, testQuotaConnectionsPerUser) }

func testQuotaConnectionsPerUser(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1))
	m := metrics.New()
	q := parseQuotas(t, "- user: alice\n  max_connections: 1\n")
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = q }),
		proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, 0, true)))
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()
	apiVersions := func(c *authClient) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
		c.do(req)
	}
	first := dialAuth(t, p.Addr())
	first.scramLogin(alice)
	apiVersions(first)

	second := dialAuth(t, p.Addr())
	second.scramLogin(alice)
	second.waitClosed()
	p.log.waitFor(t, "too many connections for this user")

	for user, pw := range authUsers {
		if user == "alice" {
			continue
		}
		other := dialAuth(t, p.Addr())
		other.scramLogin(scram.Auth{User: user, Pass: pw}.AsSha256Mechanism())
		apiVersions(other)
		break
	}

	first.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again := dialAuth(t, p.Addr())
		again.scramLogin(alice)
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
		again.send(req)
		if _, err := readRaw(again.nc); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice could not connect again after her first connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuotaConnectionCreationRate: connections from an address over its
// connection_creation_rate are held unserved and closed once their
// throttle (at most one sample's span) has passed.
func TestQuotaConnectionCreationRate(t *testing.T) {
	quotaTopologies(t, testQuotaConnectionCreationRate)
}

func testQuotaConnectionCreationRate(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1))
	q := parseQuotas(t, "- ip: 127.0.0.1\n  connection_creation_rate: 2\n")
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = q }), proxy.WithQuotaWindow(quotaWindow))
	var served, refused int
	for range 10 {
		nc := dialProxy(t, p.Addr())
		start := time.Now()
		if err := apiVersionsVia(nc); err != nil {
			refused++
			if took := time.Since(start); took > quotaWindow.Size+time.Second {
				t.Errorf("a connection over the rate was closed after %v; want within one sample's span", took)
			}
		} else {
			served++
		}
		nc.Close()
	}
	// 2 a second over a window of 2s lets about 4 connections through
	// at once.
	if served == 0 || refused == 0 {
		t.Fatalf("%d served, %d refused; want some of each", served, refused)
	}
	p.log.waitFor(t, "connection_creation_rate exceeded")
	t.Logf("%d served, %d refused", served, refused)
}

// TestQuotaFetchMaxBytesLowered: a Fetch asking for more than its
// client's consumer_byte_rate allows over the window reaches the broker
// with max_bytes lowered to that (Kafka's getMaxValueInQuotaWindow); one
// with no quota goes as the client sent it.
func TestQuotaFetchMaxBytesLowered(t *testing.T) { quotaTopologies(t, testQuotaFetchMaxBytesLowered) }

func testQuotaFetchMaxBytesLowered(t *testing.T, topo config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "c"))
	var mu sync.Mutex
	var seen []int32
	kc.ControlKey(1, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		seen = append(seen, req.(*kmsg.FetchRequest).MaxBytes)
		mu.Unlock()
		return nil, nil, false
	})
	q := parseQuotas(t, "- client-id: slow\n  consumer_byte_rate: 10240\n")
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), inTopology(topo, func(c *config.Config) { c.Quotas = q }), proxy.WithQuotaWindow(quotaWindow))
	nc := dialProxy(t, p.Addr())
	quotaRoundTrip(t, nc, sessionlessFetch("c"), 1)
	other := dialProxy(t, p.Addr())
	req := sessionlessFetch("c")
	other.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := other.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("free")).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := readRaw(other); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// 10240 B/s over 10 samples of 200ms.
	want := []int32{20480, 64 << 10}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("the broker saw max_bytes %v; want %v", seen, want)
	}
}
