package proxy_test

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// bigProduce is a Produce v9 writing, to each topic, one record of size
// bytes to each of partitions 0 to parts-1.
func bigProduce(parts int32, size int, topics ...string) *kmsg.ProduceRequest {
	var req *kmsg.ProduceRequest
	for _, topic := range topics {
		for p := range parts {
			one := pipeprobe.NewProduce(pipeprobe.ProduceSpec{
				Topic: topic, Partition: p, Value: []byte(strings.Repeat("v", size)), Timestamp: time.Now().UnixMilli(),
				Version: 9, Acks: -1, Timeout: 5 * time.Second,
			})
			switch {
			case req == nil:
				req = one
			case req.Topics[len(req.Topics)-1].Topic == topic:
				last := &req.Topics[len(req.Topics)-1]
				last.Partitions = append(last.Partitions, one.Topics[0].Partitions...)
			default:
				req.Topics = append(req.Topics, one.Topics...)
			}
		}
	}
	return req
}

// sendProduces writes reqs on one new connection to addr, over TLS when
// cfg is not nil, their correlation ids numbered one by one as most
// clients number them, and returns each answer's codes by topic and
// partition.
func sendProduces(t *testing.T, addr string, cfg *tls.Config, reqs ...*kmsg.ProduceRequest) []map[string]map[int32]int16 {
	t.Helper()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.Dial("tcp", addr, cfg)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var all []map[string]map[int32]int16
	for i, req := range reqs {
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(i+1))); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := append(size[:], make([]byte, binary.BigEndian.Uint32(size[:]))...)
		if _, err := io.ReadFull(c, frame[4:]); err != nil {
			t.Fatal(err)
		}
		off, err := wire.ResponseBody(frame, req.IsFlexible())
		if err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.Version)
		if err := resp.ReadFrom(frame[off:]); err != nil {
			t.Fatal(err)
		}
		codes := map[string]map[int32]int16{}
		for _, rt := range resp.Topics {
			codes[rt.Topic] = map[int32]int16{}
			for _, rp := range rt.Partitions {
				codes[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		all = append(all, codes)
	}
	return all
}

// TestACLLargeProduceStreams: with an ACL file, a large Produce to one
// topic the client may write streams as it does without ACLs, plaintext
// or over TLS, in both ordering modes; one to a topic it may not write is
// refused, every partition TOPIC_AUTHORIZATION_FAILED, and nothing of it
// reaches the upstream; one naming both topics is read whole and served
// in part, as before.
func TestACLLargeProduceStreams(t *testing.T) {
	const parts, size = 6, 700 << 10 // over 4 MiB, each batch under kfake's 1 MiB
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, overTLS := range []bool{false, true} {
			name := string(mode)
			if overTLS {
				name += "/tls"
			}
			t.Run(name, func(t *testing.T) {
				kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, "a", "b"))
				var cfg *tls.Config
				var cert, key string
				if overTLS {
					k := newPKI(t)
					cert, key = k.files(t, "proxy", "127.0.0.1")
					cfg = k.tlsConfig(t, "")
				}
				path := filepath.Join(t.TempDir(), "acls.yaml")
				if err := os.WriteFile(path, []byte(aclTestFile(authz.Anonymous, "")), 0o600); err != nil {
					t.Fatal(err)
				}
				m := metrics.New()
				g, err := authz.New(path, acl.Options{}, m, nil)
				if err != nil {
					t.Fatal(err)
				}
				p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) {
					c.Topology = config.TopologyPorts
					c.TLSCert, c.TLSKey = cert, key
				}, proxy.WithMetrics(m), proxy.WithAuthorization(g))
				ctx := testContext(t, 30*time.Second)
				kind := metrics.StreamedRequestSpliced
				if mode == config.OrderingNone {
					kind = metrics.StreamedRequestScanned
				}
				streamed := func() float64 { return counter(t, m, metrics.NameStreamed, "kind", string(kind)) }
				want := func(what string, got map[string]map[int32]int16, topics map[string]int16) {
					t.Helper()
					for topic, code := range topics {
						if len(got[topic]) != parts {
							t.Fatalf("%s: %s answered for %d partitions, want %d: %v", what, topic, len(got[topic]), parts, got)
						}
						for part, c := range got[topic] {
							if c != code {
								t.Fatalf("%s: %s/%d code %d, want %d", what, topic, part, c, code)
							}
						}
					}
					if len(got) != len(topics) {
						t.Fatalf("%s: answered topics %v, want %v", what, got, topics)
					}
				}

				// Alone on a connection, then numbered on one, as a
				// producer sends them: the second allowed request goes
				// upstream unread, head and all; those after the denied
				// ones are read from their heads again.
				want("allowed", sendProduces(t, p.Addr(), cfg, bigProduce(parts, size, "a"))[0], map[string]int16{"a": 0})
				if n := streamedCounter(t, m, kind, 1); n != 1 {
					t.Fatalf("%v requests streamed as %s, want the allowed one", n, kind)
				}
				if n := upstreamRecords(t, ctx, kc, "a"); n != 1 {
					t.Fatalf("topic a holds %d records upstream, want 1", n)
				}
				want("denied", sendProduces(t, p.Addr(), cfg, bigProduce(parts, size, "b"))[0], map[string]int16{"b": acl.TopicAuthorizationFailed})
				got := sendProduces(t, p.Addr(), cfg,
					bigProduce(parts, size, "a"), bigProduce(parts, size, "a"), bigProduce(parts, size, "b"),
					bigProduce(parts, size, "a", "b"), bigProduce(parts, size, "a"))
				for i, w := range []map[string]int16{{"a": 0}, {"a": 0}, {"b": acl.TopicAuthorizationFailed}, {"a": 0, "b": acl.TopicAuthorizationFailed}, {"a": 0}} {
					want(fmt.Sprintf("numbered request %d", i), got[i], w)
				}
				unread := 0.0
				if !overTLS {
					unread = 1
				}
				if n := streamedCounter(t, m, metrics.StreamedRequestUnread, unread); n != unread {
					t.Fatalf("%v requests went upstream unread, want %v", n, unread)
				}
				if n := streamed(); n != 4-unread {
					t.Fatalf("%v requests streamed as %s, want %v", n, kind, 4-unread)
				}
				if n := upstreamRecords(t, ctx, kc, "b"); n != 0 {
					t.Fatalf("topic b holds %d records upstream: a denied write was forwarded", n)
				}
				if n := upstreamRecords(t, ctx, kc, "a"); n != 5 {
					t.Fatalf("topic a holds %d records upstream, want 5", n)
				}
			})
		}
	}
}

// TestACLLargeFetchFixed: a large Fetch answer whose request had a denied
// topic left out is not streamed past its Fix: the denied topic's
// TOPIC_AUTHORIZATION_FAILED is there beside the allowed topic's records.
// One that denied nothing streams.
func TestACLLargeFetchFixed(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "b", "c"))
			ctx := testContext(t, 30*time.Second)
			// Written around the proxy: the rules let the client read b,
			// not write it.
			if _, err := pipeprobe.Do(ctx, kc.ListenAddrs()[0], bigProduce(1, 256<<10, "b")); err != nil {
				t.Fatal(err)
			}
			p, _, _, m := aclProxy(t, kc, config.TopologyPorts, mode, aclTestFile(authz.Anonymous, ""))
			fetch := fetchReq("c", "b")
			resp, err := pipeprobe.Do(ctx, p.Addr(), fetch)
			if err != nil {
				t.Fatal(err)
			}
			codes, size := map[string]int16{}, 0
			for _, ft := range resp.(*kmsg.FetchResponse).Topics {
				codes[ft.Topic] = ft.Partitions[0].ErrorCode
				size += len(ft.Partitions[0].RecordBatches)
			}
			if size < 256<<10 {
				t.Fatalf("the answer holds %d bytes of records, want b's 256 KiB", size)
			}
			wantCodes(t, "Fetch c, b", codes, map[string]int16{"b": 0, "c": acl.TopicAuthorizationFailed})
			if n := counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedResponse)); n != 0 {
				t.Fatalf("%v answers streamed past their Fix", n)
			}

			// Nothing denied: the answer streams as without ACLs.
			fetch.Topics = fetch.Topics[1:]
			resp, err = pipeprobe.Do(ctx, p.Addr(), fetch)
			if err != nil {
				t.Fatal(err)
			}
			if ft := resp.(*kmsg.FetchResponse).Topics; len(ft) != 1 || ft[0].Partitions[0].ErrorCode != 0 || len(ft[0].Partitions[0].RecordBatches) < 256<<10 {
				t.Fatalf("Fetch b: %+v, want b's records", ft)
			}
			if n := streamedCounter(t, m, metrics.StreamedResponse, 1); n != 1 {
				t.Fatalf("%v answers streamed, want the allowed Fetch's", n)
			}
		})
	}
}
