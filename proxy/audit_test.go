package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// auditEvent is the part of an audit event the tests read.
type auditEvent struct {
	Type       string `json:"type"`
	Principal  string `json:"principal"`
	APIKey     string `json:"api_key"`
	Decision   string `json:"decision"`
	ErrorCode  int16  `json:"error_code"`
	Mechanism  string `json:"mechanism"`
	Reason     string `json:"reason"`
	ClientID   string `json:"client_id"`
	Connection uint64 `json:"connection"`
	Listener   string `json:"listener"`
	APIVersion int16  `json:"api_version"`
	Resources  []struct {
		Type       string           `json:"resource_type"`
		Name       string           `json:"resource_name"`
		ErrorCode  int16            `json:"error_code"`
		Requests   int64            `json:"requests"`
		APIKey     string           `json:"api_key"`
		Partitions []auditPartition `json:"partitions"`
	} `json:"resources"`
	Claimed       *string `json:"claimed_principal"`
	ClientAddress string  `json:"client_address"`
	TLSSubject    string  `json:"tls_subject"`
}

// auditPartition is the part of an event's partition the tests read.
type auditPartition struct {
	Partition int32  `json:"partition"`
	ErrorCode int16  `json:"error_code"`
	First     *int64 `json:"first_offset"`
	Last      *int64 `json:"last_offset"`
	Records   int64  `json:"records"`
	Bytes     int64  `json:"bytes"`
	Committed *int64 `json:"committed_offset"`
	Fetch     *int64 `json:"fetch_offset"`
}

func readAuditFile(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		out = append(out, e)
	}
	return out
}

// auditedProxy runs a proxy authenticating its clients and recording an
// audit trail into a file, as serve builds it; stop drains the proxy and
// then the trail, and returns the file's events.
func auditedProxy(t *testing.T, kc *kfake.Cluster, mode config.Ordering, topology config.Topology, dataPath string) (p *testProxy, stop func() []auditEvent) {
	t.Helper()
	m := metrics.New()
	return auditTrailProxy(t, kc, mode, dataPath, func(c *config.Config) { c.Topology = topology },
		proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, 0, true)))
}

// auditTrailProxy runs a proxy in mode recording its audit trail, with
// dataPath, into a file, configured further by mut (if not nil) and opts;
// stop drains the proxy and then the trail, and returns the file's events.
func auditTrailProxy(t *testing.T, kc *kfake.Cluster, mode config.Ordering, dataPath string, mut func(*config.Config), opts ...proxy.Option) (p *testProxy, stop func() []auditEvent) {
	t.Helper()
	return auditTrailProxyAt(t, kc.ListenAddrs(), mode, dataPath, mut, opts...)
}

// auditTrailProxyAt is auditTrailProxy in front of upstreams.
func auditTrailProxyAt(t *testing.T, upstreams []string, mode config.Ordering, dataPath string, mut func(*config.Config), opts ...proxy.Option) (p *testProxy, stop func() []auditEvent) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.log")
	cfg := config.Default()
	cfg.AuditFile = file
	cfg.AuditDataPath = dataPath
	b := budget.New(cfg.Memory())
	trail, err := audit.FromConfig(&cfg, audit.NewSource("test"), b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p = startProxy(t, mode, upstreams, func(c *config.Config) {
		c.AuditFile, c.AuditDataPath = file, dataPath
		if mut != nil {
			mut(c)
		}
	}, append(opts, proxy.WithBudget(b), proxy.WithRecorder(trail))...)
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { trail.Shutdown(context.Background()) })
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log.String())
		}
	})
	return p, func() []auditEvent {
		ctx := testContext(t, 10*time.Second)
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		once.Do(func() { err = trail.Shutdown(ctx) })
		if err != nil {
			t.Fatalf("trail shutdown: %v", err)
		}
		return readAuditFile(t, file)
	}
}

// TestAuditSession: a scripted session through the proxy (a refused
// login, produces, a fetch, a commit, a topic created) is in the audit
// file event for event, with principals, error codes and, per request,
// the offsets the broker gave.
func TestAuditSession(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     config.Ordering
		topology config.Topology
	}{
		{"none", config.OrderingNone, config.TopologyPorts},
		{"connection", config.OrderingConnection, config.TopologyPorts},
	} {
		t.Run(tc.name, func(t *testing.T) { testAuditSession(t, tc.mode, tc.topology) })
	}
}

// TestAuditSessionSingle is TestAuditSession in the single topology, whose
// responses reach the client reader's recording through a hand-off.
func TestAuditSessionSingle(t *testing.T) {
	testAuditSession(t, config.OrderingNone, config.TopologySingle)
}

func testAuditSession(t *testing.T, mode config.Ordering, topology config.Topology) {
	const topic, produced = "orders", 3
	kc := newCluster(t, kfake.SeedTopics(1, topic))
	p, stop := auditedProxy(t, kc, mode, topology, config.AuditDataPathRequest)
	ctx := testContext(t, 30*time.Second)

	bad, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "bob", Pass: "guess"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Ping(ctx); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	bad.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ClientID("audited"), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range produced {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < produced; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	// Recent versions name topics by id; the events name them by the
	// name the Metadata answers the client read through the proxy taught.
	topicID := topicIDOf(ctx, t, cl, topic)
	named := func(name string) bool { return name == topic }
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = topic, topicID
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, produced
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	commitErr := cresp.Topics[0].Partitions[0].ErrorCode
	create := kmsg.NewPtrCreateTopicsRequest()
	nt := kmsg.NewCreateTopicsRequestTopic()
	nt.Topic, nt.NumPartitions, nt.ReplicationFactor = "fresh", 1, 1
	create.Topics = append(create.Topics, nt)
	create.TimeoutMillis = 5000
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	events := stop()

	var denied, allowed, produces, fetches, commits, creates int
	var offsets []int64
	for _, e := range events {
		if strings.Contains(e.Reason, "guess") || strings.Contains(e.Reason, "secret") {
			t.Errorf("a password in an event: %+v", e)
		}
		switch {
		case e.Type == "io.inorder.audit.authentication" && e.Decision == "deny":
			denied++
			if e.Mechanism != "SCRAM-SHA-256" || e.ErrorCode != kerr.SaslAuthenticationFailed.Code || e.Reason == "" ||
				e.Principal != "User:ANONYMOUS" || e.Claimed == nil || *e.Claimed != "User:bob" {
				t.Errorf("refused login: %+v", e)
			}
		case e.Type == "io.inorder.audit.authentication":
			allowed++
			if e.Principal != "User:alice" || e.Mechanism != "SCRAM-SHA-256" {
				t.Errorf("login: %+v", e)
			}
		case e.Type == "io.inorder.audit.request" && e.Principal != "User:alice":
			t.Errorf("a request of %q: %+v", e.Principal, e)
		case e.APIKey == "Produce":
			produces++
			if e.ClientID != "audited" || e.ErrorCode != 0 || len(e.Resources) != 1 || !named(e.Resources[0].Name) ||
				len(e.Resources[0].Partitions) != 1 || e.Resources[0].Partitions[0].First == nil {
				t.Errorf("produce: %+v", e)
				continue
			}
			part := e.Resources[0].Partitions[0]
			if part.Records != 1 || part.Bytes == 0 || part.Last == nil || *part.Last != *part.First {
				t.Errorf("produce of one record: %+v", part)
			}
			offsets = append(offsets, *part.First)
		case e.APIKey == "Fetch":
			fetches++
		case e.APIKey == "OffsetCommit":
			commits++
			if e.ErrorCode != commitErr || len(e.Resources) != 2 || e.Resources[0].Type != "Group" || e.Resources[0].Name != "g" ||
				!named(e.Resources[1].Name) || len(e.Resources[1].Partitions) != 1 {
				t.Errorf("commit: %+v", e)
			} else if c := e.Resources[1].Partitions[0].Committed; commitErr == 0 && (c == nil || *c != produced) {
				t.Errorf("committed offset: %v, want %d", c, produced)
			}
		case e.APIKey == "CreateTopics":
			creates++
			if e.ErrorCode != 0 || len(e.Resources) != 1 || e.Resources[0].Name != "fresh" {
				t.Errorf("create: %+v", e)
			}
		default:
			t.Errorf("unexpected event: %+v", e)
		}
	}
	if denied != 1 || allowed < 1 || produces != produced || fetches < 1 || commits != 1 || creates != 1 {
		t.Errorf("refused logins %d, logins %d, produces %d, fetches %d, commits %d, creates %d; want 1, >=1, %d, >=1, 1, 1",
			denied, allowed, produces, fetches, commits, creates, produced)
	}
	for i, o := range offsets {
		if o != int64(i) {
			t.Errorf("produce offsets %v, want 0..%d in order", offsets, produced-1)
			break
		}
	}
}

// heldSink is an audit sink that writes nothing while held, and then
// keeps every event, each write slowed by delay.
type heldSink struct {
	gate  chan struct{} // closed: writes go on
	delay time.Duration

	mu   sync.Mutex
	recs []auditEvent
}

func (s *heldSink) Name() audit.SinkName { return audit.SinkFile }

func (s *heldSink) Write(ctx context.Context, recs []audit.Record) (int, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		var e auditEvent
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return 0, err
		}
		s.recs = append(s.recs, e)
	}
	return len(recs), nil
}

func (s *heldSink) Close() error { return nil }

// countAnswered returns how many events of the API from clientID the
// sink wrote that say the request was answered without an error.
func (s *heldSink) countAnswered(api, clientID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.recs {
		if e.APIKey == api && e.ClientID == clientID && e.ErrorCode == 0 {
			n++
		}
	}
	return n
}

// count returns how many events of the API the sink wrote.
func (s *heldSink) count(api string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.recs {
		if e.APIKey == api {
			n++
		}
	}
	return n
}

// heldProxy runs a proxy recording, request by request, into a queue of
// queueBytes in block mode whose one sink is s.
func heldProxy(t *testing.T, kc *kfake.Cluster, mode config.Ordering, s *heldSink, queueBytes int64) (*testProxy, *audit.Trail) {
	t.Helper()
	cfg := config.Default()
	b := budget.New(cfg.Memory())
	q := audit.NewQueue(audit.QueueOptions{MaxBytes: queueBytes, OnFull: audit.Block, Budget: b}, s)
	trail := audit.New(audit.Options{DataPath: audit.DataPathRequest}, q)
	p := startProxy(t, mode, kc.ListenAddrs(), nil, proxy.WithBudget(b), proxy.WithRecorder(trail))
	t.Cleanup(func() {
		select {
		case <-s.gate:
		default:
			close(s.gate)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		trail.Shutdown(ctx)
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log.String())
		}
	})
	return p, trail
}

// waitStalled waits, for up to 10 s, until a client's count of answered
// produces stands still for 300 ms at a count ok accepts (the proxy
// holds it back), and returns that count; it fails the test with what
// otherwise.
func waitStalled(t *testing.T, acked *atomic.Int64, ok func(int64) bool, what string) int64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		before := acked.Load()
		time.Sleep(300 * time.Millisecond)
		if after := acked.Load(); after == before && ok(after) {
			return after
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d produces answered", what, acked.Load())
		}
	}
}

// stopHeld stops p and then trail, within 10 s, so that every event
// recorded is written or counted dropped before the test counts them.
func stopHeld(t *testing.T, p *testProxy, trail *audit.Trail) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := trail.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAuditBlockHoldsClient: with the sink stalled and the queue full, a
// client whose requests are audited is held back (its produces stop being
// answered) while another client's unaudited requests go on; once the sink
// writes again every event is written, none lost.
func TestAuditBlockHoldsClient(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			const topic, total = "held", 40
			kc := newCluster(t, kfake.SeedTopics(1, topic))
			sink := &heldSink{gate: make(chan struct{})}
			p, trail := heldProxy(t, kc, mode, sink, 4<<10)
			ctx := testContext(t, 30*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var acked atomic.Int64
			done := make(chan error, 1)
			go func() {
				for i := range total {
					if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
						done <- err
						return
					}
					acked.Add(1)
				}
				done <- nil
			}()
			// The queue holds a few events; then the client stops being
			// answered.
			held := waitStalled(t, &acked, func(n int64) bool { return n < total }, "the client was never held back")
			other, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := other.Ping(ctx); err != nil {
				t.Fatalf("another client's unaudited request while the queue is full: %v", err)
			}
			if n := acked.Load(); n != held {
				t.Fatalf("the held client went on: %d answered, held at %d", n, held)
			}
			close(sink.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			cl.Close()
			stopHeld(t, p, trail)
			if n := sink.count("Produce"); n != total {
				t.Fatalf("%d Produce events written, want %d", n, total)
			}
		})
	}
}

// TestAuditAnsweredOutlivesClient: with the sink stalled and the queue
// full of another client's events, a client sends one produce, is
// answered, and leaves at once, its event still waiting for room; once
// the sink writes again, within the linger the connection's end allows,
// that produce is recorded as answered, not lost with the client.
func TestAuditAnsweredOutlivesClient(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			const topic = "answered"
			kc := newCluster(t, kfake.SeedTopics(1, topic))
			sink := &heldSink{gate: make(chan struct{})}
			p, trail := heldProxy(t, kc, mode, sink, 4<<10)
			ctx := testContext(t, 30*time.Second)
			filler, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ClientID("filler"))
			if err != nil {
				t.Fatal(err)
			}
			defer filler.Close()
			var acked atomic.Int64
			go func() {
				for i := 0; ; i++ {
					if filler.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr() != nil {
						return
					}
					acked.Add(1)
				}
			}()
			waitStalled(t, &acked, func(n int64) bool { return n > 0 }, "the queue never filled")
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ClientID("leaver"))
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("last")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			// The proxy sees the client gone at once on loopback; the
			// sink writes again well within the linger after that.
			time.Sleep(300 * time.Millisecond)
			close(sink.gate)
			filler.Close()
			stopHeld(t, p, trail)
			if n := sink.countAnswered("Produce", "leaver"); n != 1 {
				t.Fatalf("%d Produce events of the client that left recorded as answered, want 1", n)
			}
		})
	}
}

// TestAuditStopFlushes: events still queued when the proxy stops, behind
// a stalled then slow sink, are all written by the trail's shutdown.
func TestAuditStopFlushes(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			const topic, total = "flushed", 30
			kc := newCluster(t, kfake.SeedTopics(1, topic))
			// The sink writes nothing until the stop: every event is
			// still queued then, within a queue large enough for all.
			sink := &heldSink{gate: make(chan struct{}), delay: 20 * time.Millisecond}
			p, trail := heldProxy(t, kc, mode, sink, 1<<20)
			ctx := testContext(t, 30*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			for i := range total {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if n := sink.count("Produce"); n != 0 {
				t.Fatalf("%d events written by a stalled sink", n)
			}
			close(sink.gate)
			if err := trail.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if n := sink.count("Produce"); n != total {
				t.Fatalf("%d Produce events written, want %d", n, total)
			}
		})
	}
}

// TestAuditSummary: in summary mode (the default) the data path is one
// event per connection, recorded at its close: the produces counted per
// partition with their records and bytes, without offsets; an administrative
// request is still recorded on its own.
func TestAuditSummary(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			const topic, produced = "summed", 3
			kc := newCluster(t, kfake.SeedTopics(1, topic))
			p, stop := auditedProxy(t, kc, mode, config.TopologyPorts, config.AuditDataPathSummary)
			ctx := testContext(t, 30*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
				kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			for i := range produced {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			create := kmsg.NewPtrCreateTopicsRequest()
			nt := kmsg.NewCreateTopicsRequestTopic()
			nt.Topic, nt.NumPartitions, nt.ReplicationFactor = "other", 1, 1
			create.Topics = append(create.Topics, nt)
			if _, err := create.RequestWith(ctx, cl); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			var requests, records, creates, summaries int64
			for _, e := range stop() {
				switch e.Type {
				case "io.inorder.audit.summary":
					summaries++
					if e.Principal != "User:alice" {
						t.Errorf("summary of %q", e.Principal)
					}
					for _, r := range e.Resources {
						if r.APIKey != "Produce" {
							continue
						}
						requests += r.Requests
						if len(r.Partitions) != 1 || r.Partitions[0].Partition != 0 || r.Partitions[0].First != nil {
							t.Errorf("produce summary: %+v", r)
							continue
						}
						records += r.Partitions[0].Records
						if r.Partitions[0].Bytes == 0 {
							t.Errorf("produce summary without bytes: %+v", r)
						}
					}
				case "io.inorder.audit.request":
					if e.APIKey != "CreateTopics" {
						t.Errorf("a request recorded on its own in summary mode: %+v", e)
					}
					creates++
				}
			}
			if requests != produced || records != produced || creates != 1 || summaries < 1 {
				t.Errorf("produces summarised %d with %d records, creates %d, summaries %d; want %d, %d, 1, >=1", requests, records, creates, summaries, produced, produced)
			}
		})
	}
}

// recorded is a Recorder that keeps what it is given.
type recorded struct {
	mu    sync.Mutex
	reqs  []audit.Request
	opens []audit.ConnInfo
	auths []audit.Authentication
	// authConns is, for each of auths, the connection it was recorded on.
	authConns []audit.ConnInfo
	conns     map[*audit.Conn]audit.ConnInfo
}

func (r *recorded) Open(info audit.ConnInfo) *audit.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opens = append(r.opens, info)
	c := &audit.Conn{}
	if r.conns == nil {
		r.conns = map[*audit.Conn]audit.ConnInfo{}
	}
	r.conns[c] = info
	return c
}

func (r *recorded) Authentication(_ context.Context, c *audit.Conn, a *audit.Authentication) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auths = append(r.auths, *a)
	r.authConns = append(r.authConns, r.conns[c])
	return nil
}
func (r *recorded) Wants(int16, audit.Decision) bool         { return true }
func (r *recorded) Close(context.Context, *audit.Conn) error { return nil }
func (r *recorded) Request(_ context.Context, _ *audit.Conn, q *audit.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A copy: the proxy reuses what it passes once Request returns.
	c := *q
	c.Resources = slices.Clone(q.Resources)
	for i := range c.Resources {
		c.Resources[i].Partitions = slices.Clone(c.Resources[i].Partitions)
	}
	r.reqs = append(r.reqs, c)
	return nil
}

// TestAuditDenied: a request the proxy refuses is recorded as denied, with
// the client's id, the error code it gets and every resource denied.
func TestAuditDenied(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(4)
	nt := kmsg.NewCreateTopicsRequestTopic()
	nt.Topic = "secret-plans"
	req.Topics = append(req.Topics, nt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("denied-client")).AppendRequest(nil, req, 7)
	rec := &recorded{}
	code := kerr.TopicAuthorizationFailed.Code
	if err := proxy.AuditDenied(p.Proxy, rec, frame, code, audit.Resource{Type: "Topic", Name: "secret-plans", Operation: "Create", ErrorCode: code}); err != nil {
		t.Fatal(err)
	}
	if len(rec.reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(rec.reqs))
	}
	q := rec.reqs[0]
	if q.APIKey != int16(kmsg.CreateTopics) || q.APIVersion != 4 || q.ClientID != "denied-client" || q.Decision != audit.Deny || q.ErrorCode != code ||
		len(q.Resources) != 1 || q.Resources[0].Decision != audit.Deny || q.Resources[0].Name != "secret-plans" {
		t.Fatalf("denied request recorded as %+v", q)
	}
}

// TestAuditCertificatePrincipal: a client certificate's principal is the
// connection's from its open, recorded as a TLS authentication with the
// certificate's subject.
func TestAuditCertificatePrincipal(t *testing.T) {
	p, k, rec := certAuditProxy(t, `RULE:^CN=([^,]*)(,.*)?$/$1/U`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "alice")), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t, 20*time.Second), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.opens) == 0 || len(rec.auths) != len(rec.opens) {
		t.Fatalf("%d connections opened, %d authentications; want one each", len(rec.opens), len(rec.auths))
	}
	for i, o := range rec.opens {
		if o.Principal != "User:ALICE" || !strings.Contains(o.TLSSubject, "CN=alice") || o.ClientAddress == "" || o.ID == 0 {
			t.Errorf("connection %d opened as %+v", i, o)
		}
	}
	for _, a := range rec.auths {
		if a.Mechanism != "TLS" || a.APIKey != audit.NoAPIKey || a.Principal != "User:ALICE" || a.Reason != "" {
			t.Errorf("authentication %+v", a)
		}
	}
	if len(rec.reqs) == 0 {
		t.Error("no request recorded")
	}
}

// TestAuditRefusedBeforeAuthentication: a request the client
// authentication refuses before the client authenticated is recorded as
// denied with ILLEGAL_SASL_STATE.
func TestAuditRefusedBeforeAuthentication(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	rec := &recorded{}
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithClientAuth(authGate(t, nil, 0, false)), proxy.WithRecorder(rec))
	c := dialAuth(t, p.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	c.waitClosed()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 1 {
		t.Fatalf("%d requests recorded, want the refused one", len(rec.reqs))
	}
	if q := rec.reqs[0]; q.APIKey != int16(kmsg.Metadata) || q.Decision != audit.Deny || q.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("refused request recorded as %+v", q)
	}
}

// TestAuditReauthentication: each SCRAM exchange on a connection, the
// first and a re-authentication, is one successful authentication,
// recorded when the exchange ends, not at its first round.
func TestAuditReauthentication(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	rec := &recorded{}
	// Re-authentication is offered only with a session lifetime (KIP-368).
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithClientAuth(authGate(t, nil, time.Hour, false)), proxy.WithRecorder(rec))
	c := dialAuth(t, p.Addr())
	mech := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	for round := 1; round <= 2; round++ {
		c.scramLogin(mech)
		rec.mu.Lock()
		auths := slices.Clone(rec.auths)
		rec.mu.Unlock()
		if len(auths) != round {
			t.Fatalf("after %d logins, %d authentications recorded: %+v", round, len(auths), auths)
		}
		if a := auths[round-1]; a.Principal != "User:alice" || a.Mechanism != "SCRAM-SHA-512" || a.Reason != "" || a.APIKey != int16(kmsg.SASLAuthenticate) {
			t.Fatalf("login %d recorded as %+v", round, a)
		}
	}
}

// discardSink takes every record and keeps none.
type discardSink struct{ n atomic.Int64 }

func (s *discardSink) Name() audit.SinkName { return audit.SinkFile }
func (s *discardSink) Write(_ context.Context, recs []audit.Record) (int, error) {
	s.n.Add(int64(len(recs)))
	return len(recs), nil
}
func (s *discardSink) Close() error { return nil }

// recordTwice records the exchange of frame and respFrame twice on one
// connection, the second time with what the first pooled, and returns
// the two requests recorded.
func recordTwice(t *testing.T, p *testProxy, cfg *config.Config, frame, respFrame []byte) []audit.Request {
	t.Helper()
	return recordTwiceBy(t, proxy.AuditExchange, p, cfg, frame, respFrame)
}

// exchangeFunc is proxy.AuditExchange or proxy.AuditExchangeUnread.
type exchangeFunc func(*proxy.Proxy, *config.Config, audit.Recorder, []byte, []byte) (func(), error)

func recordTwiceBy(t *testing.T, exchange exchangeFunc, p *testProxy, cfg *config.Config, frame, respFrame []byte) []audit.Request {
	t.Helper()
	rec := &recorded{}
	once, err := exchange(p.Proxy, cfg, rec, frame, respFrame)
	if err != nil {
		t.Fatal(err)
	}
	once()
	once()
	if len(rec.reqs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(rec.reqs))
	}
	return rec.reqs
}

// maxAuditAllocs bounds the allocations of one audited request of three
// topics, whatever its partitions: the copy of its event the queue keeps
// until it encodes it with the events beside it (the event, its
// resources, its partitions).
const maxAuditAllocs = 3

// auditAllocs is what recording the exchange of frame and respFrame into
// a trail allocates per request.
func auditAllocs(t *testing.T, p *testProxy, cfg *config.Config, frame, respFrame []byte) float64 {
	t.Helper()
	return auditAllocsBy(t, proxy.AuditExchange, p, cfg, frame, respFrame)
}

func auditAllocsBy(t *testing.T, exchange exchangeFunc, p *testProxy, cfg *config.Config, frame, respFrame []byte) float64 {
	t.Helper()
	trail := audit.New(audit.Options{DataPath: audit.DataPathRequest}, audit.NewQueue(audit.QueueOptions{}, &discardSink{}))
	defer trail.Shutdown(context.Background())
	run, err := exchange(p.Proxy, cfg, trail, frame, respFrame)
	if err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(200, run)
}

// TestAuditProduceAllocs: per-request auditing of a Produce to 12
// partitions, recorded into a trail, allocates a few times per request
// (its encoded event, the queue's bookkeeping), not per partition: the
// response is scanned rather than decoded, the request's state is pooled
// with its slices, and the topic names and the client id are kept by the
// connection. It is checked in the two ways topics are named (by name up
// to v12, by id from v13), and the event holds what the request and the
// response said.
func TestAuditProduceAllocs(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	cfg := &config.Config{Audit: config.Audit{AuditDataPath: config.AuditDataPathRequest}}
	for _, version := range []int16{11, 13} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			frame, respFrame, req := capturetest.Produce(version)

			// Its body unread (spliced), the request's topics and
			// partitions are the response's, with their offsets; its
			// records are not known.
			for _, unread := range []bool{false, true} {
				exchange := proxy.AuditExchange
				if unread {
					exchange = proxy.AuditExchangeUnread
				}
				for _, q := range recordTwiceBy(t, exchange, p, cfg, frame, respFrame) {
					if err := capturetest.CheckProduce(&q, req, unread); err != nil {
						t.Fatal(err)
					}
				}
			}

			if raceEnabled {
				return // allocation counts differ under the race detector (sync.Pool drops items at random)
			}
			allocs := auditAllocs(t, p, cfg, frame, respFrame)
			// The event's copy the queue keeps until it encodes it (the
			// event, its resources' slice, its partitions' slice), and the
			// queue's growth now and then: where a decoded response, the
			// request's state and a name per partition were dozens.
			if allocs > maxAuditAllocs {
				t.Fatalf("an audited Produce to 12 partitions allocates %v times", allocs)
			}
			// Spliced upstream unread, the request names no partition: the
			// response does, without a slice allocated per topic.
			if allocs := auditAllocsBy(t, proxy.AuditExchangeUnread, p, cfg, frame, respFrame); allocs > maxAuditAllocs {
				t.Fatalf("an audited Produce to 12 partitions, its body unread, allocates %v times", allocs)
			}
		})
	}
}

// fetchAt sends req through p as alice at version: kgo sends a request at
// the highest version both ends know, so a client of its own pins it.
func fetchAt(ctx context.Context, t *testing.T, p *testProxy, req *kmsg.FetchRequest, version int16, opts ...kgo.Opt) *kmsg.FetchResponse {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Fetch), version)
	pinned, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.MaxVersions(vs)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	resp, err := req.RequestWith(ctx, pinned)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != version {
		t.Fatalf("fetched at v%d, not v%d", resp.Version, version)
	}
	return resp
}

// fetchedPart is what an audit event should say of a partition a Fetch
// read, taken from the response the client got.
type fetchedPart struct {
	fetch, first, last, records, bytes int64
	code                               int16
}

// both is what two reads of the same partition returned together.
func both(a, b fetchedPart) fetchedPart {
	a.first, a.last = min(a.first, b.first), max(a.last, b.last)
	a.records, a.bytes = a.records+b.records, a.bytes+b.bytes
	return a
}

// topicIDOf is the id of topic, as cl learns it from Metadata.
func topicIDOf(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return mresp.Topics[0].TopicID
}

// clientFetched is what the client decoded of partition rp, asked for
// from fetch.
func clientFetched(t *testing.T, rp *kmsg.FetchResponseTopicPartition, fetch int64) fetchedPart {
	t.Helper()
	got := fetchedPart{fetch: fetch, first: -1, last: -1, bytes: int64(len(rp.RecordBatches)), code: rp.ErrorCode}
	for b := rp.RecordBatches; len(b) > 0; {
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if got.first < 0 {
			got.first = batch.FirstOffset
		}
		got.last = batch.FirstOffset + int64(batch.LastOffsetDelta)
		got.records += int64(batch.NumRecords)
		b = b[12+int(batch.Length):]
	}
	return got
}

// eventFetched is what an event says of a partition; -1 for an offset
// it does not give.
func eventFetched(part *auditPartition) fetchedPart {
	got := fetchedPart{fetch: -1, first: -1, last: -1, records: part.Records, bytes: part.Bytes, code: part.ErrorCode}
	for _, o := range []struct {
		to   *int64
		from *int64
	}{{&got.fetch, part.Fetch}, {&got.first, part.First}, {&got.last, part.Last}} {
		if o.from != nil {
			*o.to = *o.from
		}
	}
	return got
}

// TestAuditFetchNamesWhatWasRead: a consumer fetching three partitions of
// two topics, by name (v12) and by topic id (v13), gets events naming
// them with the offsets asked and the batches read, as the client decodes
// its response; in summary mode the summary adds them up.
func TestAuditFetchNamesWhatWasRead(t *testing.T) {
	for _, dataPath := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
		t.Run(dataPath, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "fa"), kfake.SeedTopics(1, "fb"))
			p, stop := auditedProxy(t, kc, config.OrderingNone, config.TopologyPorts, dataPath)
			ctx := testContext(t, 30*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
				kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// fa's records one per produce, so that a fetch returns several
			// batches, the last offset from the last one; fb's in one
			// produce, one batch whose last offset is its base's plus a
			// delta.
			for _, tp := range []struct {
				topic string
				part  int32
				n     int
			}{{"fa", 0, 3}, {"fa", 1, 2}} {
				for i := range tp.n {
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.topic, Partition: tp.part, Value: []byte{byte(i)}}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			var fb []*kgo.Record
			for i := range 4 {
				fb = append(fb, &kgo.Record{Topic: "fb", Partition: 0, Value: []byte{byte(i)}})
			}
			if err := cl.ProduceSync(ctx, fb...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			meta := kmsg.NewPtrMetadataRequest()
			for _, name := range []string{"fa", "fb"} {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(name)
				meta.Topics = append(meta.Topics, mt)
			}
			mresp, err := meta.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string][16]byte{}
			for _, mt := range mresp.Topics {
				ids[*mt.Topic] = mt.TopicID
			}

			asked := map[string]map[int32]int64{"fa": {0: 1, 1: 0}, "fb": {0: 2}}
			want := map[string]map[int32]fetchedPart{} // by the name the event gives
			for _, version := range []int16{12, 13} {
				req := kmsg.NewPtrFetchRequest()
				req.SetVersion(version)
				req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
				for _, name := range []string{"fa", "fb"} {
					ft := kmsg.NewFetchRequestTopic()
					ft.Topic, ft.TopicID = name, ids[name]
					for _, part := range []int32{0, 1} {
						if off, ok := asked[name][part]; ok {
							fp := kmsg.NewFetchRequestTopicPartition()
							fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = part, off, 1<<20
							ft.Partitions = append(ft.Partitions, fp)
						}
					}
					req.Topics = append(req.Topics, ft)
				}
				resp := fetchAt(ctx, t, p, req, version)
				for _, rt := range resp.Topics {
					name := rt.Topic
					if version >= 13 {
						for n, id := range ids {
							if id == rt.TopicID {
								name = n
							}
						}
					}
					// By id or by name, the event names the topic by
					// its name, which the Metadata answer taught.
					if want[name] == nil {
						want[name] = map[int32]fetchedPart{}
					}
					for _, rp := range rt.Partitions {
						got := clientFetched(t, &rp, asked[name][rp.Partition])
						if got.code != 0 || got.records == 0 {
							t.Fatalf("fetch v%d of %s/%d: %+v", version, name, rp.Partition, got)
						}
						if was, ok := want[name][rp.Partition]; ok {
							got = both(was, got)
						}
						want[name][rp.Partition] = got
					}
				}
			}
			cl.Close()

			seen := map[string]map[int32]fetchedPart{}
			fetches := 0
			for _, e := range stop() {
				isFetch := e.APIKey == "Fetch"
				if e.Type == "io.inorder.audit.summary" {
					isFetch = false
					for _, r := range e.Resources {
						isFetch = isFetch || r.APIKey == "Fetch"
					}
				}
				if !isFetch {
					continue
				}
				fetches++
				inEvent := map[string]bool{}
				for _, r := range e.Resources {
					if r.Type != "Topic" || e.Type == "io.inorder.audit.summary" && r.APIKey != "Fetch" {
						continue
					}
					if seen[r.Name] == nil {
						seen[r.Name] = map[int32]fetchedPart{}
					}
					for _, part := range r.Partitions {
						got := eventFetched(&part)
						if dataPath == config.AuditDataPathSummary {
							got.fetch = want[r.Name][part.Partition].fetch // a summary has no fetch offset
							if part.Fetch != nil {
								t.Errorf("summary of %s/%d with a fetch offset", r.Name, part.Partition)
							}
						}
						key := fmt.Sprintf("%s/%d", r.Name, part.Partition)
						if inEvent[key] {
							t.Errorf("%s recorded twice in one event", key)
						}
						inEvent[key] = true
						if was, dup := seen[r.Name][part.Partition]; dup {
							// The two fetches' events, or the
							// summaries of two intervals.
							got = both(was, got)
						}
						seen[r.Name][part.Partition] = got
					}
				}
			}
			if dataPath == config.AuditDataPathRequest && fetches != 2 || fetches < 1 {
				t.Errorf("%d fetch events", fetches)
			}
			if len(seen) != 2 || fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Errorf("events say\n%v\nthe client got\n%v", seen, want)
			}
		})
	}
}

// TestAuditFetchAllocs: per-request auditing of a Fetch of 12 partitions
// allocates a few times per request, not per partition, by name (v12) and
// by topic id (v13), and its event holds what the request asked and the
// batches' headers say.
func TestAuditFetchAllocs(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	cfg := &config.Config{Audit: config.Audit{AuditDataPath: config.AuditDataPathRequest}}
	for _, version := range []int16{12, 13} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			frame, respFrame, req := capturetest.Fetch(version, 64<<10)
			for _, q := range recordTwice(t, p, cfg, frame, respFrame) {
				if err := capturetest.CheckFetch(&q, req, 64<<10); err != nil {
					t.Fatal(err)
				}
			}

			if raceEnabled {
				return // allocation counts differ under the race detector (sync.Pool drops items at random)
			}
			if allocs := auditAllocs(t, p, cfg, frame, respFrame); allocs > maxAuditAllocs {
				t.Fatalf("an audited Fetch of 12 partitions allocates %v times", allocs)
			}
		})
	}
}

// BenchmarkAuditFetch is the audit's own work for a Fetch of 12 partitions
// returning 24 KiB (read whole by the proxy) or 1.5 MiB (read whole only
// when an earlier response is owed), in the two data paths; its MB/s is of
// the response.
func BenchmarkAuditFetch(b *testing.B) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	p := startProxy(b, config.OrderingConnection, kc.ListenAddrs(), nil)
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, path := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
			b.Run(fmt.Sprintf("%s/%dKiB", path, 24*size>>10), func(b *testing.B) {
				cfg := &config.Config{Audit: config.Audit{AuditDataPath: path}}
				frame, respFrame, _ := capturetest.Fetch(13, size)
				trail := audit.New(audit.Options{DataPath: audit.DataPath(path)}, audit.NewQueue(audit.QueueOptions{}, &discardSink{}))
				defer trail.Shutdown(context.Background())
				run, err := proxy.AuditExchange(p.Proxy, cfg, trail, frame, respFrame)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(respFrame)))
				b.ReportAllocs()
				for b.Loop() {
					run()
				}
			})
		}
	}
}

// TestAuditFetchStreamed: a Fetch response large enough to be streamed to
// the client is never whole in memory, yet its event says what each
// partition returned, as the client decodes it: batches read through the
// window (small ones, or over TLS) and batches spliced (large ones
// between TCP sockets), by name (v12) and by topic id (v13 and v16, where
// the walk rewrites endpoints too); in summary mode the summary adds them
// up.
func TestAuditFetchStreamed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tls      bool
		dataPath string
		versions []int16
	}{
		{"splice/request", false, config.AuditDataPathRequest, []int16{12, 13, 16}},
		{"splice/summary", false, config.AuditDataPathSummary, []int16{12, 16}},
		{"tls/request", true, config.AuditDataPathRequest, []int16{12, 16}},
	} {
		for _, version := range tc.versions {
			t.Run(fmt.Sprintf("%s/v%d", tc.name, version), func(t *testing.T) {
				testAuditFetchStreamed(t, version, tc.tls, tc.dataPath)
			})
		}
	}
}

func testAuditFetchStreamed(t *testing.T, version int16, useTLS bool, dataPath string) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "big"))
	var mut func(*config.Config)
	var opts []kgo.Opt
	if useTLS {
		k := newPKI(t)
		cert, key := k.files(t, "proxy", "127.0.0.1")
		mut = func(c *config.Config) { c.TLSCert, c.TLSKey = cert, key }
		opts = append(opts, kgo.DialTLSConfig(k.tlsConfig(t, "")))
	}
	m := metrics.New()
	p, stop := auditTrailProxy(t, kc, config.OrderingConnection, dataPath, mut, proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, 0, true)))
	ctx := testContext(t, 60*time.Second)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		kgo.ProducerLinger(0), kgo.DefaultProduceTopic("big"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A batch per produce: partition 0 six of 12 KiB, read through the
	// window; partition 1 three of 48 KiB, each spliced between TCP
	// sockets; partition 2 one small one.
	for _, pp := range []struct {
		part     int32
		n, bytes int
	}{{0, 6, 12 << 10}, {1, 3, 48 << 10}, {2, 1, 100}} {
		for i := range pp.n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: pp.part, Value: make([]byte, pp.bytes+i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := topicIDOf(ctx, t, cl, "big")
	event := "big" // by id too: the Metadata answer taught its name
	calls := p.FetchCalls()

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 4<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "big", id
	asked := map[int32]int64{0: 1, 1: 0, 2: 0}
	for part := range int32(3) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = part, asked[part], 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp := fetchAt(ctx, t, p, req, version, opts...)
	want := map[int32]fetchedPart{}
	size := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			size += len(rp.RecordBatches)
			want[rp.Partition] = clientFetched(t, &rp, asked[rp.Partition])
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(map[int32]fetchedPart{
		0: {fetch: 1, first: 1, last: 5, records: 5, bytes: want[0].bytes},
		1: {fetch: 0, first: 0, last: 2, records: 3, bytes: want[1].bytes},
		2: {fetch: 0, first: 0, last: 0, records: 1, bytes: want[2].bytes},
	}) || size < 200<<10 {
		t.Fatalf("the client got %v, %d bytes", want, size)
	}
	calls = p.FetchCalls() - calls
	t.Logf("%d bytes of records walked in %d socket calls", size, calls)
	if calls == 0 {
		t.Fatal("the response was not walked")
	}
	cl.Close()

	seen := map[int32]fetchedPart{}
	fetches := 0
	for _, e := range stop() {
		for _, r := range e.Resources {
			if e.APIKey != "Fetch" && r.APIKey != "Fetch" || r.Type != "Topic" {
				continue
			}
			if r.Name != event {
				t.Errorf("a fetch of %q recorded, want %q", r.Name, event)
			}
			fetches++
			for _, part := range r.Partitions {
				got := eventFetched(&part)
				if dataPath == config.AuditDataPathSummary {
					got.fetch = asked[part.Partition] // a summary has no fetch offset
				}
				if _, dup := seen[part.Partition]; dup {
					t.Errorf("partition %d recorded twice", part.Partition)
				}
				seen[part.Partition] = got
			}
		}
	}
	if fetches != 1 || fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("%d fetch events say\n%v\nthe client got\n%v", fetches, seen, want)
	}
}

// TestAuditFetchWalkWork: counting a streamed Fetch response's records
// for its event costs a bounded number of calls on the sockets per batch,
// whatever the batches' sizes: a peek and a splice per batch large enough
// to splice, and the small ones read through the window many at a time.
func TestAuditFetchWalkWork(t *testing.T) {
	const big, small = 12, 200 // batches of 40 KiB in partition 0, of 1 KiB in partition 1
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "work"))
	p, stop := auditedProxy(t, kc, config.OrderingConnection, config.TopologyPorts, config.AuditDataPathRequest)
	defer stop()
	ctx := testContext(t, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		kgo.ProducerLinger(0), kgo.DefaultProduceTopic("work"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for part, pp := range []struct{ n, bytes int }{{big, 40 << 10}, {small, 1 << 10}} {
		for range pp.n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(part), Value: make([]byte, pp.bytes)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := topicIDOf(ctx, t, cl, "work")
	for _, version := range []int16{12, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 4<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "work", id
		for part := range int32(2) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.PartitionMaxBytes = part, 4<<20
			ft.Partitions = append(ft.Partitions, fp)
		}
		req.Topics = append(req.Topics, ft)
		calls := p.FetchCalls()
		resp := fetchAt(ctx, t, p, req, version)
		calls = p.FetchCalls() - calls
		batches := 0
		for _, rp := range resp.Topics[0].Partitions {
			for b := rp.RecordBatches; len(b) > 0; batches++ {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				b = b[12+int(batch.Length):]
			}
		}
		if batches != big+small {
			t.Fatalf("v%d: fetched %d batches, want %d", version, batches, big+small)
		}
		t.Logf("v%d: %d batches (%d of 40 KiB) walked in %d socket calls", version, batches, big, calls)
		// Per large batch a peek and a splice, and a read where a peek
		// saw less than a header; the small ones through the window, a
		// read and a write per window filled, a fraction of a call per
		// batch however the bytes arrive, where a peek and a splice
		// each would be two.
		if limit := int64(3*big + small/2 + 16); calls > limit {
			t.Errorf("v%d: the walk cost %d socket calls, want at most %d", version, calls, limit)
		}
	}
}
