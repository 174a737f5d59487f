package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// The names of the SNI tests; the proxy's certificate is a wildcard for
// *.kafka.test.
const (
	sniBootstrap = "bootstrap.kafka.test"
	sniPattern   = "broker-{id}.kafka.test"
)

func sniNodeName(id int32) string {
	return strings.Replace(sniPattern, "{id}", strconv.Itoa(int(id)), 1)
}

// sniProxy is a proxy in the sni topology, and what its clients need.
type sniProxy struct {
	*testProxy
	pki  *pki
	port string // the one port
	// sniff checks every response a client of dialer reads.
	sniff *addressSniffer
	// resumed counts the dialer's handshakes that resumed a session.
	resumed atomic.Int64
	mu      sync.Mutex
	dials   map[string]int // the dialer's connections by server name
}

// startSNIProxy runs a proxy in the sni topology on one loopback port in
// front of upstreams.
func startSNIProxy(t *testing.T, mode config.Ordering, upstreams []string, mut func(*config.Config, *pki), opts ...proxy.Option) *sniProxy {
	t.Helper()
	k := newPKI(t)
	cert, key := k.files(t, "proxy", "*.kafka.test")
	p := startProxy(t, mode, upstreams, func(c *config.Config) {
		c.Topology = config.TopologySNI
		c.SNIBootstrap, c.SNINodePattern = sniBootstrap, sniPattern
		c.TLSCert, c.TLSKey = cert, key
		if mut != nil {
			mut(c, k)
		}
	}, opts...)
	host, port, err := net.SplitHostPort(p.Addr())
	if err != nil || host != sniBootstrap {
		t.Fatalf("the proxy's address is %s, want %s and its port", p.Addr(), sniBootstrap)
	}
	return &sniProxy{testProxy: p, pki: k, port: port, sniff: &addressSniffer{port: port}, dials: map[string]int{}}
}

// dialer resolves every name the proxy hands out to the loopback address,
// as DNS resolves them to a load balancer, and speaks TLS with the name as
// the server name. It refuses any address that is not a *.kafka.test name
// on the proxy's one port, so a client can never go around the proxy.
// Every connection's responses pass the sniffer.
func (s *sniProxy) dialer(t *testing.T) kgo.Opt {
	var d net.Dialer
	base := s.pki.tlsConfig(t, "")
	// Sessions are resumed across names, as the Java client does: a
	// resumed handshake must be routed by its name like a full one.
	base.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		name, port, err := net.SplitHostPort(host)
		if err != nil || port != s.port || !strings.HasSuffix(name, ".kafka.test") {
			s.sniff.fail(fmt.Errorf("the client was sent to %s, which is not one of the proxy's names on port %s", host, s.port))
			return nil, fmt.Errorf("refusing to dial %s", host)
		}
		raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			return nil, err
		}
		cfg := base.Clone()
		cfg.ServerName = name
		tc := tls.Client(raw, cfg)
		// The handshake is not cut short when the client gives up on
		// the dial: one cut after its last flight reaches the proxy
		// counts there as a connection but not here.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		if tc.ConnectionState().DidResume {
			s.resumed.Add(1)
		}
		s.mu.Lock()
		s.dials[name]++
		s.mu.Unlock()
		return s.sniff.wrap(tc), nil
	})
}

// addressSniffer reads the responses on client connections and checks
// every broker address in them: each must be the name of its own node id
// on the proxy's one port, and no response may carry a loopback address
// (the upstream's, here) anywhere.
type addressSniffer struct {
	port string

	mu        sync.Mutex
	err       error
	checked   int // responses with addresses decoded
	endpoints int // endpoints checked
}

func (s *addressSniffer) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// result returns the first problem seen, and how many responses and
// endpoints were checked.
func (s *addressSniffer) result() (err error, checked, endpoints int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err, s.checked, s.endpoints
}

func (s *addressSniffer) wrap(nc net.Conn) net.Conn {
	return &sniffedConn{Conn: nc, s: s, sent: map[int32][2]int16{}}
}

// sniffedConn follows one connection's frames: requests it writes, to know
// each response's key and version, and responses it reads.
type sniffedConn struct {
	net.Conn
	s        *addressSniffer
	mu       sync.Mutex
	sent     map[int32][2]int16 // correlation id to key and version
	out, in  []byte
	brokenIn bool
}

func (c *sniffedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	for len(c.out) >= 4 {
		n := int(binary.BigEndian.Uint32(c.out))
		if len(c.out) < 4+n {
			break
		}
		if h, err := wire.ParseRequestHeader(c.out[:4+n]); err == nil {
			c.sent[h.Correlation] = [2]int16{h.Key, h.Version}
		}
		c.out = c.out[4+n:]
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *sniffedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, b[:n]...)
	for !c.brokenIn && len(c.in) >= 8 {
		size := int(binary.BigEndian.Uint32(c.in))
		if len(c.in) < 4+size {
			break
		}
		frame := c.in[4 : 4+size]
		c.in = c.in[4+size:]
		if err := c.check(frame); err != nil {
			c.brokenIn = true
			c.s.fail(err)
		}
	}
	return n, err
}

// check checks one response frame (correlation id first).
func (c *sniffedConn) check(frame []byte) error {
	if bytes.Contains(frame, []byte("127.0.0.1")) {
		return fmt.Errorf("a response carries a loopback address, the upstream's: %q", frame)
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	kv, ok := c.sent[corr]
	if !ok {
		return fmt.Errorf("a response with correlation id %d, which no request had", corr)
	}
	delete(c.sent, corr)
	key, version := kv[0], kv[1]
	switch key {
	case 0, 1, 3, 10, 32, 60:
	default:
		return nil
	}
	body := frame[4:]
	if wire.Flexible(key, version) {
		body = body[1:]
	}
	eps, _, _, err := readAddressed(key, version, body)
	if err != nil {
		return fmt.Errorf("%s v%d response does not decode: %v", kmsg.NameForKey(key), version, err)
	}
	for _, e := range eps {
		if e.id < 0 && e.port == -1 {
			continue // no node: an error answer
		}
		if want := sniNodeName(e.id); e.host != want || strconv.Itoa(int(e.port)) != c.s.port {
			return fmt.Errorf("%s v%d names node %d at %s:%d, want %s:%s", kmsg.NameForKey(key), version, e.id, e.host, e.port, want, c.s.port)
		}
	}
	c.s.mu.Lock()
	c.s.checked++
	c.s.endpoints += len(eps)
	c.s.mu.Unlock()
	return nil
}

// TestSNIEndToEnd runs franz-go clients through one TLS port in front of
// a three-broker kfake, in both ordering modes: Metadata names every
// broker by its name on that port; an idempotent producer, a consumer
// group (with commits and a resume from them) and a transaction read back
// read_committed all go through; each broker's configs name its listeners
// by its name and redact its quorum; no response names an address other than
// a node's own name on the one port; and the per-name metrics count the
// routes taken.
func TestSNIEndToEnd(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSNIEndToEnd(t, mode) })
	}
}

func testSNIEndToEnd(t *testing.T, mode config.Ordering) {
	const (
		topic      = "orders"
		partitions = 6
		perPart    = 200
	)
	kc := newCluster(t, kfake.SeedTopics(partitions, topic), kfake.SeedTopics(3, "txn"))
	answerBrokerConfigs(kc)
	m := metrics.New()
	s := startSNIProxy(t, mode, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	ctx := testContext(t, 90*time.Second)
	opts := []kgo.Opt{kgo.SeedBrokers(s.Addr()), s.dialer(t)}

	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Fatalf("metadata names %d brokers, want 3", len(md.Brokers))
	}
	for _, b := range md.Brokers {
		if b.Host != sniNodeName(b.NodeID) || strconv.Itoa(int(b.Port)) != s.port {
			t.Fatalf("metadata names node %d at %s:%d, want %s:%s", b.NodeID, b.Host, b.Port, sniNodeName(b.NodeID), s.port)
		}
	}
	for _, kind := range []string{"node", "controller"} {
		if n, ok := findCounter(t, m, metrics.NameListenersOpen, "kind", kind); !ok || n != 0 {
			t.Fatalf("%s{kind=%s} = %v (exported: %v) in the sni topology, want 0", metrics.NameListenersOpen, kind, n, ok)
		}
	}

	produceInOrder(t, ctx, topic, partitions, perPart, 0, opts...)
	group := "g-" + string(mode)
	seen := consumeGroupWith(t, ctx, topic, group, partitions*perPart, opts...)
	for part := int32(0); part < partitions; part++ {
		if len(seen[part]) != perPart {
			t.Fatalf("group read %d records of partition %d, want %d", len(seen[part]), part, perPart)
		}
	}
	// One more record: the group resumes from its commit with it alone.
	one, err := kgo.NewClient(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	after := consumeGroupWith(t, ctx, topic, group, 1, opts...)
	if got := after[0]; len(got) != 1 || got[0] != "after" {
		t.Fatalf("the group resumed with %v, want the one record after its commit", after)
	}
	transact(t, ctx, "txn", "t-"+string(mode), opts...)

	// Each broker's configs, asked of that broker by its name: its
	// listeners name it on the one port, its quorum is redacted.
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 0, 1, 2)
	if err != nil || len(rcs) != 3 {
		t.Fatalf("broker configs %v: %v", rcs, err)
	}
	for _, rc := range rcs {
		id, _ := strconv.Atoi(rc.Name)
		var configs []kmsg.DescribeConfigsResponseResourceConfig
		for _, c := range rc.Configs {
			configs = append(configs, kmsg.DescribeConfigsResponseResourceConfig{Name: c.Key, Value: c.Value})
		}
		checkBrokerConfigs(t, int32(id), configs, net.JoinHostPort(sniNodeName(int32(id)), s.port))
	}

	err, checked, endpoints := s.sniff.result()
	if err != nil {
		t.Fatal(err)
	}
	if s.resumed.Load() == 0 {
		t.Error("no connection resumed a TLS session: resumed handshakes went untested")
	}
	if checked < 10 || endpoints < 6 {
		t.Fatalf("the sniffer checked %d responses and %d endpoints: too few to prove anything", checked, endpoints)
	}
	// Every connection was routed by the name it asked for, resumed or
	// not: the per-route counts are the dialer's, name by name.
	s.mu.Lock()
	dials := maps.Clone(s.dials)
	s.mu.Unlock()
	if n := counter(t, m, metrics.NameSNIConnections, "role", "bootstrap", "node_id", ""); n != float64(dials[sniBootstrap]) || n < 1 {
		t.Errorf("bootstrap connections counted %v, the client made %d", n, dials[sniBootstrap])
	}
	var nodeConns float64
	for id := int32(0); id < 3; id++ {
		n := counter(t, m, metrics.NameSNIConnections, "role", "node", "node_id", strconv.Itoa(int(id)))
		nodeConns += n
		if want := dials[sniNodeName(id)]; n != float64(want) || want == 0 {
			t.Errorf("node %d: %v connections counted, the client made %d", id, n, want)
		}
		if b := counter(t, m, metrics.NameSNIBytes, "role", "node", "node_id", strconv.Itoa(int(id)), "direction", "sent"); b < 100 {
			t.Errorf("node %d: %v bytes sent for %v connections", id, b, n)
		}
	}
	if n := counter(t, m, metrics.NameSNIConnections, "role", "other"); n != 0 {
		t.Errorf("%v connections counted under no route", n)
	}
	if n := counter(t, m, metrics.NameConnectionsAccepted, "listener", "sni"); n < nodeConns {
		t.Errorf("%s{listener=sni} = %v, below the %v node connections", metrics.NameConnectionsAccepted, n, nodeConns)
	}
}

// consumeGroupWith reads want records in a consumer group from the start,
// commits them, and returns the values per partition in offset order.
func consumeGroupWith(t *testing.T, ctx context.Context, topic, group string, want int, opts ...kgo.Opt) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int32][]string{}
	for n := 0; n < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("group %s read %d of %d records: %v", group, n, want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("group %s: fetch: %v", group, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Partition] = append(seen[r.Partition], string(r.Value))
			n++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: commit: %v", group, err)
	}
	return seen
}

// transact aborts one transaction and commits another over every
// partition of topic, and reads the topic read_committed: only the
// committed records, in order.
func transact(t *testing.T, ctx context.Context, topic, txnID string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "%v-%d", bool(commit), i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transactional produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := map[int32]int{}
	for got := 0; got < 10; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of the 10 committed records: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("read committed: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("true-%d", int(r.Partition)+3*next[r.Partition])
			if string(r.Value) != want {
				t.Fatalf("partition %d: read %q, want %q (an aborted record, or out of order)", r.Partition, r.Value, want)
			}
			next[r.Partition]++
			got++
		})
	}
}

// namedUpstream is a fake upstream that answers ApiVersions and Metadata,
// naming nodes 0 and 1 at its own address and node 2 at another host, and
// counts the connections it accepts.
func namedUpstream(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	host, portS, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portS)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go serveNamed(c, host, int32(port))
		}
	}()
	return ln.Addr().String(), accepted
}

func serveNamed(c net.Conn, host string, port int32) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var lb [4]byte
	for {
		buf, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
		if err != nil {
			return
		}
		h, err := wire.ParseRequestHeader(buf.B)
		if err != nil {
			return
		}
		var resp kmsg.Response
		switch h.Key {
		case 18:
			r := kmsg.NewPtrApiVersionsResponse()
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 3}, {ApiKey: 3, MaxVersion: 12}}
			resp = r
		case 3:
			r := kmsg.NewPtrMetadataResponse()
			r.Brokers = []kmsg.MetadataResponseBroker{
				{NodeID: 0, Host: host, Port: port}, {NodeID: 1, Host: host, Port: port},
				{NodeID: 2, Host: "kafka-2.elsewhere.test", Port: 9092},
			}
			resp = r
		default:
			return
		}
		resp.SetVersion(h.Version)
		if h.Key == 18 {
			resp.SetVersion(min(h.Version, 3))
		}
		out := wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// TestSNIRefusesUnknownNames: a ClientHello without a server name, with a
// name that is no name of the proxy's, with a broker's name for a node the
// upstream never advertised (or with a leading zero), or for a node it
// advertised outside allow-upstream, is refused with the unrecognized_name
// alert, logged with the name (once per reason within the rate limit) and
// counted by reason, and nothing is dialled for it; a served name then
// dials the node.
func TestSNIRefusesUnknownNames(t *testing.T) {
	up, accepted := namedUpstream(t)
	m := metrics.New()
	s := startSNIProxy(t, config.OrderingNone, []string{up}, func(c *config.Config, _ *pki) {
		c.AllowUpstream = []string{"127.0.0.1"}
	}, proxy.WithMetrics(m))
	if err := s.Discover(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	before := accepted.Load()
	if before == 0 {
		t.Fatal("the discovery dialled nothing: the accept count proves nothing")
	}
	for _, tc := range []struct {
		name, reason string
		times        int
	}{
		{"", "no_name", 1},
		{"kafka.example.com", "unknown_name", 2},
		{"broker-07.kafka.test", "unknown_name", 1},
		{"broker-7.kafka.test", "unknown_node", 2},
		{"broker-2.kafka.test", "not_allowed", 1},
	} {
		for range tc.times {
			alert, err := s.handshakeAlert(t, tc.name)
			if err == nil || alert != 112 {
				t.Fatalf("server name %q: handshake error %v, alert %d; want the unrecognized_name alert (112)", tc.name, err, alert)
			}
		}
		if n := counter(t, m, metrics.NameSNIRefusals, "reason", tc.reason); n < float64(tc.times) {
			t.Errorf("%s{reason=%s} = %v after %d refusals of %q", metrics.NameSNIRefusals, tc.reason, n, tc.times, tc.name)
		}
	}
	for _, want := range []string{`server_name=kafka.example.com reason=unknown_name`, `server_name=broker-7.kafka.test reason=unknown_node`,
		`server_name=broker-2.kafka.test reason=not_allowed`, `server_name="" reason=no_name`} {
		s.log.waitFor(t, want)
	}
	if n := strings.Count(s.log.String(), "reason=unknown_node"); n != 1 {
		t.Errorf("two refusals of one reason within the rate limit logged %d lines, want 1", n)
	}
	if got := accepted.Load(); got != before {
		t.Fatalf("the upstream accepted %d connections for refused names", got-before)
	}
	if n := counter(t, m, metrics.NameSNIRefusals, "reason", "unknown_node"); n != 2 {
		t.Errorf("%s{reason=unknown_node} = %v, want 2", metrics.NameSNIRefusals, n)
	}

	// The names it serves still work, and dial what they name.
	if alert, err := s.handshakeAlert(t, "Broker-1.Kafka.Test"); err != nil {
		t.Fatalf("broker-1, in capitals: alert %d, %v", alert, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for accepted.Load() == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if accepted.Load() != before+1 {
		t.Fatalf("a served name made the upstream accept %d connections, want 1", accepted.Load()-before)
	}
}

// handshakeAlert runs a TLS handshake on the proxy's one port with name
// as the server name (none when empty), then sends an ApiVersions request
// and reads its answer. It returns the TLS alert the proxy sent first, if
// any, and the error the client saw.
func (s *sniProxy) handshakeAlert(t *testing.T, name string) (alert int, err error) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", s.port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordReader{Conn: raw}
	cfg := s.pki.tlsConfig(t, "")
	cfg.ServerName = name
	if name == "" {
		cfg.InsecureSkipVerify = true // a client with no name cannot verify one
	}
	tc := tls.Client(rec, cfg)
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err = tc.Handshake(); err == nil {
		tc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		_, err = tc.Read(make([]byte, 4))
	}
	return rec.firstAlert(), err
}

// recordReader keeps the first bytes the server sends, to read an alert
// sent before encryption starts.
type recordReader struct {
	net.Conn
	head []byte
}

func (r *recordReader) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if len(r.head) < 16 {
		r.head = append(r.head, b[:min(n, 16-len(r.head))]...)
	}
	return n, err
}

// firstAlert returns the description of a fatal alert in the first
// record, or 0: a TLS record of type 21 (alert) whose body is level 2
// (fatal) and the description.
func (r *recordReader) firstAlert() int {
	if len(r.head) >= 7 && r.head[0] == 21 && r.head[5] == 2 {
		return int(r.head[6])
	}
	return 0
}

// TestSNIClientCertificatesAndReload: on the one port, mutual TLS applies
// as on every listener (a client without a certificate is refused, one
// with a certificate is served by name), and a reloaded certificate is
// served to the next handshake.
func TestSNIClientCertificatesAndReload(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	var cert string
	s := startSNIProxy(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config, k *pki) {
		c.TLSClientCA = k.caFile
		cert = c.TLSCert
	})
	ctx := testContext(t, 30*time.Second)
	if _, err := s.handshakeAlert(t, sniBootstrap); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	withCert := func(cfg *tls.Config) kgo.Opt {
		var d net.Dialer
		return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			name, port, _ := net.SplitHostPort(host)
			raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			if err != nil {
				return nil, err
			}
			c := cfg.Clone()
			c.ServerName = name
			return tls.Client(raw, c), nil
		})
	}
	client := s.pki.tlsConfig(t, "client")
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), withCert(client))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("a client with a certificate, through a broker's name: %v", err)
	}

	served := func() string {
		cfg := client.Clone()
		cfg.ServerName = sniNodeName(0)
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", s.port), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := served(); cn != "proxy" {
		t.Fatalf("serving %q", cn)
	}
	next, err := s.pki.ca.Issue("renewed", "*.kafka.test")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSuffix(cert, ".crt") + ".key"
	os.WriteFile(key, next.KeyPEM, 0o600)
	os.WriteFile(cert, next.CertPEM, 0o600)
	if err := s.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "renewed" {
		t.Fatalf("after a reload serving %q", cn)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
}

// TestApacheKafkaSNI runs franz-go through the sni topology in front of
// Apache Kafka (testenv/kafka, INORDER_KAFKA_BOOTSTRAP), in both ordering
// modes: an idempotent producer, a consumer group and a transaction go
// through the one port, and no response names an address other than a
// broker's name on it.
func TestApacheKafkaSNI(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			s := startSNIProxy(t, mode, strings.Split(boot, ","), nil)
			ctx := testContext(t, 120*time.Second)
			opts := []kgo.Opt{kgo.SeedBrokers(s.Addr()), s.dialer(t)}
			suffix := fmt.Sprintf("%s-%d", mode, time.Now().UnixNano())
			topic, txn := "sni-"+suffix, "sni-txn-"+suffix
			createTopic(t, ctx, topic, opts...)
			createTopic(t, ctx, txn, opts...)
			produceInOrder(t, ctx, topic, 3, 200, 0, opts...)
			if seen := consumeGroupWith(t, ctx, topic, "g-"+suffix, 600, opts...); len(seen) != 3 {
				t.Fatalf("the group read %d partitions, want 3", len(seen))
			}
			transact(t, ctx, txn, "t-"+suffix, opts...)
			err, checked, endpoints := s.sniff.result()
			if err != nil {
				t.Fatal(err)
			}
			if checked < 5 || endpoints < 3 {
				t.Fatalf("the sniffer checked %d responses and %d endpoints: too few to prove anything", checked, endpoints)
			}
		})
	}
}
