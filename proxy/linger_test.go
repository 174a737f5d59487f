package proxy_test

import (
	"crypto/tls"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/inorder-proxy/inorder/config"
)

// TestReaderLingerSlowResponses: responses far slower than the upstream
// reader's linger (20 ms) arrive whether their request went while the
// reader lingered or after it had ended: the linger's read deadline never
// outlives the linger.
func TestReaderLingerSlowResponses(t *testing.T) {
	b := newReorderer(t, 150*time.Millisecond, 150*time.Millisecond, "t", 1)
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startProxy(t, mode, []string{b.Addr()}, nil)
			c := dial(t, p.Addr())
			ask(t, c)
			// Sent at once: the reader is lingering, and the
			// response comes long after its linger ends.
			if took := ask(t, c); took < 150*time.Millisecond {
				t.Fatalf("answered in %s, before the backend's delay", took)
			}
			// Sent after the reader has ended.
			time.Sleep(200 * time.Millisecond)
			ask(t, c)
			ask(t, c)
			if s := p.log.String(); strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR") {
				t.Fatalf("logged:\n%s", s)
			}
		})
	}
}

// TestReaderLingerTLSUpstream: over TLS to the upstream, a consumer whose
// fetches wait at the broker far longer than the reader's linger gets
// every record in order while a producer sends one at a time with pauses
// longer than the linger: a linger that times out mid-read leaves the TLS
// connection usable.
func TestReaderLingerTLSUpstream(t *testing.T) {
	k := newPKI(t)
	brokerCert, _ := k.ca.Issue("broker", "127.0.0.1")
	pair, err := tls.X509KeyPair(brokerCert.CertPEM, brokerCert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kc := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}), kfake.SeedTopics(1, "slow"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.UpstreamTLSCA = k.caFile
	})
	ctx := testContext(t, 30*time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics("slow"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	const n = 6
	go func() {
		for i := range n {
			time.Sleep(100 * time.Millisecond)
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Errorf("produce %d: %v", i, err)
				return
			}
		}
	}()
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(got) {
				t.Fatalf("record %q, want %d", r.Value, got)
			}
			got++
		})
	}
	if s := p.log.String(); strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR") {
		t.Fatalf("logged:\n%s", s)
	}
}
