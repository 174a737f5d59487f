package proxy_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
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
	k := newPKI(t)
	cert, key := k.files(t, "proxy", "127.0.0.1")
	file := filepath.Join(t.TempDir(), "audit.log")
	cfg := config.Default()
	cfg.AuditFile, cfg.AuditDataPath = file, dataPath
	b := budget.New(cfg.Memory())
	trail, err := audit.FromConfig(&cfg, audit.NewSource("test"), b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { trail.Shutdown(context.Background()) }) })
	p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) {
		c.AuditFile, c.AuditDataPath = file, dataPath
		if secure {
			c.TLSCert, c.TLSKey = cert, key
		}
	}, proxy.WithBudget(b), proxy.WithRecorder(trail))

	nc, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if secure {
		cfg := k.tlsConfig(t, "")
		cfg.ServerName = "127.0.0.1"
		nc = tls.Client(nc, cfg)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))

	// records[i][p]: the records request i writes to partition p, in one
	// batch of 2 KiB values, so that every request is over 32 KiB.
	var records [requests][partitions]int
	var sent [partitions]int64 // the bytes of each partition's batches
	exchange := func(corr int32, batches func(p int) []byte) *kmsg.ProduceResponse {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
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

	ctx := testContext(t, 10*time.Second)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	once.Do(func() { err = trail.Shutdown(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	var produces []auditEvent
	for _, e := range readAuditFile(t, file) {
		if e.APIKey == "Produce" {
			produces = append(produces, e)
		}
	}
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
