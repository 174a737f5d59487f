package proxy_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/check"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/junit"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/verify"
)

func verifyOn(c *config.Config) { c.Verify = true }

func violationCount(rep verify.Report, kind metrics.Violation) int64 {
	for _, k := range rep.Violations {
		if k.Kind == kind {
			return k.Count
		}
	}
	return -1
}

// produces returns n single-record Produce requests, request i to
// partition parts[i%len(parts)] of topic, carrying value i; with a
// producer, an idempotent one numbering each partition's batches from 0.
func produces(topic string, parts []int32, n int, producer *pipeprobe.Producer) []kmsg.Request {
	reqs := make([]kmsg.Request, n)
	seqs := make(map[int32]int32)
	for i := range n {
		p := parts[i%len(parts)]
		reqs[i] = pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: p, Value: []byte{byte(i)}, Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: -1, Timeout: 10 * time.Second, Producer: producer, Sequence: seqs[p],
		})
		seqs[p]++
	}
	return reqs
}

// TestVerifyCountsUpstreamReordering pipelines Produce requests through
// the proxy in front of the reorderer, in each mode: in connection mode
// everything overlaps upstream; in none mode writes to two partitions do.
// The verifier must count exactly the responses the reorderer sent out of
// order on the proxy's upstream connection, while the client sees none.
func TestVerifyCountsUpstreamReordering(t *testing.T) {
	for _, tc := range []struct {
		mode  config.Ordering
		parts []int32
	}{
		{config.OrderingConnection, []int32{0}},
		{config.OrderingNone, []int32{0, 1}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r, err := hostile.NewReorderer(hostile.ReordererConfig{KfakeOpts: []kfake.Opt{kfake.SeedTopics(2, "v")}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			p := startProxy(t, tc.mode, []string{r.Addr()}, verifyOn)
			ctx := testContext(t, 30*time.Second)
			const clientID = "verify-test"
			res, err := pipeprobe.Pipeline(ctx, p.Addr(), produces("v", tc.parts, 300, nil), pipeprobe.PipelineOptions{ClientID: clientID})
			if err != nil {
				t.Fatal(err)
			}
			if over := res.Overtakers(); len(over) != 0 {
				t.Fatalf("the client saw %d responses out of order through the proxy", len(over))
			}
			rep := p.Verifier().Report()
			got, want := violationCount(rep, metrics.ViolationOutOfOrderResponse), r.ReorderedFor(clientID)
			if want == 0 {
				t.Fatalf("the reorderer reordered nothing (seed %d): the test proves nothing", r.Seed())
			}
			if got != want {
				t.Fatalf("verifier counted %d responses out of order, the reorderer sent %d", got, want)
			}
			if rep.Requests["Produce"] != 300 {
				t.Fatalf("requests by key: %v, want 300 Produce", rep.Requests)
			}
			ex := rep.Violations[0].Examples
			if len(ex) == 0 || len(ex) > 5 || ex[0].API != "Produce" || ex[0].Client == "" || ex[0].Upstream != r.Addr() || ex[0].OtherCorrelation == ex[0].UpstreamCorrelation {
				t.Fatalf("examples: %+v", ex)
			}
			if tc.mode == config.OrderingConnection && violationCount(rep, metrics.ViolationOffsetRegression) == 0 {
				t.Fatalf("300 racing writes to one partition and no offset regression seen; report %+v", rep)
			}
		})
	}
}

// TestVerifyCountsSequenceErrors pipelines an idempotent producer's
// batches through the proxy in connection mode in front of the reorderer,
// which appends them out of order: every OUT_OF_ORDER_SEQUENCE_NUMBER the
// client got must be counted.
func TestVerifyCountsSequenceErrors(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "v")}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, []string{r.Addr()}, verifyOn, proxy.WithMetrics(m))
	ctx := testContext(t, 30*time.Second)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 1
	init.TransactionTimeoutMillis = 60_000
	kresp, err := pipeprobe.Do(ctx, p.Addr(), init)
	if err != nil {
		t.Fatal(err)
	}
	ir := kresp.(*kmsg.InitProducerIDResponse)
	producer := &pipeprobe.Producer{ID: ir.ProducerID, Epoch: ir.ProducerEpoch}
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), produces("v", []int32{0}, 200, producer), pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ooo int64
	for _, x := range res.Exchanges {
		if x.Resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode == kerr.OutOfOrderSequenceNumber.Code {
			ooo++
		}
	}
	if ooo == 0 {
		t.Fatalf("no OUT_OF_ORDER_SEQUENCE_NUMBER through the reorderer (seed %d): the test proves nothing", r.Seed())
	}
	rep := p.Verifier().Report()
	if got := violationCount(rep, metrics.ViolationOutOfOrderSequence); got != ooo {
		t.Fatalf("verifier counted %d OUT_OF_ORDER_SEQUENCE_NUMBER, the client got %d", got, ooo)
	}
	if got := gathered(t, m, metrics.NameViolations, string(metrics.ViolationOutOfOrderSequence)); got != float64(ooo) {
		t.Fatalf("%s{kind=out_of_order_sequence_number} = %v, want %d", metrics.NameViolations, got, ooo)
	}
	ex := rep.Violations[2].Examples[0]
	if ex.Partition == nil || ex.Partition.Topic != "v" || ex.Partition.Partition != 0 {
		t.Fatalf("example lacks the partition: %+v", ex)
	}
}

// TestVerifyQuietOnKfake runs the whole ordering check through a verifying
// proxy in front of kfake, in both modes: nothing may be counted.
func TestVerifyQuietOnKfake(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t)
			p := startProxy(t, mode, c.ListenAddrs(), verifyOn)
			rep, err := check.Run(testContext(t, time.Minute), check.Options{Bootstrap: p.Addr(), Requests: 200})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Violations() != 0 {
				t.Fatalf("check saw violations through the proxy: %+v", rep)
			}
			vr := p.Verifier().Report()
			if vr.Total() != 0 {
				t.Fatalf("verifier counted violations on kfake: %+v", vr)
			}
			if len(vr.Violations) != len(verify.Kinds) || vr.Requests["Produce"] < 600 || vr.Requests["OffsetCommit"] < 200 {
				t.Fatalf("report: %+v", vr)
			}
		})
	}
}

func TestVerifyOffWithoutFlag(t *testing.T) {
	c := newCluster(t)
	p := startProxy(t, config.OrderingConnection, c.ListenAddrs(), nil)
	if p.Verifier() != nil {
		t.Fatal("a verifier exists without --verify")
	}
}

func TestVerifyReportFormats(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "v")}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := startProxy(t, config.OrderingConnection, []string{r.Addr()}, verifyOn)
	if _, err := pipeprobe.Pipeline(testContext(t, 30*time.Second), p.Addr(), produces("v", []int32{0}, 200, nil), pipeprobe.PipelineOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := p.Verifier().Report()
	if rep.Total() == 0 {
		t.Fatalf("nothing seen (seed %d)", r.Seed())
	}
	var js bytes.Buffer
	if err := rep.Write(&js, "report.json"); err != nil {
		t.Fatal(err)
	}
	var back verify.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Total() != rep.Total() {
		t.Fatalf("json round trip: %v, %d != %d\n%s", err, back.Total(), rep.Total(), js.String())
	}
	var ju bytes.Buffer
	if err := rep.Write(&ju, "REPORT.XML"); err != nil {
		t.Fatal(err)
	}
	suite, err := junit.Read(ju.Bytes())
	if err != nil {
		t.Fatalf("junit: %v\n%s", err, ju.String())
	}
	if suite.Tests != len(verify.Kinds) || suite.Failures == 0 || suite.Cases[0].Failure == nil ||
		!strings.Contains(suite.Cases[0].Failure.Message, "seen; first: out_of_order_response") {
		t.Fatalf("junit: %+v\n%s", suite, ju.String())
	}
}

// gathered returns the value of the counter name whose kind label is kind;
// the counter must exist.
func gathered(t *testing.T, m *metrics.Metrics, name, kind string) float64 {
	t.Helper()
	v, ok := findCounter(t, m, name, "kind", kind)
	if !ok {
		t.Fatalf("no %s{kind=%q} gathered", name, kind)
	}
	return v
}
