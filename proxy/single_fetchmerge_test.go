package proxy_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/wire"
)

// TestSingleFetchMergedAsVector: a consumer reads, through the single
// endpoint in front of three brokers, records of 64 KiB from six
// partitions led by all three, each partition in order, in both ordering
// modes, with the client on plaintext (the merged answers written as a
// vector) and on TLS (in bounded chunks); the merged answers are the
// vectors.
func TestSingleFetchMergedAsVector(t *testing.T) {
	for _, side := range []string{"plaintext", "tls"} {
		for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
			t.Run(side+"/"+string(mode), func(t *testing.T) {
				const topic, partitions = "vec", 6
				kc := newCluster(t, kfake.SeedTopics(partitions, topic))
				spreadLeaders(t, kc, topic, partitions)
				var opts []kgo.Opt
				var only *onlyProxy
				p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) {
					if side == "tls" {
						k := newPKI(t)
						c.TLSCert, c.TLSKey = k.files(t, "proxy", "127.0.0.1")
						opts = append(opts, kgo.DialTLSConfig(k.tlsConfig(t, "")))
					}
				})
				if side == "plaintext" {
					only = &onlyProxy{addr: p.Addr()}
					opts = append(opts, only.opt())
				}
				opts = append(opts, kgo.SeedBrokers(p.Addr()))
				produceLarge(t, testContext(t, 90*time.Second), topic, partitions, 12, opts...)
				if only != nil {
					only.check(t)
				}
				if n := p.FetchVectors(); n < 1 {
					t.Fatal("no merged Fetch answer was written as a vector")
				} else {
					t.Logf("%d merged Fetch answers written as vectors, %d parts' answers parked, %d merged answers spliced", n, p.FetchParks(), p.FetchPiped())
				}
				// Record sets are parked in pipes and spliced to a
				// plaintext client alone.
				if parks, piped := p.FetchParks(), p.FetchPiped(); side == "plaintext" && (parks < 1 || piped < 1) {
					t.Fatalf("%d answers parked, %d spliced to a plaintext client", parks, piped)
				} else if side == "tls" && parks+piped != 0 {
					t.Fatalf("%d answers parked, %d spliced to a TLS client", parks, piped)
				}
				waitMemoryFree(t, p)
			})
		}
	}
}

// TestSingleFetchVectorHidesAddresses: at every Fetch version from 4, a
// merged answer written as a vector, whose parts carry records of two
// partitions and, from a broker that no longer leads the third, its new
// leader (KIP-951 from v12, with the leader's endpoint from v16), names
// the proxy alone, node 0 at its address, and carries the records
// written.
func TestSingleFetchVectorHidesAddresses(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleFetchVectorHidesAddresses(t, mode) })
	}
}

func testSingleFetchVectorHidesAddresses(t *testing.T, mode config.Ordering) {
	const topic = "hiddenvec"
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	ctx := testContext(t, 60*time.Second)
	value := func(part int32) []byte { return bytes.Repeat([]byte{'a' + byte(part)}, 50_000) }
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, part := range []int32{0, 2} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: value(part)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	host, portStr, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(portStr)
	raw := dialRaw(t, p.Addr())
	maxFetch := int16(-1)
	for _, k := range raw.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 1 {
			maxFetch = k.MaxVersion
		}
	}
	if maxFetch < 16 {
		t.Fatalf("the proxy serves Fetch up to v%d, want 16 at least", maxFetch)
	}
	moved := 0
	for v := int16(4); v <= maxFetch; v++ {
		if err := kc.MoveTopicPartition(topic, 1, (kc.LeaderFor(topic, 1)+1)%3); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest()
		// A minimum no broker's part reaches alone: the answer waits
		// for every part, where it could otherwise go with the parts
		// in (fetchkeep.go), the others' records in a later one.
		req.Version, req.MaxBytes, req.MaxWaitMillis, req.MinBytes, req.SessionEpoch = v, 1<<20, 100, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, kc.TopicInfo(topic).TopicID
		for part := range int32(3) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = part, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		before := p.FetchVectors()
		raw.corr++
		if _, err := raw.c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("hidden")).AppendRequest(nil, req, raw.corr)); err != nil {
			t.Fatal(err)
		}
		body := readResponse(t, raw.c, raw.corr)
		if wire.Flexible(req.Key(), v) {
			body = body[1:]
		}
		if p.FetchVectors() != before+1 {
			t.Fatalf("Fetch v%d: its merged answer was not written as a vector", v)
		}
		eps, _, _, err := readAddressed(1, v, body)
		if err != nil {
			t.Fatalf("Fetch v%d: %v", v, err)
		}
		for _, e := range eps {
			if e.host != host || e.port != int32(port) || e.id != 0 || e.other {
				t.Fatalf("Fetch v%d names node %d at %s:%d; the single endpoint is node 0 at %s", v, e.id, e.host, e.port, p.Addr())
			}
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("Fetch v%d: %v", v, err)
		}
		moved += len(resp.Brokers)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("Fetch v%d: %d topics, want 1 of 3 partitions", v, len(resp.Topics))
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.CurrentLeader.LeaderID > 0 || rp.PreferredReadReplica > 0 {
				t.Fatalf("Fetch v%d partition %d names leader %d, read replica %d", v, rp.Partition, rp.CurrentLeader.LeaderID, rp.PreferredReadReplica)
			}
			if rp.Partition != 1 && (rp.ErrorCode != 0 || !bytes.Contains(rp.RecordBatches, value(rp.Partition))) {
				t.Fatalf("Fetch v%d partition %d: error %d, %d bytes of records, not the record written", v, rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
			}
		}
	}
	if moved < 1 {
		t.Fatal("no merged answer named a moved leader's endpoint: nothing was checked of KIP-951")
	}
	raw.c.Close()
	waitMemoryFree(t, p)
}

// TestSingleFetchVectorFitsWhereACopyCannot: three partitions of about
// 1.5 MB each, led by three brokers, fetched in one request under an 8 MiB
// budget. The parts' answers take 4.5 MB; encoded, the merged answer
// would take 4.5 MB more beside them, which the budget never holds (the
// connection was closed, naming --max-memory); written as a vector it
// needs its head alone, and is answered.
func TestSingleFetchVectorFitsWhereACopyCannot(t *testing.T) {
	const topic, partitions, size, budget = "big", 3, 1_500_000, 8 << 20
	kc := newCluster(t, kfake.SeedTopics(partitions, topic), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4194304"}))
	spreadLeaders(t, kc, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchMaxBytes(2<<20), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for part := range int32(partitions) {
		value := bytes.Repeat([]byte{byte('a' + part)}, size)
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.MaxMemory = budget })
			raw := dialRaw(t, p.Addr())
			req := fetchAll(topic, make([]int64, partitions), 100*time.Millisecond, 1)
			req.MaxBytes = 50 << 20
			for i := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[i].PartitionMaxBytes = 2 << 20
			}
			resp := raw.do(req).(*kmsg.FetchResponse)
			got := 0
			for _, rp := range resp.Topics[0].Partitions {
				if rp.ErrorCode != 0 || !bytes.Contains(rp.RecordBatches, bytes.Repeat([]byte{byte('a' + rp.Partition)}, size)) {
					t.Fatalf("partition %d: error %d, %d bytes of records, not the record written", rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
				}
				got += len(rp.RecordBatches)
			}
			if 2*got <= budget {
				t.Fatalf("%d bytes of records: twice that fits in the budget of %d, nothing is shown", got, budget)
			}
			if p.FetchVectors() != 1 {
				t.Fatalf("%d merged answers written as vectors, want 1", p.FetchVectors())
			}
			if p.FetchCuts() != 0 {
				t.Fatalf("%d answers within max_bytes cut", p.FetchCuts())
			}
			raw.c.Close()
			waitMemoryFree(t, p)
		})
	}
}

// TestSingleFetchSmallRecordSetsAsVector: a merged answer of some 90 KB
// made of 240 record sets of about 380 bytes, from partitions led by three
// brokers. Its records were copied into a merged frame of their own,
// twice their size held at once; a Fetch's room holds no such copy when
// its client takes the answer in pieces (memory.go), so every record set
// is a piece of the vector, and kmsg reads every partition's record in
// the answer.
func TestSingleFetchSmallRecordSetsAsVector(t *testing.T) {
	const topic, partitions, size = "smallsets", 240, 300
	kc := newCluster(t, kfake.SeedTopics(partitions, topic))
	spreadLeaders(t, kc, topic, partitions)
	ctx := testContext(t, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := func(part int32) []byte {
		return []byte(strconv.Itoa(int(part)) + string(bytes.Repeat([]byte{'v'}, size)))
	}
	var rs []*kgo.Record
	for part := range int32(partitions) {
		rs = append(rs, &kgo.Record{Partition: part, Value: value(part)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			raw := dialRaw(t, p.Addr())
			// A minimum no broker's part reaches alone: the answer
			// waits for every part.
			req := fetchAll(topic, make([]int64, partitions), 300*time.Millisecond, 1<<20)
			req.MaxBytes = 50 << 20
			resp := raw.do(req).(*kmsg.FetchResponse)
			got, records := 0, 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 || !bytes.Contains(rp.RecordBatches, value(rp.Partition)) {
						t.Fatalf("partition %d: error %d, %d bytes of records, not the record written", rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
					}
					if len(rp.RecordBatches) >= 1<<10 {
						t.Fatalf("partition %d: a record set of %d bytes; the test is of sets under 1 KiB", rp.Partition, len(rp.RecordBatches))
					}
					got++
					records += len(rp.RecordBatches)
				}
			}
			if got != partitions || records < 64<<10 {
				t.Fatalf("%d partitions, %d bytes of records: want all %d, past 64 KiB", got, records, partitions)
			}
			if p.FetchVectors() != 1 {
				t.Fatalf("%d merged answers written as vectors, want 1", p.FetchVectors())
			}
			raw.c.Close()
			waitMemoryFree(t, p)
		})
	}
}
