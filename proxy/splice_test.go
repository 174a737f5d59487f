package proxy_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestLargeProduceSpliced produces records large enough for the proxy to
// splice their requests between sockets in connection mode, with acks=all
// and acks=0, and reads every byte back, in both modes and with splicing
// turned off, so the spliced and the buffered paths are held to the same
// result.
func TestLargeProduceSpliced(t *testing.T) {
	cases := []struct {
		name string
		mode config.Ordering
		opts []proxy.Option
	}{
		{"connection", config.OrderingConnection, nil},
		{"connection-nosplice", config.OrderingConnection, []proxy.Option{proxy.WithoutSplice()}},
		{"none", config.OrderingNone, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.SeedTopics(2, "big"))
			p := startProxy(t, tc.mode, kc.ListenAddrs(), nil, tc.opts...)
			ctx := testContext(t, 60*time.Second)
			var want [][]byte
			for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.NoAck()} {
				opts := []kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("big"), kgo.RequiredAcks(acks), kgo.ProducerBatchMaxBytes(4 << 20), kgo.RecordPartitioner(kgo.ManualPartitioner())}
				if acks == kgo.NoAck() {
					opts = append(opts, kgo.DisableIdempotentWrite())
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 20; i++ {
					v := make([]byte, 40<<10+i*7919)
					rand.Read(v)
					want = append(want, v)
					if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: v}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				cl.Close()
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var got [][]byte
			for len(got) < len(want) {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("after %d of %d records: %v", len(got), len(want), err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if r.Partition == 0 {
						got = append(got, r.Value)
					}
				})
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d: %d bytes back, %d sent, or different bytes", i, len(got[i]), len(want[i]))
				}
			}
		})
	}
}

// TestSplicedRequestTruncated sends the first part of a large produce
// request and closes: the spliced body is short, so the proxy must close the
// upstream side (its framing is lost) and the client's, with a log line,
// while other connections carry on. In none mode the body streams with its
// partitions scanned on the way.
func TestSplicedRequestTruncated(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) { testSplicedRequestTruncated(t, mode) })
	}
}

// bigProduceFrame is a Produce v9 request (correlation id 5) of one 200 KiB
// batch to big/0: large enough to be spliced.
func bigProduceFrame() []byte {
	return kmsg.NewRequestFormatter().AppendRequest(nil, produceV9("big", -1, largeBatch(200<<10)), 5)
}

func testSplicedRequestTruncated(t *testing.T, mode config.Ordering) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
	p := startProxy(t, mode, kc.ListenAddrs(), nil)
	frame := bigProduceFrame()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	local := c.LocalAddr().String()
	c.Write(frame[:100<<10])
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("read %d bytes (%v); want a close with no response", n, err)
	}
	c.Close()
	p.log.waitFor(t, "client="+local)
	if line := logLine(p.log.String(), "client="+local); !bytes.Contains([]byte(line), []byte("inside a frame")) {
		t.Fatalf("log line %q does not name the truncation", line)
	}

	// The whole request on a new connection succeeds.
	produceOn(t, p.Addr(), frame, 5)
}

// TestSplicedRequestStalls sends the first part of a large produce request
// and stops: the body being spliced must arrive within the read timeout, so
// the proxy closes the connection and logs a read timeout, not an upstream
// failure.
func TestSplicedRequestStalls(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
			p := startProxy(t, mode, kc.ListenAddrs(), func(cfg *config.Config) {
				cfg.ReadTimeout = 300 * time.Millisecond
			})
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			local := c.LocalAddr().String()
			c.Write(bigProduceFrame()[:100<<10])
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
				t.Fatalf("read %d bytes (%v); want a close with no response", n, err)
			}
			p.log.waitFor(t, "client="+local)
			if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "read timeout") {
				t.Fatalf("log line %q does not name the read timeout", line)
			}
		})
	}
}

// TestClientResetMidBody resets the connection inside a large produce
// request whose body is on its way upstream (spliced, or scanned in None
// mode): the proxy ends the connection at once and logs the client's
// failure, not the upstream's (a splice does not say which socket failed).
func TestClientResetMidBody(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
			p := startProxy(t, mode, kc.ListenAddrs(), nil)
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			local := c.LocalAddr().String()
			c.Write(bigProduceFrame()[:100<<10])
			time.Sleep(100 * time.Millisecond) // the body is on its way
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			// Well within the linger a failed upstream write is given.
			deadline := time.Now().Add(time.Second)
			for p.Stats().Conns > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the connection outlived its client's reset by a second")
				}
				time.Sleep(5 * time.Millisecond)
			}
			p.log.waitFor(t, "client="+local)
			line := logLine(p.log.String(), "client="+local)
			if !strings.Contains(line, "client read") || strings.Contains(line, "upstream") {
				t.Fatalf("log line %q does not name the client's reset", line)
			}
			produceOn(t, p.Addr(), bigProduceFrame(), 5)
		})
	}
}
