package proxy_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/proxy"
)

// startSingle runs a proxy in the single topology in front of upstreams.
func startSingle(t testing.TB, mode config.Ordering, upstreams []string, mut func(*config.Config), opts ...proxy.Option) *testProxy {
	t.Helper()
	return startProxy(t, mode, upstreams, func(c *config.Config) {
		c.Topology = config.TopologySingle
		if mut != nil {
			mut(c)
		}
	}, opts...)
}

// onlyProxy is a kgo dialer that refuses every address but the proxy's
// one, and counts the refusals: a client that learned any other address
// would try it.
type onlyProxy struct {
	addr    string
	mu      sync.Mutex
	refused []string
}

func (o *onlyProxy) opt() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if host != o.addr {
			o.mu.Lock()
			o.refused = append(o.refused, host)
			o.mu.Unlock()
			return nil, fmt.Errorf("dial %s refused: only the proxy at %s is reachable", host, o.addr)
		}
		return d.DialContext(ctx, network, host)
	})
}

func (o *onlyProxy) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.refused) > 0 {
		t.Fatalf("the client dialled %v, not only the proxy at %s", o.refused, o.addr)
	}
}

// spreadLeaders moves the topic's partitions so that partition p is led
// by broker p%3: every broker leads some.
func spreadLeaders(t *testing.T, kc *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	for p := range partitions {
		if err := kc.MoveTopicPartition(topic, p, p%3); err != nil {
			t.Fatal(err)
		}
	}
}

// singleSetup starts a three-broker kfake with topic's partitions led by
// every broker and the single endpoint in front of it, and gives the
// test 90 s and a dialer that reaches only the proxy.
func singleSetup(t *testing.T, mode config.Ordering, topic string, partitions int32) (*kfake.Cluster, *testProxy, context.Context, *onlyProxy) {
	t.Helper()
	kc := newCluster(t, kfake.SeedTopics(partitions, topic))
	spreadLeaders(t, kc, topic, partitions)
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	return kc, p, testContext(t, 90*time.Second), &onlyProxy{addr: p.Addr()}
}

// produceEach produces value(i) to every partition for i in [from, to),
// all in flight at once, and fails t on the first error.
func produceEach(t *testing.T, ctx context.Context, cl *kgo.Client, partitions int32, from, to int, value func(i int) []byte) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := from; i < to; i++ {
		for part := int32(0); part < partitions; part++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: value(i)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
}

// TestSingleTransactions runs transactions across partitions led by
// different brokers through the single endpoint: committed ones are read
// back read_committed whole and in order, aborted ones not at all, and the
// client never dials anything but the proxy.
func TestSingleTransactions(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleTransactions(t, mode) })
	}
}

func testSingleTransactions(t *testing.T, mode config.Ordering) {
	const (
		topic      = "txn"
		partitions = 6
		txns       = 6
		perTxn     = 20
	)
	_, p, ctx, only := singleSetup(t, mode, topic, partitions)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(p.Addr()),
		kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID("tx-"+string(mode)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		only.opt(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want [partitions][]string
	for x := range txns {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := x%3 != 2
		for i := range perTxn {
			for part := int32(0); part < partitions; part++ {
				v := fmt.Sprintf("%d-%d", x, i)
				if commit {
					want[part] = append(want[part], v)
				}
				cl.Produce(ctx, &kgo.Record{Partition: part, Value: []byte(v)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce in transaction %d: %v", x, err)
					}
				})
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", x, commit, err)
		}
	}
	rd, err := kgo.NewClient(
		kgo.SeedBrokers(p.Addr()),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond),
		only.opt(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got [partitions][]string
	total := 0
	for total < partitions*perTxn*4 {
		fs := rd.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v (after %d records)", errs[0].Err, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for part := range partitions {
		if fmt.Sprint(got[part]) != fmt.Sprint(want[part]) {
			t.Fatalf("partition %d read committed %v, want %v", part, got[part], want[part])
		}
	}
	only.check(t)
}

// TestSingleGroupRebalance runs a consumer group through a rebalance on
// the single endpoint: a first member consumes and commits, a second
// joins and takes some partitions over; between them every record is
// consumed, each member in offset order, and the first member's
// partitions moved.
func TestSingleGroupRebalance(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleGroupRebalance(t, mode) })
	}
}

func testSingleGroupRebalance(t *testing.T, mode config.Ordering) {
	const (
		topic      = "grp"
		partitions = 6
		perPart    = 100
	)
	_, p, ctx, only := singleSetup(t, mode, topic, partitions)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), only.opt())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// One batch of one 1 KiB record per partition and round, so that
	// a fetch of 2 KiB per partition takes a few at a time and the
	// first member is still at it when the second joins.
	value := make([]byte, 1<<10)
	for range perPart {
		var rs []*kgo.Record
		for part := int32(0); part < partitions; part++ {
			rs = append(rs, &kgo.Record{Partition: part, Value: value})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	type seenBy struct {
		mu   sync.Mutex
		last map[int32]int64
		n    int
		lost int // partitions revoked
	}
	var seen sync.Map // "partition/offset" -> member
	member := func(name string, sb *seenBy) *kgo.Client {
		var cl *kgo.Client
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("rebalance-"+string(mode)),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(300*time.Millisecond),
			kgo.FetchMaxPartitionBytes(2<<10), kgo.BlockRebalanceOnPoll(),
			kgo.OnPartitionsRevoked(func(ctx context.Context, c *kgo.Client, m map[string][]int32) {
				sb.mu.Lock()
				sb.lost += len(m[topic])
				sb.mu.Unlock()
				if err := c.CommitUncommittedOffsets(ctx); err != nil {
					t.Errorf("%s: commit on revoke: %v", name, err)
				}
			}),
			only.opt())
		if err != nil {
			t.Fatal(err)
		}
		sb.last = map[int32]int64{}
		return cl
	}
	poll := func(name string, cl *kgo.Client, sb *seenBy) {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if err != context.DeadlineExceeded {
				t.Errorf("%s: fetch: %v", name, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			sb.mu.Lock()
			if last, ok := sb.last[r.Partition]; ok && r.Offset <= last {
				t.Errorf("%s: partition %d offset %d after %d", name, r.Partition, r.Offset, last)
			}
			sb.last[r.Partition] = r.Offset
			sb.n++
			sb.mu.Unlock()
			seen.Store(fmt.Sprintf("%d/%d", r.Partition, r.Offset), name)
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Errorf("%s: commit: %v", name, err)
		}
		cl.AllowRebalance()
	}
	count := func() int {
		n := 0
		seen.Range(func(any, any) bool { n++; return true })
		return n
	}
	var a, b seenBy
	ca := member("a", &a)
	defer ca.Close()
	for a.n == 0 && ctx.Err() == nil {
		poll("a", ca, &a)
	}
	cb := member("b", &b)
	defer cb.Close()
	for count() < partitions*perPart && ctx.Err() == nil {
		poll("a", ca, &a)
		poll("b", cb, &b)
	}
	if n := count(); n != partitions*perPart {
		t.Fatalf("the group consumed %d distinct records, want %d", n, partitions*perPart)
	}
	if a.lost == 0 || b.n == 0 {
		t.Fatalf("no rebalance: the first member lost %d partitions, the second consumed %d records", a.lost, b.n)
	}
	only.check(t)
}

// TestSingleLeaderMoves moves partition leaders between brokers, at least
// 20 times, while an idempotent producer pipelines to every partition
// through the single endpoint: the parts sent to a broker that no longer
// leads are answered NOT_LEADER_OR_FOLLOWER, the client retries, and in
// the end every partition holds its records exactly once, in order.
func TestSingleLeaderMoves(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleLeaderMoves(t, mode) })
	}
}

func testSingleLeaderMoves(t *testing.T, mode config.Ordering) {
	const (
		topic      = "moves"
		partitions = 9
		perPart    = 400
	)
	kc, p, ctx, only := singleSetup(t, mode, topic, partitions)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1<<10),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }), only.opt())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// The producer writes rounds of records, pipelined, until the
	// leaders have moved at least minMoves times and perPart records
	// went to each partition.
	const minMoves = 20
	var moves atomic.Int64
	stop := make(chan struct{})
	mover := make(chan struct{})
	go func() {
		defer close(mover)
		for part := int32(0); ; part = (part + 1) % partitions {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := kc.MoveTopicPartition(topic, part, (kc.LeaderFor(topic, part)+1)%3); err == nil {
				moves.Add(1)
			}
		}
	}()
	value := make([]byte, 200)
	n := 0
	for ; n < perPart || moves.Load() < minMoves; n += 50 {
		produceEach(t, ctx, prod, partitions, n, n+50, func(i int) []byte { return append(strconv.AppendInt(nil, int64(i), 10), value...) })
	}
	close(stop)
	<-mover
	for part := int32(0); part < partitions; part++ {
		got, err := pipeprobe.ReadPartition(ctx, p.Addr(), topic, part, only.opt())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("partition %d holds %d records, want %d", part, len(got), n)
		}
		for i, v := range got {
			if want := strconv.Itoa(i); v[:len(v)-len(value)] != want {
				t.Fatalf("partition %d offset %d holds %q, want %s", part, i, v[:len(v)-len(value)], want)
			}
		}
	}
	only.check(t)
}

// TestSingleProxySASL: the single endpoint authenticates every upstream
// connection itself (its own client's too), and with a session lifetime
// of 1.5 s it replaces each connection before its session runs out, once
// the connection has answered what it has, while an idempotent producer
// pipelines to partitions on three brokers: nothing is lost or
// reordered, in both ordering modes.
func TestSingleProxySASL(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "inorder", "pw"),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"}), kfake.SeedTopics(3, "sasl"))
			spreadLeaders(t, kc, "sasl", 3)
			handshakes := handshakeCounter(kc)
			p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) {
				c.UpstreamSASLMechanism = config.MechanismScramSHA256
				c.UpstreamSASLUsername = "inorder"
				c.UpstreamSASLPasswordFile = writeSecret(t, "pw")
			})
			ctx := testContext(t, 60*time.Second)
			only := &onlyProxy{addr: p.Addr()}
			produceInOrder(t, ctx, "sasl", 3, 300, 10*time.Millisecond, kgo.SeedBrokers(p.Addr()), only.opt())
			// 3 s of produce to three brokers, each connection's
			// session renewed every 0.5 s.
			if n := handshakes.Load(); n < 12 {
				t.Fatalf("%d handshakes: the sessions were not renewed", n)
			}
			only.check(t)
		})
	}
}
