package proxy_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/config"
)

// TestSingleProduceSpliced: a producer writes records of 64 KiB to six
// partitions led by three brokers through the single endpoint, in both
// ordering modes. From a plaintext client to plaintext brokers, large
// requests are peeked at, their large record sets left in the socket,
// and spliced to the brokers; to brokers behind TLS they are peeked at
// the same, then read into the copy (nothing splices to TLS) and written
// from it; from a TLS client they are read. Each way a consumer reads
// every record back, in order, unchanged.
func TestSingleProduceSpliced(t *testing.T) {
	for _, side := range []string{"plaintext", "tls", "upstream-tls"} {
		for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
			t.Run(side+"/"+string(mode), func(t *testing.T) {
				const topic, partitions = "spliced", 6
				k := newPKI(t)
				kopts := []kfake.Opt{kfake.SeedTopics(partitions, topic)}
				if side == "upstream-tls" {
					kopts = append(kopts, kfake.TLS(k.tlsConfig(t, "broker")))
				}
				kc := newCluster(t, kopts...)
				spreadLeaders(t, kc, topic, partitions)
				var opts []kgo.Opt
				p := startSingle(t, mode, kc.ListenAddrs(), func(c *config.Config) {
					switch side {
					case "tls":
						c.TLSCert, c.TLSKey = k.files(t, "proxy", "127.0.0.1")
						opts = append(opts, kgo.DialTLSConfig(k.tlsConfig(t, "")))
					case "upstream-tls":
						c.UpstreamTLSCA = k.caFile
					}
				})
				// Batches of four records: a dozen requests or so.
				opts = append(opts, kgo.SeedBrokers(p.Addr()), kgo.ProducerBatchMaxBytes(260<<10))
				produceLarge(t, testContext(t, 90*time.Second), topic, partitions, 40, opts...)
				peeks, splices := p.ProducePeeks(), p.ProduceSplices()
				switch {
				case side == "tls" && peeks+splices != 0:
					t.Fatalf("a TLS client's requests peeked at %d times, spliced %d", peeks, splices)
				case side == "upstream-tls" && (peeks == 0 || splices != 0):
					t.Fatalf("to brokers behind TLS: %d requests peeked at, %d spliced; want some and none", peeks, splices)
				case side == "plaintext" && splices == 0:
					t.Fatal("no Produce request was spliced")
				}
				t.Logf("%d Produce requests peeked at, %d spliced", peeks, splices)
				waitMemoryFree(t, p)
			})
		}
	}
}

// TestSingleSplicedACL: with an ACL file that lets the client write topic
// a and not b, large Produce requests through the single endpoint, sent
// one after another on one connection as a producer pipelines them, are
// spliced where they can be, in both ordering modes: every partition of
// a answered and written, every one of b refused and never written, and
// the records the brokers hold are the client's, byte for byte.
func TestSingleSplicedACL(t *testing.T) {
	const parts, size = 6, 200 << 10
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.SeedTopics(parts, "a", "b"))
			spreadLeaders(t, kc, "a", parts)
			spreadLeaders(t, kc, "b", parts)
			p, _, _, _ := aclProxy(t, kc, config.TopologySingle, mode, aclTestFile(authz.Anonymous, ""))
			reqs := []*kmsg.ProduceRequest{
				bigProduce(parts, size, "a"), bigProduce(parts, size, "a"), bigProduce(parts, size, "a", "b"),
				bigProduce(parts, size, "b"), bigProduce(parts, size, "a"), bigProduce(parts, size, "a"),
			}
			got := sendProduces(t, p.Addr(), nil, reqs...)
			for i, req := range reqs {
				for _, rt := range req.Topics {
					want := int16(0)
					if rt.Topic == "b" {
						want = acl.TopicAuthorizationFailed
					}
					if len(got[i][rt.Topic]) != parts {
						t.Fatalf("request %d: %s answered for %d partitions: %v", i, rt.Topic, len(got[i][rt.Topic]), got[i])
					}
					for part, code := range got[i][rt.Topic] {
						if code != want {
							t.Fatalf("request %d: %s/%d code %d, want %d", i, rt.Topic, part, code, want)
						}
					}
				}
			}
			if n := p.ProduceSplices(); n == 0 {
				t.Fatal("no Produce request was spliced")
			}
			ctx := testContext(t, 30*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumeTopics("a", "b"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			want := bytes.Repeat([]byte("v"), size)
			for read := 0; read < 5*parts; {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("after %d records: %v", read, err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if r.Topic != "a" || !bytes.Equal(r.Value, want) {
						t.Fatalf("%s/%d offset %d: not a record the client wrote to a", r.Topic, r.Partition, r.Offset)
					}
					read++
				})
			}
		})
	}
}

// TestSingleSplicedNothingSent: large Produce requests peeked at whose
// split sends nothing (a topic the cluster does not have), between ones
// that are spliced, on one connection: each is answered, in order, and
// the connection goes on.
func TestSingleSplicedNothingSent(t *testing.T) {
	const parts, size = 6, 200 << 10
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.SeedTopics(parts, "a"))
			spreadLeaders(t, kc, "a", parts)
			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			reqs := []*kmsg.ProduceRequest{
				bigProduce(parts, size, "a"), bigProduce(parts, size, "nope"), bigProduce(parts, size, "a"),
				bigProduce(parts, size, "nope"), bigProduce(parts, size, "a"),
			}
			got := sendProduces(t, p.Addr(), nil, reqs...)
			for i, req := range reqs {
				topic := req.Topics[0].Topic
				if len(got[i][topic]) != parts {
					t.Fatalf("request %d: %s answered for %d partitions: %v", i, topic, len(got[i][topic]), got[i])
				}
				for part, code := range got[i][topic] {
					if (code == 0) != (topic == "a") {
						t.Fatalf("request %d: %s/%d code %d", i, topic, part, code)
					}
				}
			}
			if n := p.ProduceSplices(); n == 0 {
				t.Fatal("no Produce request was spliced")
			}
		})
	}
}
