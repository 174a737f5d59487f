package proxy_test

import (
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// advertisedListener is a kfake listener that advertises another address,
// the relay in front of it.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// relayedCluster starts a three-broker kfake whose brokers each sit behind
// a hostile.Relay and advertise it, so that everything the proxy sends a
// broker passes its relay, which can delay it. relays[i] is broker i's.
func relayedCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, []*hostile.Relay) {
	t.Helper()
	var (
		mu     sync.Mutex
		relays []*hostile.Relay
	)
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		r, err := hostile.NewRelay("127.0.0.1:0", ln.Addr().String())
		if err != nil {
			ln.Close()
			return nil, err
		}
		adv, err := net.ResolveTCPAddr("tcp", r.Addr())
		if err != nil {
			ln.Close()
			r.Close()
			return nil, err
		}
		mu.Lock()
		relays = append(relays, r)
		mu.Unlock()
		return advertisedListener{Listener: ln, addr: adv}, nil
	}
	kc := newCluster(t, append(opts, kfake.ListenFn(listen))...)
	t.Cleanup(func() {
		for _, r := range relays {
			r.Close()
		}
	})
	byAddr := map[string]*hostile.Relay{}
	for _, r := range relays {
		byAddr[r.Addr()] = r
	}
	ordered := make([]*hostile.Relay, 0, len(relays))
	for _, a := range kc.ListenAddrs() {
		ordered = append(ordered, byAddr[a])
	}
	return kc, ordered
}

// TestSingleOrderAcrossBrokers pipelines Produce requests on one
// connection to partitions led by two brokers, one of which answers
// every request at least 30 ms later than the other (its relay delays
// each chunk): the proxy has the fast broker's answers long before the
// slow one's, yet the responses arrive in request order, none with an
// error, and each partition holds its records in write order. Both
// ordering modes.
func TestSingleOrderAcrossBrokers(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleOrderAcrossBrokers(t, mode) })
	}
}

func testSingleOrderAcrossBrokers(t *testing.T, mode config.Ordering) {
	const (
		topic = "across"
		n     = 60
		delay = 15 * time.Millisecond
	)
	kc, relays := relayedCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	slow, fast := relays[0], relays[1]
	slow.SetDelay(delay)
	ctx := testContext(t, 60*time.Second)

	// The premise: broker 0 answers a Produce well after broker 1.
	took := func(addr string, partition int32) time.Duration {
		start := time.Now()
		if _, err := pipeprobe.Do(ctx, addr, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: partition, Value: []byte("premise"), Version: 9, Acks: -1, Timeout: 5 * time.Second,
		})); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if s, f := took(slow.Addr(), 0), took(fast.Addr(), 1); s < f+delay {
		t.Fatalf("broker 0 answered in %v, broker 1 in %v: the premise fails", s, f)
	}

	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	var reqs []kmsg.Request
	for i := range n {
		reqs = append(reqs, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i)), Version: 9, Acks: -1, Timeout: 5 * time.Second,
		}))
	}
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inOrderNoErrors(t, res)
	only := &onlyProxy{addr: p.Addr()}
	for part := int32(0); part < 2; part++ {
		got, err := pipeprobe.ReadPartition(ctx, p.Addr(), topic, part, only.opt())
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"premise"}
		for i := int(part); i < n; i += 2 {
			want = append(want, strconv.Itoa(i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d holds %v, want %v", part, got, want)
		}
	}
	only.check(t)
}

// TestSingleEndTxnWaitsForWrites pipelines a transaction's Produce
// requests to partitions on a broker 30 ms slower than the transaction's
// coordinator, followed by the EndTxn that commits them, on one
// connection: the EndTxn must not reach the coordinator before the
// records reached their brokers. Every response comes back in order and
// without error, and a read_committed consumer reads every record and
// the commit marker after them. Both ordering modes; in connection mode,
// where nothing waits for the Produce answers, only the EndTxn gate
// keeps the commit from overtaking them.
func TestSingleEndTxnWaitsForWrites(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleEndTxnWaitsForWrites(t, mode) })
	}
}

func testSingleEndTxnWaitsForWrites(t *testing.T, mode config.Ordering) {
	const (
		topic   = "txgate"
		perPart = 4
	)
	kc, relays := relayedCluster(t, kfake.SeedTopics(2, topic))
	for part := int32(0); part < 2; part++ {
		if err := kc.MoveTopicPartition(topic, part, 0); err != nil {
			t.Fatal(err)
		}
	}
	relays[0].SetDelay(15 * time.Millisecond)
	txnID := ""
	for i := 0; txnID == ""; i++ {
		if id := "gate-" + string(mode) + "-" + strconv.Itoa(i); kc.CoordinatorFor(id) != 0 {
			txnID = id
		}
	}
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	run, err := runTxnProduce(ctx, p.Addr(), "gate", txnID, topic, 2, perPart)
	if err != nil {
		t.Fatal(err)
	}
	requireInOrder(t, run.res)
	only := &onlyProxy{addr: p.Addr()}
	for part := int32(0); part < 2; part++ {
		want := run.sent[part]
		got, err := pipeprobe.ReadCommitted(ctx, p.Addr(), topic, part, len(want), only.opt())
		if err != nil {
			t.Fatalf("partition %d: %v (read %v, sent %v)", part, err, got, want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d: read_committed sees %v, sent %v", part, got, want)
		}
		hwm, err := highWatermark(ctx, p.Addr(), topic, part)
		if err != nil {
			t.Fatal(err)
		}
		if hwm != int64(len(want))+1 {
			t.Fatalf("partition %d: high watermark %d, want %d records and a commit marker", part, hwm, len(want))
		}
	}
	only.check(t)
}

// TestSingleAcksZero writes acks=0 Produce requests to partitions led by
// two brokers, then a Metadata request, on one connection: the client
// gets only the Metadata answer, with its own correlation id, and the
// records land in write order. In none mode the parts go with acks=1
// behind the client's back, so that the next write to their partitions
// waits for them.
func TestSingleAcksZero(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			const topic = "acks0"
			kc := newCluster(t, kfake.SeedTopics(2, topic))
			spreadLeaders(t, kc, topic, 2)
			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			ctx := testContext(t, 30*time.Second)
			rc := dialRaw(t, p.Addr())
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("acks0"))
			var frames []byte
			for i := range 10 {
				req := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i)), Version: 9, Acks: 0, Timeout: 5 * time.Second})
				req.Topics = append(req.Topics, pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: int32((i + 1) % 2), Value: []byte(strconv.Itoa(i)), Version: 9}).Topics...)
				frames = append(frames, f.AppendRequest(nil, req, int32(100+i))...)
			}
			if _, err := rc.c.Write(frames); err != nil {
				t.Fatal(err)
			}
			rc.corr = 199
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 9
			if resp := rc.do(md).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
				t.Fatalf("metadata after acks=0 writes names %d brokers", len(resp.Brokers))
			}
			only := &onlyProxy{addr: p.Addr()}
			want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
			for part := int32(0); part < 2; part++ {
				// In connection mode nothing waited for the writes:
				// they may land after the Metadata answer.
				var got []string
				for end := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					var err error
					if got, err = pipeprobe.ReadPartition(ctx, p.Addr(), topic, part, only.opt()); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("partition %d holds %v, want %v", part, got, want)
				}
			}
		})
	}
}
