package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The sidecar's bound and the resident memory it must stay under with
// clients at their default settings.
const (
	sidecarMemory   = "32MiB"
	sidecarResident = 96 << 20
)

// Load of TestSidecarFootprint: each partition is filled with
// sidecarFill bytes before the consumers start, so their fetch responses
// reach 50 MiB, and takes sidecarMore bytes while they read.
const (
	sidecarPartitions = 2
	sidecarConsumers  = 3
	sidecarValue      = 100 << 10
	sidecarFill       = 56 << 20
	sidecarMore       = 8 << 20
	sidecarFetch      = 50 << 20
)

// TestSidecarFootprint runs the built binary as a sidecar, with
// --max-memory 32MiB and nothing else lowered, in both ordering modes, in
// front of the embedded broker and, when INORDER_KAFKA_BOOTSTRAP names
// one, Apache Kafka. Producers send 1 MiB batches (kgo's default batch
// size) to a partition each while several consumers read every partition
// from its start with fetches of up to 50 MiB, as clients' defaults reach
// on a broker leading 50 partitions (the per-partition size is raised to
// 50 MiB instead). Every record arrives, in order; some fetch responses
// reach 40 MiB or more; and the proxy's peak resident memory (the
// kernel's high-water mark) stays below 96 MiB.
func TestSidecarFootprint(t *testing.T) {
	measuresBinary(t, "moves hundreds of MiB through the built binary")
	for _, mode := range []string{"none", "connection"} {
		t.Run("kfake/"+mode, func(t *testing.T) {
			kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(sidecarPartitions, "sidecar"))
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			sidecarLoad(t, kc.ListenAddrs()[0], mode, "sidecar")
		})
	}
	for _, mode := range []string{"none", "connection"} {
		t.Run("kafka/"+mode, func(t *testing.T) {
			boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
			if boot == "" {
				t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
			}
			sidecarLoad(t, boot, mode, "")
		})
	}
}

// sidecarLoad starts the binary in front of upstream in mode and runs the
// load through it; topic names a topic the upstream has, or is empty for
// one the test creates.
func sidecarLoad(t *testing.T, upstream, mode, topic string) {
	sidecarLoadWith(t, upstream, mode, topic, sidecarResident, true, "--max-memory", sidecarMemory)
}

// sidecarLoadWith runs the load of sidecarLoad through the binary started
// with serveArgs added, and fails if its peak resident memory reaches
// resident. The consumers' Fetch requests must ask for 50 MiB; with
// largeResponses the answers must come near it too, as they do where the
// proxy passes a broker's answer on whole (the single topology answers in
// smaller merged fetches of its own making, so only what the clients ask
// is the load's premise there).
func sidecarLoadWith(t *testing.T, upstream, mode, topic string, resident int64, largeResponses bool, serveArgs ...string) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", upstream,
		"--upstream-ordering", mode, "--log-level", "warn"}, serveArgs...)
	addr, pid := startBinary(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if topic == "" {
		topic = fmt.Sprintf("sidecar-%s-%d", mode, time.Now().UnixNano())
		createSidecarTopic(t, ctx, addr, topic)
	}

	// Each producer writes its own partition; a value carries the
	// partition and its sequence number there.
	produced := make([]atomic.Int64, sidecarPartitions)
	produce := func(part int32, bytes int64) {
		// Uncompressed batches of random values, so that they reach
		// kgo's 1 MB batch size and the responses their 50 MiB.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		rng := rand.New(rand.NewPCG(uint64(part), uint64(produced[part].Load())))
		for n := bytes / sidecarValue; n > 0; n-- {
			v := make([]byte, sidecarValue)
			for i := 0; i < len(v); i += 8 {
				binary.LittleEndian.PutUint64(v[i:], rng.Uint64())
			}
			binary.BigEndian.PutUint32(v, uint32(part))
			binary.BigEndian.PutUint64(v[4:], uint64(produced[part].Load()))
			produced[part].Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("partition %d: %v", part, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Error(err)
		}
	}
	var producers sync.WaitGroup
	runProducers := func(bytes int64) {
		for p := range int32(sidecarPartitions) {
			producers.Add(1)
			go func() {
				defer producers.Done()
				produce(p, bytes)
			}()
		}
	}
	runProducers(sidecarFill)
	producers.Wait()
	if t.Failed() {
		return
	}
	// The consumers start on full partitions while the producers write
	// more.
	runProducers(sidecarMore)
	var (
		consumers sync.WaitGroup
		largest   atomic.Int64 // the largest Fetch response a consumer read
		asked     fetchAsks    // the most a consumer's Fetch request asked for
	)
	for c := range sidecarConsumers {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			if err := sidecarConsume(ctx, addr, topic, produced, &producers, &largest, &asked); err != nil {
				t.Errorf("consumer %d: %v", c, err)
			}
		}()
	}
	producers.Wait()
	consumers.Wait()
	peak, err := peakResident(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s mode: %d records in %d partitions read by %d consumers, Fetch requests asking for up to %.1f MiB (%.1f MiB a partition), largest Fetch response %.1f MiB, peak resident memory %.1f MiB",
		mode, produced[0].Load()+produced[1].Load(), sidecarPartitions, sidecarConsumers,
		float64(asked.max.Load())/(1<<20), float64(asked.partitionMax.Load())/(1<<20),
		float64(largest.Load())/(1<<20), float64(peak)/(1<<20))
	if asked.max.Load() < sidecarFetch || asked.partitionMax.Load() < sidecarFetch {
		t.Errorf("the consumers' Fetch requests asked for at most %d bytes, %d a partition; the load needs them to ask for %d",
			asked.max.Load(), asked.partitionMax.Load(), sidecarFetch)
	}
	if largeResponses && largest.Load() < 40<<20 {
		t.Errorf("the largest Fetch response was %d bytes; the load needs them near 50 MiB", largest.Load())
	}
	if peak >= resident {
		t.Errorf("peak resident memory %.1f MiB, above %d MiB", float64(peak)/(1<<20), resident>>20)
	}
}

// sidecarConsume reads every partition of topic from its start until it
// has every record the producers wrote, checking that each partition's
// sequence numbers come one after the other; produced counts them, final
// once producers are done. It records in largest the largest Fetch
// response it read, and in asked the most its Fetch requests asked for.
func sidecarConsume(ctx context.Context, addr, topic string, produced []atomic.Int64, producers *sync.WaitGroup, largest *atomic.Int64, asked *fetchAsks) error {
	var dialer net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(sidecarFetch), kgo.FetchMaxPartitionBytes(sidecarFetch),
		kgo.WithHooks(fetchSizes{largest}),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return &askedConn{Conn: c, asked: asked}, nil
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	done := make(chan struct{})
	go func() {
		producers.Wait()
		close(done)
	}()
	next := make([]int64, len(produced))
	for {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		all := true
		for p := range next {
			all = all && next[p] == produced[p].Load()
		}
		if finished && all {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("read %v of %v records per partition before the deadline", next, loads(produced))
		}
		var bad error
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && bad == nil {
				bad = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		if bad != nil {
			return bad
		}
		fs.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			part, seq := int32(binary.BigEndian.Uint32(r.Value)), int64(binary.BigEndian.Uint64(r.Value[4:]))
			switch {
			case part != r.Partition || len(r.Value) != sidecarValue:
				bad = fmt.Errorf("partition %d: a record written to %d, %d bytes", r.Partition, part, len(r.Value))
			case seq != next[part]:
				bad = fmt.Errorf("partition %d: record %d where %d was next", part, seq, next[part])
			}
			next[part]++
		})
		if bad != nil {
			return bad
		}
	}
}

func loads(v []atomic.Int64) []int64 {
	out := make([]int64, len(v))
	for i := range v {
		out[i] = v[i].Load()
	}
	return out
}

// fetchSizes records the largest Fetch response a client reads.
type fetchSizes struct{ largest *atomic.Int64 }

func (h fetchSizes) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, _ error) {
	if key != 1 {
		return
	}
	for {
		was := h.largest.Load()
		if int64(bytesRead) <= was || h.largest.CompareAndSwap(was, int64(bytesRead)) {
			return
		}
	}
}

// fetchAsks holds the largest sizes the consumers' Fetch requests asked
// for: the response's and a partition's.
type fetchAsks struct{ max, partitionMax atomic.Int64 }

func raise(v *atomic.Int64, to int64) {
	for {
		was := v.Load()
		if to <= was || v.CompareAndSwap(was, to) {
			return
		}
	}
}

// askedConn reads the Fetch requests a client writes on its way to the
// proxy, so the test checks what the client asked rather than what it
// was configured with.
type askedConn struct {
	net.Conn
	asked   *fetchAsks
	pending []byte // written bytes not yet a whole request
}

func (c *askedConn) Write(b []byte) (int, error) {
	c.pending = append(c.pending, b...)
	for len(c.pending) >= 4 {
		size := int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < 4+size {
			break
		}
		c.fetchRequest(c.pending[4 : 4+size])
		c.pending = c.pending[4+size:]
	}
	return c.Conn.Write(b)
}

// fetchRequest raises c.asked to what frame, a request without its size,
// asks for if it is a Fetch request.
func (c *askedConn) fetchRequest(frame []byte) {
	if len(frame) < 10 || binary.BigEndian.Uint16(frame) != 1 {
		return
	}
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	body := frame[8:] // past the key, version and correlation ID
	if n := int16(binary.BigEndian.Uint16(body)); n > 0 {
		body = body[2+int(n):]
	} else {
		body = body[2:]
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if req.IsFlexible() {
		// The header's tagged fields: kgo writes none.
		if len(body) == 0 || body[0] != 0 {
			return
		}
		body = body[1:]
	}
	if err := req.ReadFrom(body); err != nil {
		return
	}
	raise(&c.asked.max, int64(req.MaxBytes))
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			raise(&c.asked.partitionMax, int64(p.PartitionMaxBytes))
		}
	}
}

// createSidecarTopic creates topic through the proxy at addr, one log
// segment holding all the records of a partition.
func createSidecarTopic(t *testing.T, ctx context.Context, addr, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, sidecarPartitions, 1
	// Kafka reads a partition's part of a fetch from one log segment:
	// segments larger than a partition's records let a response reach
	// 50 MiB (testenv's brokers roll them at 16 MiB).
	rc := kmsg.NewCreateTopicsRequestTopicConfig()
	rc.Name, rc.Value = "segment.bytes", kmsg.StringPtr(strconv.Itoa(256<<20))
	rt.Configs = append(rt.Configs, rc)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Topics {
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("creating %s: error %d %s", topic, r.ErrorCode, strings.TrimSpace(msg))
		}
	}
}
