package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 5000 * time.Microsecond},
		{0.99, 9900 * time.Microsecond},
		{0.999, 9990 * time.Microsecond},
	} {
		got := h.Quantile(tc.q)
		if diff := float64(tc.want-got) / float64(tc.want); diff < 0 || diff > 1.0/histSub {
			t.Errorf("q%v = %v, want within 1/%d below %v", tc.q, got, histSub, tc.want)
		}
	}
	if h.Max() != 10*time.Millisecond {
		t.Errorf("max = %v", h.Max())
	}
	for _, v := range []uint64{0, 1, 127, 128, 255, 256, 1 << 20, 1<<20 + 12345, 1 << 46} {
		if f := histFloor(histIndex(v)); f > v || float64(v-f) > float64(v)/histSub {
			t.Errorf("value %d lands in a bucket with floor %d", v, f)
		}
	}
}

// metadata asks the broker at addr for every topic and broker.
func metadata(t *testing.T, addr string) *kmsg.MetadataResponse {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// metadataAddrs returns every broker address a client bootstrapped at addr
// is told about.
func metadataAddrs(t *testing.T, addr string) []string {
	t.Helper()
	resp := metadata(t, addr)
	var out []string
	for _, b := range resp.Brokers {
		out = append(out, net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
	}
	return out
}

func TestRelayedBrokerAdvertisesRelay(t *testing.T) {
	rb, err := NewRelayedBroker(BrokerConfig{Kind: Plain}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if rb.Addr() == rb.Broker.Addr() {
		t.Fatalf("relay and broker share the address %s", rb.Addr())
	}
	got := metadataAddrs(t, rb.Addr())
	if len(got) == 0 {
		t.Fatal("metadata lists no broker")
	}
	for _, a := range got {
		if a != rb.Addr() {
			t.Errorf("metadata through the relay lists %s, want only the relay %s", a, rb.Addr())
		}
	}

	direct, err := NewBroker(BrokerConfig{Kind: Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, a := range metadataAddrs(t, direct.Addr()) {
		if a != direct.Addr() {
			t.Errorf("direct metadata lists %s, want %s", a, direct.Addr())
		}
	}
}

func TestRelayCarriesRecords(t *testing.T) {
	rb, err := NewRelayedBroker(BrokerConfig{Kind: Plain}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	o := Default()
	o.Targets = []Target{{Name: "relay", Addr: rb.Addr()}}
	o.Records = 500
	o.Warmup = 0
	o.KeepTopic = true // read back below
	var out bytes.Buffer
	res, err := Run(context.Background(), o, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Targets[0].Rounds[0].Produced; got != 500 {
		t.Fatalf("produced %d records, want 500", got)
	}

	o = Default()
	o.Produce, o.Consume = false, true
	o.Targets = []Target{{Name: "relay", Addr: rb.Addr()}}
	o.CreateTopic = false
	o.Duration, o.Warmup = 300*time.Millisecond, 0
	res, err = Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Targets[0].Rounds[0].Consumed; got != 500 {
		t.Fatalf("consumed %d records through the relay, want the 500 produced", got)
	}
}

// TestConsumeRate consumes from the synthetic broker, which serves a 1 MiB
// batch from every offset at once, capped at 20,000 records/s: the run
// takes no more than are due over the whole run, give or take the batch a
// poll returns, where uncapped it takes hundreds of thousands per second.
// The bound counts from before Run, since with no warm-up the records
// polled before the measured window count too.
func TestConsumeRate(t *testing.T) {
	b, err := NewBroker(BrokerConfig{Kind: Synthetic})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	o := Default()
	o.Targets = []Target{{Name: "direct", Addr: b.Addr()}}
	o.Produce, o.Consume = false, true
	o.Duration, o.Warmup = time.Second, 0
	o.Rate = 20000
	began := time.Now()
	res, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := time.Since(began)
	s := res.Targets[0].Rounds[0]
	due := o.Rate * ran.Seconds()
	if got := float64(s.Consumed); got == 0 || got > due+4096 {
		t.Fatalf("consumed %v records in a run of %v at %v records/s: want some, and at most %.0f", got, ran, o.Rate, due+4096)
	}
}

func TestRunCompares(t *testing.T) {
	for _, kind := range []BrokerKind{Blackhole, Synthetic} {
		t.Run(string(kind), func(t *testing.T) {
			direct, err := NewBroker(BrokerConfig{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			relayed, err := NewRelayedBroker(BrokerConfig{Kind: kind}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer relayed.Close()

			o := Default()
			o.Targets = []Target{{Name: "relay", Addr: relayed.Addr()}, {Name: "direct", Addr: direct.Addr()}}
			o.Produce, o.Consume = kind == Blackhole, kind == Synthetic
			o.Rounds = 2
			o.Duration, o.Warmup = 300*time.Millisecond, 300*time.Millisecond
			if kind == Synthetic {
				// A consume-only run has no count; under -race on a busy
				// machine one poll of a 1 MiB batch can outlast a short
				// window.
				o.Duration = 2 * time.Second
			}
			if kind == Blackhole {
				// A count, not a time: under -race on a busy machine a
				// saturating producer may see no acknowledgement in a
				// short window.
				o.Records = 3000
			}
			var progress, out bytes.Buffer
			o.Progress = &progress
			o.CPUPIDs = map[string]int{"relay": os.Getpid()}
			res, err := Run(context.Background(), o, &out)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range res.Targets {
				if len(tr.Rounds) != 2 {
					t.Fatalf("%s ran %d rounds, want 2", tr.Target.Name, len(tr.Rounds))
				}
				for _, s := range tr.Rounds {
					if s.Produced+s.Consumed == 0 {
						t.Fatalf("%s moved no records: %+v", tr.Target.Name, s)
					}
				}
			}
			c := res.Compare(0, 1)
			if r := c.Produce + c.Consume; r <= 0 {
				t.Fatalf("ratio relay/direct = %v", r)
			}
			if res.Targets[0].Rounds[0].CPU <= 0 {
				t.Errorf("relay CPU time %v: the relay runs in this process and cannot be free", res.Targets[0].Rounds[0].CPU)
			}
			if rss := res.Targets[0].PeakRSS(); rss < 1<<20 {
				t.Errorf("relay peak resident memory %d bytes: the relay runs in this process, which holds more", rss)
			}
			if res.Targets[1].PeakRSS() != 0 {
				t.Errorf("direct has no process measured, yet a peak resident memory of %d bytes", res.Targets[1].PeakRSS())
			}
			if !strings.Contains(out.String(), "×direct") || !strings.Contains(out.String(), "CPU s/GB") || !strings.Contains(out.String(), "peak RSS MiB") {
				t.Fatalf("report has no ratio column:\n%s", out.String())
			}
			var md bytes.Buffer
			if err := res.Write(&md, "markdown"); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(md.String(), "| path |") {
				t.Fatalf("markdown report:\n%s", md.String())
			}
		})
	}
}

func TestValidateNamesField(t *testing.T) {
	o := Default()
	o.Targets = []Target{{Addr: "127.0.0.1:1"}}
	o.Acks = 1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Idempotent") {
		t.Fatalf("acks=1 with idempotence: %v", err)
	}
	o.Idempotent = false
	o.Compression = "brotli"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Compression") {
		t.Fatalf("unknown codec: %v", err)
	}
}

func TestIdleAndChurn(t *testing.T) {
	rb, err := NewRelayedBroker(BrokerConfig{}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	ctx := context.Background()
	ic, err := OpenIdle(ctx, rb.Addr(), 50, 8)
	if err != nil {
		t.Fatal(err)
	}
	if ic.Len() != 50 {
		t.Fatalf("%d connections open, want 50", ic.Len())
	}
	ic.Close()
	rate, err := Churn(ctx, rb.Addr(), 200*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("churn rate %v", rate)
	}
}

// topics returns the topics a broker at addr has.
func topics(t *testing.T, addr string) map[string]bool {
	t.Helper()
	out := make(map[string]bool)
	for _, tp := range metadata(t, addr).Topics {
		out[*tp.Topic] = true
	}
	return out
}

// TestRunDeletesOnlyTheTopicItCreated checks that a run deletes the topic
// it created, keeps it with KeepTopic, and never deletes a topic that was
// there before it.
func TestRunDeletesOnlyTheTopicItCreated(t *testing.T) {
	b, err := NewBroker(BrokerConfig{Kind: Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run := func(topic string, keep bool) {
		t.Helper()
		o := Default()
		o.Targets = []Target{{Name: "plain", Addr: b.Addr()}}
		o.Topic, o.KeepTopic = topic, keep
		o.Records, o.Warmup = 50, 0
		if _, err := Run(context.Background(), o, nil); err != nil {
			t.Fatal(err)
		}
	}
	run("made-here", false)
	if topics(t, b.Addr())["made-here"] {
		t.Error("the topic the run created is still there")
	}
	run("kept", true)
	if !topics(t, b.Addr())["kept"] {
		t.Fatal("KeepTopic: the topic is gone")
	}
	run("kept", false)
	if !topics(t, b.Addr())["kept"] {
		t.Error("a run deleted a topic that existed before it")
	}
}

// TestBrokersSpreadLeaders: a cluster of several brokers listens on one
// address per broker, and the topics made at start have partition p led
// by broker p modulo the count, so that a workload reaches every broker.
func TestBrokersSpreadLeaders(t *testing.T) {
	b, err := NewBroker(BrokerConfig{Kind: Blackhole, Brokers: 3, Topics: map[string]int32{"spread": 6}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := len(strings.Split(b.Addr(), ",")); n != 3 {
		t.Fatalf("Addr %q names %d brokers, want 3", b.Addr(), n)
	}
	for p := int32(0); p < 6; p++ {
		if l := b.Cluster.LeaderFor("spread", p); l != p%3 {
			t.Fatalf("partition %d led by %d, want %d", p, l, p%3)
		}
	}
	if _, err := NewBroker(BrokerConfig{Brokers: 2, Advertise: "127.0.0.1:1"}); err == nil {
		t.Fatal("two brokers advertising one address were accepted")
	}
}

// TestWideAnswersEveryRequest runs the wide produce workload against a
// broker and through a relay, and checks that every target is reported,
// the process whose CPU is read with its CPU column filled.
func TestWideAnswersEveryRequest(t *testing.T) {
	rb, err := NewRelayedBroker(BrokerConfig{}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	o := WideOptions{
		Targets:    []Target{{Name: "relay", Addr: rb.Addr()}, {Name: "direct", Addr: rb.Broker.Addr()}},
		CPUPIDs:    map[string]int{"relay": os.Getpid()},
		Rounds:     2,
		Partitions: 2000,
		Requests:   5,
	}
	res, err := RunWide(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteWide(&b, "markdown", res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "| relay | ") || !strings.HasPrefix(lines[3], "| direct | ") {
		t.Fatalf("report:\n%s", b.String())
	}
	if !res[0].HasCPU || res[1].HasCPU || res[0].Wall <= 0 {
		t.Fatalf("results %+v", res)
	}
}
