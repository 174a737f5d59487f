package proxy_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestKgoEndToEnd runs a real client through the proxy in front of a
// three-broker kfake: idempotent produce with 5 in flight over several
// partitions, a leader move in the middle, a consumer group reading it all
// back and committing, and a resumed consumer. Every address the client
// dials must be one of the proxy's. kgo keeps 5 idempotent requests in
// flight per broker against Kafka 1.0+. Both ordering modes, with a
// listener per broker and through the single endpoint (--topology
// single, the partitions then led by every broker, and the one address
// the only one the client may learn).
func TestKgoEndToEnd(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
			t.Run(string(topology)+"-"+string(mode), func(t *testing.T) { testKgoEndToEnd(t, mode, topology) })
		}
	}
}

func testKgoEndToEnd(t *testing.T, mode config.Ordering, topology config.Topology) {
	const (
		topic      = "orders"
		partitions = 6
		perPart    = 300
	)
	kc := newCluster(t, kfake.SeedTopics(partitions, topic))
	if topology == config.TopologySingle {
		spreadLeaders(t, kc, topic, partitions)
	}
	p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.Topology = topology })
	ctx := testContext(t, 60*time.Second)
	var dials dialRecorder

	prod, err := kgo.NewClient(
		kgo.SeedBrokers(p.Addr()),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		dials.opt(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	produce := func(from, to int) {
		produceEach(t, ctx, prod, partitions, from, to, func(i int) []byte { return []byte(strconv.Itoa(i)) })
	}
	produce(0, perPart/2)
	// Move partition 0's leader to another broker: the client must follow
	// it through the proxy, not to the broker itself.
	leader := kc.LeaderFor(topic, 0)
	if err := kc.MoveTopicPartition(topic, 0, (leader+1)%3); err != nil {
		t.Fatal(err)
	}
	produce(perPart/2, perPart)

	group := "g-" + string(mode)
	seen := consumeGroup(t, p.Addr(), topic, group, partitions*perPart, dials.opt())
	for part := int32(0); part < partitions; part++ {
		vals := seen[part]
		if len(vals) != perPart {
			t.Fatalf("partition %d: %d records, want %d", part, len(vals), perPart)
		}
		for i, v := range vals {
			if v != strconv.Itoa(i) {
				t.Fatalf("partition %d offset %d: value %q, want %d (order broken)", part, i, v, i)
			}
		}
	}

	// A consumer in the same group resumes from the committed offsets:
	// it sees only records produced after the commit.
	produce(perPart, perPart+1)
	after := consumeGroup(t, p.Addr(), topic, group, partitions, dials.opt())
	for part := int32(0); part < partitions; part++ {
		if got := after[part]; len(got) != 1 || got[0] != strconv.Itoa(perPart) {
			t.Fatalf("resumed consumer partition %d saw %v, want [%d]", part, got, perPart)
		}
	}

	proxyAddrs := map[string]bool{}
	_, bootPort, _ := net.SplitHostPort(p.Addr())
	proxyAddrs[p.Addr()] = true
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range m.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		proxyAddrs[addr] = true
		for _, real := range kc.ListenAddrs() {
			if addr == real {
				t.Fatalf("metadata names broker %d at its real address %s", b.NodeID, addr)
			}
		}
	}
	if topology == config.TopologySingle && len(proxyAddrs) != 1 {
		t.Fatalf("the single endpoint's metadata names brokers %v beside %s", m.Brokers, p.Addr())
	}
	for _, a := range dials.dialed() {
		if !proxyAddrs[a] {
			t.Fatalf("client dialed %s, which is not the proxy (bootstrap port %s, brokers %v)", a, bootPort, m.Brokers)
		}
	}
}

// consumeGroup reads want records in a consumer group, committing them,
// and returns the values per partition in offset order.
func consumeGroup(t *testing.T, addr, topic, group string, want int, dial kgo.Opt) map[int32][]string {
	t.Helper()
	ctx := testContext(t, 45*time.Second)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		dial,
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int32][]string{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v (after %d of %d records)", errs[0].Err, n, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Partition] = append(seen[r.Partition], string(r.Value))
			n++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n != want {
		t.Fatalf("consumed %d records, want %d", n, want)
	}
	return seen
}

// TestNodeListenerForNewBroker checks that a broker added to the cluster
// gets a listener when metadata first names it.
func TestNodeListenerForNewBroker(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().Nodes; n != 3 {
		t.Fatalf("%d node listeners, want 3", n)
	}
	id, _, err := kc.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, b := range m.Brokers {
		if b.NodeID == id {
			found = true
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(b.Host, fmt.Sprint(b.Port)), 5*time.Second)
			if err != nil {
				t.Fatalf("new node %d's listener: %v", id, err)
			}
			conn.Close()
		}
	}
	if !found {
		t.Fatalf("metadata does not name new node %d: %v", id, m.Brokers)
	}
}
