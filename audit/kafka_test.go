package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const auditTopic = "audit-trail"

// consumeAll reads the whole topic from the start, until no record comes
// for a while: the events' ids by principal, in offset order per partition.
func consumeAll(t *testing.T, addrs []string) (byKey map[string][]string, total int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(auditTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	byKey = map[string][]string{}
	quiet := 0
	for quiet < 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var ev struct {
				Principal string `json:"principal"`
				ClientID  string `json:"client_id"`
			}
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				t.Fatalf("record value is not an event: %v: %q", err, r.Value)
			}
			if string(r.Key) != ev.Principal {
				t.Fatalf("key %q, principal %q", r.Key, ev.Principal)
			}
			if len(r.Headers) != 1 || r.Headers[0].Key != "content-type" || string(r.Headers[0].Value) != "application/json" {
				t.Fatalf("headers %v", r.Headers)
			}
			byKey[ev.Principal] = append(byKey[ev.Principal], ev.ClientID)
		})
		total += n
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return byKey, total
}

// record enqueues event i of principal User:p<i%keys>, its client id the
// sequence within its principal, through a trail with per-request audit.
func recordEvent(ctx context.Context, tr *Trail, conns []*Conn, i int) error {
	c := conns[i%len(conns)]
	return tr.Request(ctx, c, &Request{APIKey: 19, ClientID: fmt.Sprintf("%06d", i/len(conns)),
		Resources: []Resource{{Type: "Topic", Name: "t", Operation: "Create"}}})
}

func openConns(tr *Trail, n int) []*Conn {
	var conns []*Conn
	for k := range n {
		conns = append(conns, tr.Open(ConnInfo{ID: uint64(k + 1), Listener: "bootstrap", ClientAddress: "127.0.0.1:1", Principal: fmt.Sprintf("User:p%d", k)}))
	}
	return conns
}

// checkOnceInOrder checks that principal k's events are 0..per-1 in order,
// each once (or, with dups, that the first occurrences are in order and
// nothing is missing), and returns the duplicates.
func checkInOrder(t *testing.T, byKey map[string][]string, keys, per int, dups bool) int {
	t.Helper()
	extra := 0
	for k := range keys {
		got := byKey[fmt.Sprintf("User:p%d", k)]
		seen := map[string]bool{}
		next := 0
		for _, id := range got {
			if seen[id] {
				if !dups {
					t.Errorf("User:p%d: %s twice", k, id)
				}
				extra++
				continue
			}
			seen[id] = true
			if id != fmt.Sprintf("%06d", next) {
				t.Fatalf("User:p%d: %s where %06d was due: %v", k, id, next, got)
			}
			next++
		}
		if next != per {
			t.Errorf("User:p%d: %d of %d events", k, next, per)
		}
	}
	return extra
}

func TestKafkaSink(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, auditTopic), kfake.ListenFn(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink, err := NewKafkaSink(KafkaOptions{Topic: auditTopic, Bootstrap: c.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	tr := New(Options{DataPath: DataPathRequest}, NewQueue(QueueOptions{Metrics: m, Batch: 64}, sink))
	conns := openConns(tr, 5)
	const n = 500
	for i := range n {
		if err := recordEvent(context.Background(), tr, conns, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := testutil.ToFloat64(m.written[SinkKafka]); w != n {
		t.Errorf("written_total %v", w)
	}
	byKey, total := consumeAll(t, c.ListenAddrs())
	if total != n {
		t.Errorf("%d records for %d events", total, n)
	}
	checkInOrder(t, byKey, 5, n/5, false)
}

func loopback(network, addr string) (net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	return net.Listen(network, net.JoinHostPort("127.0.0.1", port))
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestKafkaSinkClusterRestart stops the cluster in the middle of a run and
// starts it again on the same port with its data: meanwhile the queue
// fills and Enqueue blocks (block mode), the sink is reported stalled,
// and once the cluster is back every event arrives, in order per
// principal, with duplicates only where idempotence could not prevent
// them.
func TestKafkaSinkClusterRestart(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		t.Helper()
		var c *kfake.Cluster
		var err error
		for range 50 { // the old listener's port may take a moment
			c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(3, auditTopic), kfake.ListenFn(loopback))
			if err == nil {
				return c
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal(err)
		return nil
	}
	c := start()
	addrs := c.ListenAddrs()
	sink, err := NewKafkaSink(KafkaOptions{Topic: auditTopic, Bootstrap: addrs,
		Opts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	q := NewQueue(QueueOptions{Metrics: m, MaxBytes: 40 * 512, Batch: 16, StallAfter: 300 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond}, sink)
	tr := New(Options{DataPath: DataPathRequest}, q)
	conns := openConns(tr, 4)
	const n = 2000
	var enqueued atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := recordEvent(context.Background(), tr, conns, i); err != nil {
				done <- err
				return
			}
			enqueued.Add(1)
			if i%50 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		done <- nil
	}()
	for enqueued.Load() < 300 {
		time.Sleep(time.Millisecond)
	}
	c.Close()

	// The cluster is away: the queue fills and Enqueue waits.
	deadline := time.Now().Add(10 * time.Second)
	var last int64 = -1
	for {
		time.Sleep(300 * time.Millisecond)
		now := enqueued.Load()
		if now == last {
			break
		}
		last = now
		if time.Now().After(deadline) {
			t.Fatalf("Enqueue never blocked: %d enqueued", now)
		}
	}
	if last >= n {
		t.Fatalf("all %d events enqueued while the cluster was away", last)
	}
	if err := tr.Err(); err == nil {
		t.Error("Err is nil while the cluster is away")
	}
	t.Logf("blocked after %d events", last)

	c = start()
	defer c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	byKey, total := consumeAll(t, c.ListenAddrs())
	dups := checkInOrder(t, byKey, 4, n/4, true)
	t.Logf("%d records for %d events: %d duplicates; sink errors %v", total, n, dups, testutil.ToFloat64(m.sinkErrors[SinkKafka]))
}
