package proxy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// countedBatch is a valid record batch (v2) of n records of size-byte
// values.
func countedBatch(n, size int) []byte {
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), PartitionLeaderEpoch: -1}
	for i := range n {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: make([]byte, size)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // a varint of one byte for lengths below 64
		b.Records = rec.AppendTo(b.Records)
	}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32c(raw[21:]))
	return b.AppendTo(nil)
}

// TestAuditProduceCountsMatchBroker: Produce requests of 32 KiB and more
// (which stream without the audit), over TLS, several partitions each and
// several requests per partition, recorded request by request and in a
// summary, in connection and none mode: per partition the records and
// bytes sent and, per request, the first and last offsets are those the
// broker stored. Over plaintext TCP the same requests stream, counted as
// their partitions pass (in connection mode too, because audited): the
// same. A request of two batches in a partition, which the broker
// refuses, carries the refusal and no offset; counted as it streams, its
// bytes alone.
func TestAuditProduceCountsMatchBroker(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, dataPath := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
			for _, secure := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/tls=%v", mode, dataPath, secure)
				t.Run(name, func(t *testing.T) { testAuditProduceCounts(t, mode, dataPath, secure) })
			}
		}
	}
}

func testAuditProduceCounts(t *testing.T, mode config.Ordering, dataPath string, secure bool) {
	const partitions, requests = 3, 3
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	p, clientTLS, stop := auditFileProxy(t, kc, mode, config.TopologyPorts, dataPath, secure)
	nc := dialClient(t, p.Addr(), clientTLS)
	defer nc.Close()

	// records[i][p]: the records request i writes to partition p, in one
	// batch of 2 KiB values, so that every request is over 32 KiB.
	var records [requests][partitions]int
	var sent [partitions]int64 // the bytes of each partition's batches
	exchange := func(corr int32, batches func(p int) []byte) *kmsg.ProduceResponse {
		frame := countedProduce(t, corr, -1, partitions, batches)
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			t.Fatalf("answer to %d, want %d", got, corr)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		// Past the correlation id and the header's tags (v9 is flexible).
		if err := resp.ReadFrom(body[5:]); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
			t.Fatalf("request %d answered %+v", corr, resp)
		}
		return resp
	}
	for i := range requests {
		resp := exchange(int32(i+1), func(p int) []byte {
			records[i][p] = 6 + 2*p + i
			batch := countedBatch(records[i][p], 2<<10)
			sent[p] += int64(len(batch))
			return batch
		})
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("request %d, partition %d: %v", i, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
	}
	// Two batches in partition 0: a broker takes one per partition.
	refused := exchange(requests+1, func(p int) []byte {
		if p == 0 {
			return append(countedBatch(4, 2<<10), countedBatch(5, 2<<10)...)
		}
		return countedBatch(7, 2<<10)
	})
	refusedCode := int16(0)
	for _, rp := range refused.Topics[0].Partitions {
		if rp.Partition == 0 {
			refusedCode = rp.ErrorCode
		}
	}
	if refusedCode == 0 {
		t.Fatal("two batches in a partition were accepted")
	}
	nc.Close()

	// What the broker stored: every partition from offset 0.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(testContext(t, 10*time.Second), "t")
	if err != nil {
		t.Fatal(err)
	}
	var stored [partitions]int64
	for p := range partitions {
		o, ok := ends.Lookup("t", int32(p))
		if !ok || o.Err != nil {
			t.Fatalf("partition %d: no end offset (%v)", p, o.Err)
		}
		stored[p] = o.Offset
		want := int64(0)
		for i := range requests {
			want += int64(records[i][p])
		}
		if p > 0 {
			want += 7 // the refused request's other partitions
		}
		if stored[p] != want {
			t.Fatalf("partition %d: the broker stored %d records, the requests %d", p, stored[p], want)
		}
	}

	produces := produceEvents(stop())
	twoBatches := int64(len(countedBatch(4, 2<<10)) + len(countedBatch(5, 2<<10)))
	if dataPath == config.AuditDataPathSummary {
		var gotRecords, gotBytes [partitions]int64
		for _, e := range produces {
			for _, r := range e.Resources {
				for _, part := range r.Partitions {
					gotRecords[part.Partition] += part.Records
					gotBytes[part.Partition] += part.Bytes
					if part.First != nil || part.Last != nil {
						t.Errorf("a summary's partition %d has offsets: %+v", part.Partition, part)
					}
				}
			}
		}
		for p := range partitions {
			// The summary counts what the requests held, the refused
			// batches too.
			want, wantBytes := stored[p], sent[p]+int64(len(countedBatch(7, 2<<10)))
			switch {
			case p == 0 && secure:
				want, wantBytes = stored[p]+9, sent[p]+twoBatches
			case p == 0:
				// Streamed: a partition of two batches is not counted.
				want, wantBytes = stored[p], sent[p]+twoBatches
			}
			if gotRecords[p] != want || gotBytes[p] != wantBytes {
				t.Errorf("summary, partition %d: %d records and %d bytes, want %d and %d", p, gotRecords[p], gotBytes[p], want, wantBytes)
			}
		}
		return
	}
	if len(produces) != requests+1 {
		t.Fatalf("%d Produce events, want %d: %+v", len(produces), requests+1, produces)
	}
	var base [partitions]int64
	for i, e := range produces[:requests] {
		if len(e.Resources) != 1 || e.Resources[0].Name != "t" || len(e.Resources[0].Partitions) != partitions {
			t.Fatalf("request %d recorded as %+v", i, e)
		}
		for _, part := range e.Resources[0].Partitions {
			p := part.Partition
			n := int64(records[i][p])
			wantRecords, wantLast := n, base[p]+n-1
			last := int64(-1)
			if part.Last != nil {
				last = *part.Last
			}
			wantBytes := int64(len(countedBatch(int(n), 2<<10)))
			if part.ErrorCode != 0 || part.First == nil || *part.First != base[p] || last != wantLast || part.Records != wantRecords || part.Bytes != wantBytes {
				t.Errorf("request %d, partition %d: %+v, want first %d, last %d, %d records", i, p, part, base[p], wantLast, wantRecords)
			}
			base[p] += n
		}
	}
	for p := range partitions {
		if base[p] != stored[p]-int64(min(p, 1))*7 {
			t.Errorf("partition %d: the events account for %d records, the broker stored %d before the last request", p, base[p], stored[p])
		}
	}
	last := produces[requests]
	for _, part := range last.Resources[0].Partitions {
		// Read whole (TLS), both batches are counted; streamed, neither:
		// which says the request took the path meant.
		refusedRecords := int64(0)
		if secure {
			refusedRecords = 9
		}
		if part.Partition == 0 && (part.ErrorCode != refusedCode || part.First != nil || part.Last != nil || part.Bytes != twoBatches || part.Records != refusedRecords) {
			t.Errorf("the refused partition recorded as %+v, want error %d, no offsets, %d records", part, refusedCode, refusedRecords)
		}
		if part.Partition > 0 && (part.First == nil || *part.First != base[part.Partition] || part.Last == nil || *part.Last != stored[part.Partition]-1) {
			t.Errorf("partition %d of the last request: %+v, want offsets %d to %d", part.Partition, part, base[part.Partition], stored[part.Partition]-1)
		}
	}
}

// TestAuditAcksZeroCounted: acks=0 Produce requests of 32 KiB and more
// through a connection-mode proxy, recorded request by request and in a
// summary, have their partitions, records and bytes counted: between
// plain TCP sockets they stream, counted as their partitions pass, acks
// left 0; over TLS, and in the single topology, they are read whole. First, on a connection written by
// hand, acks=0 requests followed by a Metadata request, whose answer is
// the first the client reads: none is sent for acks=0. Then a franz-go
// producer with acks=0. Per partition, the events count the records and
// the bytes of batches the broker stored, each request's event names its
// partitions with their records and bytes and no offsets, and the records
// come back in the order produced.
func TestAuditAcksZeroCounted(t *testing.T) {
	for _, dataPath := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
		for _, tc := range []struct {
			topology config.Topology
			secure   bool
		}{{config.TopologyPorts, false}, {config.TopologyPorts, true}, {config.TopologySingle, false}} {
			t.Run(fmt.Sprintf("%s/%s/tls=%v", dataPath, tc.topology, tc.secure), func(t *testing.T) {
				testAuditAcksZeroCounted(t, dataPath, tc.topology, tc.secure)
			})
		}
	}
}

func testAuditAcksZeroCounted(t *testing.T, dataPath string, topology config.Topology, secure bool) {
	const partitions, handRequests, handRecords, rounds = 3, 2, 16, 6
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	m := metrics.New()
	p, clientTLS, stop := auditFileProxy(t, kc, config.OrderingConnection, topology, dataPath, secure, proxy.WithMetrics(m))

	nc := dialClient(t, p.Addr(), clientTLS)
	var frames []byte
	for i := range handRequests {
		frames = append(frames, countedProduce(t, int32(i+1), 0, partitions, func(int) []byte { return countedBatch(handRecords, 2<<10) })...)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 1
	frames = append(frames, kmsg.NewRequestFormatter().AppendRequest(nil, meta, handRequests+1)...) // AppendRequest writes the length at dst[0:4]
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		t.Fatalf("%v\n%s", err, p.log.String())
	}
	if corr := int32(binary.BigEndian.Uint32(head[4:])); corr != handRequests+1 {
		t.Fatalf("the first response read answers request %d, want the Metadata request %d: acks=0 was answered", corr, handRequests+1)
	}
	nc.Close()

	// values[p]: what the producer writes to partition p, in order; each
	// request holds at least one record of 33 KiB or more.
	var values [partitions][][]byte
	opts := []kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchMaxBytes(4 << 20), kgo.ProducerLinger(5 * time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if clientTLS != nil {
		opts = append(opts, kgo.DialTLSConfig(clientTLS))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 60*time.Second)
	for round := range rounds {
		for i := range 2 * partitions {
			part := i % partitions
			v := make([]byte, 33<<10+(round*7+i)*4099)
			rand.Read(v)
			values[part] = append(values[part], v)
			cl.Produce(ctx, &kgo.Record{Partition: int32(part), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	// What the broker stored, read back: the records in order, and per
	// partition the bytes of its batches.
	cl, err = kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var stored, storedBytes [partitions]int64
	var got [partitions][][]byte
	for want := int64(partitions * (handRequests*handRecords + len(values[0]))); stored[0]+stored[1]+stored[2] < want; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d of %d records: %v", stored[0]+stored[1]+stored[2], want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			stored[r.Partition]++
			if stored[r.Partition] > handRequests*handRecords {
				got[r.Partition] = append(got[r.Partition], r.Value)
			}
		})
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "t")
	if err != nil || topics["t"].Err != nil {
		t.Fatalf("topic t: %v, %v", err, topics["t"].Err)
	}
	for part := range partitions {
		if len(got[part]) != len(values[part]) {
			t.Fatalf("partition %d: %d records of the producer's back, %d sent", part, len(got[part]), len(values[part]))
		}
		for i := range values[part] {
			if !bytes.Equal(got[part][i], values[part][i]) {
				t.Fatalf("partition %d, record %d: not the one produced there in that place", part, i)
			}
		}
		fetch := kmsg.NewPtrFetchRequest()
		fetch.MaxBytes, fetch.ReplicaID = 64<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "t", topics["t"].ID // the client sends the broker's version
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = int32(part), 64<<20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		resp, err := fetch.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.HighWatermark != stored[part] {
			t.Fatalf("partition %d fetched: error %d, high watermark %d, want %d", part, rp.ErrorCode, rp.HighWatermark, stored[part])
		}
		storedBytes[part] = int64(len(rp.RecordBatches))
	}

	// From Produce v13 a request names its topic by id, and so does its
	// event.
	topicID := topics["t"].ID
	id := base64.RawURLEncoding.EncodeToString(topicID[:])
	var counted, countedBytes [partitions]int64
	produces := produceEvents(stop())
	for _, e := range produces {
		for _, r := range e.Resources {
			if r.Name != "t" && r.Name != id || len(r.Partitions) == 0 {
				t.Errorf("a Produce event names %+v", e.Resources)
			}
			for _, part := range r.Partitions {
				if part.Records <= 0 || part.Bytes <= 0 || part.First != nil || part.Last != nil || part.ErrorCode != 0 {
					t.Errorf("an acks=0 event's partition %d: %+v, want its records and bytes, no offsets", part.Partition, part)
				}
				counted[part.Partition] += part.Records
				countedBytes[part.Partition] += part.Bytes
			}
		}
	}
	if dataPath == config.AuditDataPathRequest && len(produces) < handRequests+rounds {
		t.Errorf("%d Produce events, want one per request, at least %d", len(produces), handRequests+rounds)
	}
	// Each request took the path meant: streamed and scanned between
	// plain TCP sockets, none spliced whole; otherwise read whole.
	scanned := counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedRequestScanned))
	spliced := counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedRequestSpliced))
	whole := secure || topology == config.TopologySingle
	if whole && scanned+spliced != 0 || !whole && (scanned < handRequests+rounds || spliced != 0) {
		t.Errorf("%v Produce requests streamed and scanned, %v spliced whole", scanned, spliced)
	}
	for part := range partitions {
		if counted[part] != stored[part] || countedBytes[part] != storedBytes[part] {
			t.Errorf("partition %d: the events count %d records and %d bytes, the broker stored %d and %d", part, counted[part], countedBytes[part], stored[part], storedBytes[part])
		}
	}
}

// countedProduce is a Produce request (v9) with acks and correlation id
// corr, of topic "t"'s partitions 0 to partitions-1, each with batches(p),
// long enough to stream (32 KiB or more).
func countedProduce(t *testing.T, corr int32, acks int16, partitions int, batches func(p int) []byte) []byte {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, 5000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	for p := range partitions {
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition, part.Records = int32(p), batches(p)
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("counts")).AppendRequest(nil, req, corr)
	if len(frame) < 32<<10 {
		t.Fatalf("a request of %d bytes would not stream", len(frame))
	}
	return frame
}

// auditFileProxy is auditTrailProxy in topology, speaking TLS to its
// clients when secure, with clientTLS the configuration they dial it with
// (nil otherwise).
func auditFileProxy(t *testing.T, kc *kfake.Cluster, mode config.Ordering, topology config.Topology, dataPath string, secure bool, opts ...proxy.Option) (p *testProxy, clientTLS *tls.Config, stop func() []auditEvent) {
	t.Helper()
	var cert, key string
	if secure {
		k := newPKI(t)
		cert, key = k.files(t, "proxy", "127.0.0.1")
		clientTLS = k.tlsConfig(t, "")
		clientTLS.ServerName = "127.0.0.1"
	}
	p, stop = auditTrailProxy(t, kc, mode, dataPath, func(c *config.Config) {
		c.Topology, c.TLSCert, c.TLSKey = topology, cert, key
	}, opts...)
	return p, clientTLS, stop
}

// dialClient connects to addr, over TLS when clientTLS is not nil, with a
// deadline on every exchange of the test.
func dialClient(t *testing.T, addr string, clientTLS *tls.Config) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if clientTLS != nil {
		nc = tls.Client(nc, clientTLS)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return nc
}

// produceEvents are the Produce events among events.
func produceEvents(events []auditEvent) []auditEvent {
	var produces []auditEvent
	for _, e := range events {
		if e.APIKey == "Produce" {
			produces = append(produces, e)
		}
	}
	return produces
}

// BenchmarkAuditStreamedProduce is the audit's own work for a Produce of
// 12 partitions of 64 KiB streamed in None mode, in the two data paths,
// with its partitions counted as they pass and without (as before they
// were); its MB/s is of the request.
func BenchmarkAuditStreamedProduce(b *testing.B) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	p := startProxy(b, config.OrderingNone, kc.ListenAddrs(), nil)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	topic, rt := kmsg.NewProduceRequestTopic(), kmsg.NewProduceResponseTopic()
	topic.Topic, rt.Topic = "orders", "orders"
	for p := range int32(12) {
		part, rp := kmsg.NewProduceRequestTopicPartition(), kmsg.NewProduceResponseTopicPartition()
		part.Partition, part.Records = p, countedBatch(64, 1<<10)
		rp.Partition, rp.BaseOffset = p, 1000
		topic.Partitions, rt.Partitions = append(topic.Partitions, part), append(rt.Partitions, rp)
	}
	req.Topics, resp.Topics = append(req.Topics, topic), append(resp.Topics, rt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
	respFrame := binary.BigEndian.AppendUint32(nil, 0)
	respFrame = binary.BigEndian.AppendUint32(respFrame, 1)
	respFrame = append(respFrame, 0) // the header's tags
	respFrame = resp.AppendTo(respFrame)
	binary.BigEndian.PutUint32(respFrame, uint32(len(respFrame)-4))
	for _, path := range []string{config.AuditDataPathRequest, config.AuditDataPathSummary} {
		for _, counted := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/counted=%v", path, counted), func(b *testing.B) {
				cfg := &config.Config{Audit: config.Audit{AuditDataPath: path}}
				trail := audit.New(audit.Options{DataPath: audit.DataPath(path)}, audit.NewQueue(audit.QueueOptions{}, &discardSink{}))
				defer trail.Shutdown(context.Background())
				run, err := proxy.AuditExchangeStreamed(p.Proxy, cfg, trail, frame, respFrame, counted)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				for b.Loop() {
					run()
				}
			})
		}
	}
}
