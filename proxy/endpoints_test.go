package proxy_test

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// scriptedUpstream accepts one connection and answers each request with
// the body answer makes for it (the n-th request, from 0); it sends each
// body on sent before writing it.
func scriptedUpstream(t *testing.T, sent chan<- []byte, answer func(n int, h wire.RequestHeader) []byte) string {
	t.Helper()
	return scriptedUpstreamFrames(t, 1, sent, func(n int, h wire.RequestHeader, _ []byte) []byte { return answer(n, h) })
}

// scriptedUpstreamFrames is scriptedUpstream for conns connections, each
// served on its own, whose answer sees the request's frame (prefix
// included) too; n counts the requests of each connection.
func scriptedUpstreamFrames(t *testing.T, conns int, sent chan<- []byte, answer func(n int, h wire.RequestHeader, frame []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	serve := func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var lb [4]byte
		for n := 0; ; n++ {
			buf, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
			if err != nil {
				return
			}
			h, err := wire.ParseRequestHeader(buf.B)
			if err != nil {
				return
			}
			body := answer(n, h, buf.B)
			sent <- body
			out := wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), func(b []byte) []byte { return append(b, body...) })
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
	go func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// readFlexibleResponse reads response i, which must have correlation id
// corr and a flexible header, from c: its frame and its body.
func readFlexibleResponse(t *testing.T, c net.Conn, lb *[4]byte, i int, corr int32) (*wire.Buf, []byte) {
	t.Helper()
	buf, err := wire.ReadFrame(c, lb, wire.MinResponseFrame, 1<<30)
	if err != nil {
		t.Fatalf("response %d: %v", i, err)
	}
	if got := wire.ResponseCorrelation(buf.B); got != corr {
		t.Fatalf("response %d: correlation id %d, want %d", i, got, corr)
	}
	off, err := wire.ResponseBody(buf.B, true)
	if err != nil {
		t.Fatal(err)
	}
	return buf, buf.B[off:]
}

// endpointsUpstream answers Produce and Fetch requests: the first two
// responses carry no KIP-951 endpoints, the later ones do.
func endpointsUpstream(t *testing.T, sent chan<- []byte) string {
	return scriptedUpstream(t, sent, func(n int, h wire.RequestHeader) []byte {
		withEndpoints := n >= 2
		if h.Key == 0 {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = h.Version
			resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0, BaseOffset: int64(n)}}}}
			if withEndpoints {
				resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 1, Host: "10.9.9.9", Port: 9999}}
			}
			return resp.AppendTo(nil)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = h.Version
		resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: bytes.Repeat([]byte{7}, 5000)}}}}
		if withEndpoints {
			resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "10.9.9.9", Port: 9999}}
		}
		return resp.AppendTo(nil)
	})
}

// TestLargeResponsesStreamed pipelines Fetch v15 requests whose responses
// are large enough to be streamed from the upstream socket to the client
// socket: each arrives whole, in order, with the client's correlation id.
// With splicing off they are read whole instead, and arrive the same.
func TestLargeResponsesStreamed(t *testing.T) {
	for _, tc := range []struct {
		mode   config.Ordering
		splice bool
	}{{config.OrderingConnection, true}, {config.OrderingNone, true}, {config.OrderingConnection, false}} {
		name := string(tc.mode)
		m := metrics.New()
		opts := []proxy.Option{proxy.WithMetrics(m)}
		if !tc.splice {
			name += "-nosplice"
			opts = append(opts, proxy.WithoutSplice())
		}
		mode := tc.mode
		t.Run(name, func(t *testing.T) {
			const n = 6
			sent := make(chan []byte, n)
			up := scriptedUpstream(t, sent, func(i int, h wire.RequestHeader) []byte {
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = h.Version
				size := 300 << 10
				if i%3 == 2 {
					size = 100 // small ones are read, not streamed
				}
				resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: int32(i), RecordBatches: bytes.Repeat([]byte{byte(i + 1)}, size)}}}}
				return resp.AppendTo(nil)
			})
			p := startProxy(t, mode, []string{up}, nil, opts...)
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			var out []byte
			for i := range n {
				req := kmsg.NewPtrFetchRequest()
				req.Version = 15
				out = append(out, kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(1000+i))...)
			}
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			var lb [4]byte
			for i := range n {
				buf, body := readFlexibleResponse(t, c, &lb, i, int32(1000+i))
				if !bytes.Equal(body, <-sent) {
					t.Fatalf("response %d differs from what the upstream sent", i)
				}
				wire.Put(buf)
			}
			// Four of the six are large; each streamed unless an
			// earlier response was still owed when it arrived.
			least := 0.0
			if tc.splice {
				least = 1
			}
			got := streamedCounter(t, m, metrics.StreamedResponse, least)
			if tc.splice && (got < 1 || got > 4) || !tc.splice && got != 0 {
				t.Fatalf("%v responses streamed (splicing %v)", got, tc.splice)
			}
		})
	}
}

// TestEndpointsRewrittenOthersForwardedAsRead: a Produce or Fetch response
// without endpoints reaches the client byte for byte as the upstream sent
// it; one with endpoints names the proxy's listener for the node instead.
func TestEndpointsRewrittenOthersForwardedAsRead(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			sent := make(chan []byte, 8)
			p := startProxy(t, mode, []string{endpointsUpstream(t, sent)}, nil)
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			reqs := []kmsg.Request{}
			for range 2 {
				prod := kmsg.NewPtrProduceRequest()
				prod.Version = 11
				prod.Acks = 1
				prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{1}}}}}
				fetch := kmsg.NewPtrFetchRequest()
				fetch.Version = 16
				reqs = append(reqs, prod, fetch)
			}
			var lb [4]byte
			for i, req := range reqs {
				corr := int32(100 + i)
				if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
					t.Fatal(err)
				}
				_, body := readFlexibleResponse(t, c, &lb, i, corr)
				upstream := <-sent
				resp := req.ResponseKind()
				resp.SetVersion(req.GetVersion())
				if err := resp.ReadFrom(body); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				var hosts []string
				switch r := resp.(type) {
				case *kmsg.ProduceResponse:
					for _, b := range r.Brokers {
						hosts = append(hosts, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
					}
				case *kmsg.FetchResponse:
					for _, b := range r.Brokers {
						hosts = append(hosts, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
					}
				}
				if i < 2 {
					if len(hosts) != 0 {
						t.Fatalf("request %d: endpoints %v where the upstream sent none", i, hosts)
					}
					if !bytes.Equal(body, upstream) {
						t.Fatalf("request %d: a response without endpoints was changed on the way", i)
					}
					continue
				}
				if len(hosts) != 1 || hosts[0] == "10.9.9.9:9999" {
					t.Fatalf("request %d: endpoints %v not rewritten", i, hosts)
				}
				nc, err := net.DialTimeout("tcp", hosts[0], 5*time.Second)
				if err != nil {
					t.Fatalf("request %d: the rewritten endpoint %s is not a proxy listener: %v", i, hosts[0], err)
				}
				nc.Close()
			}
		})
	}
}

// TestStreamedFetchEndpoints: large Fetch v16-v18 responses stream
// through a walk of their body, and the KIP-951 endpoints that end them
// are rewritten in the length they arrived in. The backend names its
// nodes at hosts as long as the proxy's (rewritten in place), longer
// (rewritten and padded) and shorter (the rewritten endpoints do not fit:
// replaced by a filler, so the client sees none). Through every proxy of
// the mutation tests (spliced, copied, clients over TLS), each response
// arrives in order, as long as it was sent, its records byte for byte as
// sent, and names no address but the proxy's listeners: each endpoint
// one the client can dial, or none where they could not fit a stream.
func TestStreamedFetchEndpoints(t *testing.T) {
	hosts := []string{"127.0.0.1", "broker-0.kafka.upstream.internal", "10.0.0.9"}
	for _, tc := range mutationCases {
		t.Run(tc.name, func(t *testing.T) {
			const n = 9
			sent := make(chan []byte, n)
			up := scriptedUpstream(t, sent, func(i int, h wire.RequestHeader) []byte {
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = h.Version
				for p := range 3 {
					tp := kmsg.NewFetchResponseTopicPartition()
					tp.Partition = int32(p)
					tp.HighWatermark = int64(i)
					tp.RecordBatches = bytes.Repeat([]byte{byte(i*3 + p)}, 20<<10*(p+1))
					resp.Topics = append(resp.Topics, kmsg.FetchResponseTopic{TopicID: [16]byte{byte(i)}, Partitions: []kmsg.FetchResponseTopicPartition{tp}})
				}
				for id := range int32(2) {
					resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: id, Host: hosts[i%3], Port: 9092 + id})
				}
				return resp.AppendTo(nil)
			})
			m := metrics.New()
			tc.opts = append(tc.opts[:len(tc.opts):len(tc.opts)], proxy.WithMetrics(m))
			_, dial := tc.start(t, up, nil)
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			var out []byte
			for i := range n {
				req := kmsg.NewPtrFetchRequest()
				req.Version = int16(16 + i%3)
				out = append(out, kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(500+i))...)
			}
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			// Without splicing, responses are read whole instead.
			streamed := !strings.HasSuffix(tc.name, "/copied")
			var lb [4]byte
			for i := range n {
				buf, body := readFlexibleResponse(t, c, &lb, i, int32(500+i))
				upstream := <-sent
				want := kmsg.NewPtrFetchResponse()
				want.Version = int16(16 + i%3)
				if err := want.ReadFrom(upstream); err != nil {
					t.Fatal(err)
				}
				got := kmsg.NewPtrFetchResponse()
				got.Version = want.Version
				if err := got.ReadFrom(body); err != nil {
					t.Fatalf("response %d does not parse: %v", i, err)
				}
				for ti := range want.Topics {
					w, g := want.Topics[ti].Partitions[0], got.Topics[ti].Partitions[0]
					if !bytes.Equal(w.RecordBatches, g.RecordBatches) || w.HighWatermark != g.HighWatermark {
						t.Fatalf("response %d: partition %d differs from what the upstream sent", i, ti)
					}
				}
				for _, b := range got.Brokers {
					addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
					nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil || b.Host != "127.0.0.1" {
						t.Fatalf("response %d: node %d named at %s, not a proxy listener (%v)", i, b.NodeID, addr, err)
					}
					nc.Close()
				}
				dropped := streamed && hosts[i%3] == "10.0.0.9"
				switch {
				case dropped && len(got.Brokers) != 0:
					t.Fatalf("response %d: %d endpoints where they cannot fit a stream", i, len(got.Brokers))
				case !dropped && len(got.Brokers) != 2:
					t.Fatalf("response %d: %d endpoints, the upstream sent 2", i, len(got.Brokers))
				case streamed && len(body) != len(upstream):
					t.Fatalf("response %d: streamed in %d bytes, sent in %d", i, len(body), len(upstream))
				}
				wire.Put(buf)
			}
			if streamed {
				if got := streamedCounter(t, m, metrics.StreamedResponseScanned, 1); got < 1 {
					t.Fatalf("%v responses streamed through a walk", got)
				}
			}
		})
	}
}
