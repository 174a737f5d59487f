package check_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/admin"
	"github.com/inorder-proxy/inorder/check"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/devcluster"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/junit"
	"github.com/inorder-proxy/inorder/internal/testcerts"
	"github.com/inorder-proxy/inorder/proxy"
)

func runCheck(t *testing.T, addr string, requests int) (check.Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := check.Run(ctx, check.Options{Bootstrap: addr, Requests: requests, Progress: &progress})
	if testing.Verbose() {
		check.Write(os.Stderr, rep, check.FormatText)
	}
	if !strings.Contains(progress.String(), "responses") {
		t.Errorf("no progress lines; got %q", progress.String())
	}
	return rep, err
}

// requireHolds fails unless every property was checked and held.
func requireHolds(t *testing.T, rep check.Report, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Properties) != len(check.PropertyNames()) {
		t.Fatalf("%d properties checked, want %d", len(rep.Properties), len(check.PropertyNames()))
	}
	for _, p := range rep.Properties {
		if !p.Holds || len(p.Counts) != 0 {
			t.Errorf("%s: violated on an in-order backend: %s", p.Name, p.Evidence)
		}
		if !strings.Contains(p.Evidence, "in request order") {
			t.Errorf("%s: evidence %q does not say the responses were in order", p.Name, p.Evidence)
		}
	}
}

func TestKfakeHolds(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := runCheck(t, c.ListenAddrs()[0], 500)
	requireHolds(t, rep, err)
}

// TestEmbeddedBrokerHolds checks the three-broker embedded cluster of
// `inorder dev` through the proxy, as `inorder dev` serves it: partition
// leaders and the group coordinator sit on different node listeners.
func TestEmbeddedBrokerHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := devcluster.Start(ctx, devcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	p := startProxy(t, kc.ListenAddrs(), config.OrderingNone, proxy.WithVersions(kc.Versions), proxy.WithFixup(devcluster.Fixup{}))
	rep, err := runCheck(t, p.Addr(), 300)
	requireHolds(t, rep, err)
}

// TestReordererViolations checks every property against a backend that
// answers pipelined requests concurrently, and that the count of responses
// out of order is exactly the count the backend itself made on each probe
// connection.
func TestReordererViolations(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := runCheck(t, r.Addr(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Violations() != len(check.PropertyNames()) {
		t.Errorf("%d of %d properties violated, want all (seed %d)", rep.Violations(), len(rep.Properties), r.Seed())
	}
	for _, p := range rep.Properties {
		got, want := p.Counts[check.CountResponsesOutOfOrder], r.ReorderedFor(p.ClientID)
		if want == 0 {
			t.Errorf("%s: the reorderer reordered nothing on %s (seed %d)", p.Name, p.ClientID, r.Seed())
		}
		if int64(got) != want {
			t.Errorf("%s: %d responses out of order reported, the reorderer made %d", p.Name, got, want)
		}
		t.Logf("%s: %s", p.Name, p.Evidence)
	}
}

// TestRareSwapsCaughtByDefault runs the default check against a backend
// that keeps the log in order but swaps one response in 200 with the next.
func TestRareSwapsCaughtByDefault(t *testing.T) {
	s, err := hostile.NewSwapper(hostile.SwapperConfig{Every: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := runCheck(t, s.Addr(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != check.DefaultRequests {
		t.Fatalf("ran %d requests per property, want the default %d", rep.Requests, check.DefaultRequests)
	}
	if rep.Violations() == 0 {
		t.Fatalf("the default check missed a backend that swaps 1 response in 200 (seed %d, %d swaps)", s.Seed(), s.Swapped())
	}
	total := 0
	for _, p := range rep.Properties {
		got, want := p.Counts[check.CountResponsesOutOfOrder], s.SwappedFor(p.ClientID)
		if int64(got) != want {
			t.Errorf("%s: %d responses out of order reported, the backend swapped %d", p.Name, got, want)
		}
		if n := p.Counts[check.CountLogOutOfOrder] + p.Counts[check.CountAppendsOutOfOrder]; n != 0 {
			t.Errorf("%s: %d log violations reported; the backend keeps the log in order: %s", p.Name, n, p.Evidence)
		}
		total += got
	}
	t.Logf("%d responses out of order over %d properties (seed %d)", total, len(rep.Properties), s.Seed())
}

// TestProxyRepairsReorderer checks inorder in none mode in front of the
// reorderer: the same backend that fails the check directly passes it
// through the proxy.
func TestProxyRepairsReorderer(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	direct, err := runCheck(t, r.Addr(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if direct.Violations() == 0 {
		t.Fatalf("the reorderer passed the check directly (seed %d); the test would prove nothing", r.Seed())
	}
	p := startProxy(t, []string{r.Addr()}, config.OrderingNone)
	rep, err := runCheck(t, p.Addr(), 200)
	requireHolds(t, rep, err)
}

func TestUnreachableCannotRun(t *testing.T) {
	addr, err := hostile.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := check.Run(context.Background(), check.Options{Bootstrap: addr, DialTimeout: 2 * time.Second})
	var cre *check.CannotRunError
	if !errors.Is(err, check.ErrCannotRun) || !errors.As(err, &cre) || cre.Reason != check.ReasonUnreachable {
		t.Fatalf("got %v, want a CannotRunError for an unreachable address", err)
	}
	if rep.Error == "" || len(rep.Properties) != 0 {
		t.Fatalf("report %+v: want the error and no properties", rep)
	}
}

// TestSilentBrokerCannotRun checks an address that accepts connections
// but never answers: reachable, so the reason is not "unreachable".
func TestSilentBrokerCannotRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = check.Run(context.Background(), check.Options{Bootstrap: ln.Addr().String(), DialTimeout: 300 * time.Millisecond})
	var cre *check.CannotRunError
	if !errors.As(err, &cre) || cre.Reason != check.ReasonFailed || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a CannotRunError (failed) wrapping the deadline", err)
	}
}

// TestSASLBrokerCannotRun checks a broker that requires SASL: the check
// cannot authenticate and says so instead of retrying.
func TestSASLBrokerCannotRun(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = check.Run(context.Background(), check.Options{Bootstrap: c.ListenAddrs()[0], DialTimeout: 5 * time.Second})
	var cre *check.CannotRunError
	if !errors.As(err, &cre) || cre.Reason != check.ReasonUnauthorized || !strings.Contains(err.Error(), "SASL") {
		t.Fatalf("got %v, want a CannotRunError: not authorised, naming SASL", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to give up", d)
	}
}

// TestBrokenConnectionCannotRun checks that a backend that closes the
// probe's connection mid-run ends the check with a reason, not a verdict.
func TestBrokenConnectionCannotRun(t *testing.T) {
	f, err := hostile.CloseAfter(100)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = runCheck(t, f.Addr(), 300)
	var cre *check.CannotRunError
	if !errors.As(err, &cre) || cre.Reason != check.ReasonFailed || !strings.Contains(err.Error(), "answered") {
		t.Fatalf("got %v, want a CannotRunError naming how many were answered", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []check.Options{
		{},
		{Bootstrap: "x:1", Requests: 2},
		{Bootstrap: "x:1", Window: -1},
	} {
		if _, err := check.Run(context.Background(), o); !errors.Is(err, check.ErrOptions) {
			t.Errorf("%+v: got %v, want ErrOptions", o, err)
		}
	}
}

func sampleReport() check.Report {
	return check.Report{
		Bootstrap: "127.0.0.1:9092", Requests: 10, Topic: "t", Group: "g",
		Properties: []check.Property{
			{Name: check.PropProduceAcksAll, Holds: true, Requests: 10, Evidence: "10 responses in request order"},
			{Name: check.PropOffsetCommit, Holds: false, Requests: 10, Evidence: "3 of 10 responses out of order",
				Counts: map[string]int{check.CountResponsesOutOfOrder: 3, check.CountCommitLost: 1}},
		},
	}
}

func TestWriteFormats(t *testing.T) {
	rep := sampleReport()
	var text bytes.Buffer
	if err := check.Write(&text, rep, check.FormatText); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ok ") || !strings.HasPrefix(lines[1], "FAIL") ||
		!strings.Contains(lines[1], "3 of 10") || !strings.Contains(lines[2], "1 of 2") {
		t.Fatalf("text:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := check.Write(&js, rep, check.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var back check.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Violations() != 1 || back.Properties[1].Counts[check.CountCommitLost] != 1 {
		t.Fatalf("json round trip: %+v", back)
	}

	rep.Error = "check could not run (unreachable): boom"
	var ju bytes.Buffer
	if err := check.Write(&ju, rep, check.FormatJUnit); err != nil {
		t.Fatal(err)
	}
	s, err := junit.Read(ju.Bytes())
	if err != nil {
		t.Fatalf("junit does not parse: %v\n%s", err, ju.String())
	}
	if s.Tests != 3 || s.Failures != 1 || s.Errors != 1 || s.Cases[1].Failure == nil ||
		s.Cases[1].Name != check.PropOffsetCommit || !strings.Contains(s.Cases[1].Failure.Message, "3 of 10") {
		t.Fatalf("junit: %+v\n%s", s, ju.String())
	}
	if err := check.Write(io.Discard, rep, "yaml"); !errors.Is(err, check.ErrOptions) {
		t.Fatalf("unknown format: %v", err)
	}
}

func startProxy(t *testing.T, upstreams []string, mode config.Ordering, opts ...proxy.Option) *proxy.Proxy {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = upstreams
	cfg.UpstreamOrdering = mode
	cfg.DialTimeout = 5 * time.Second
	cfg.Verify = true
	p, err := proxy.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve() }()
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	return p
}

// TestApacheKafka checks a real broker, directly and through inorder in
// both ordering modes. It runs when INORDER_KAFKA_BOOTSTRAP names one
// (.ci/run starts testenv/kafka's single node for it).
func TestApacheKafka(t *testing.T) {
	addr := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if addr == "" {
		t.Skip("INORDER_KAFKA_BOOTSTRAP is not set; .ci/run sets it")
	}
	const requests = 500
	t.Run("direct", func(t *testing.T) {
		rep, err := runCheck(t, addr, requests)
		requireHolds(t, rep, err)
	})
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run("inorder "+string(mode), func(t *testing.T) {
			p := startProxy(t, []string{addr}, mode)
			rep, err := runCheck(t, p.Addr(), requests)
			requireHolds(t, rep, err)
			// The proxy's verifier watched the same traffic.
			if v := p.Verifier().Report(); v.Total() != 0 || v.Requests["Produce"] < 3*requests {
				t.Fatalf("verifier in front of Kafka: %+v", v)
			}
		})
	}
}

// TestNotKafkaCannotRun: an address that answers HTTP (inorder's own
// admin endpoint), a TLS alert (a Kafka SSL listener reading plaintext)
// or nothing at all (a Go TLS listener, inorder's with --tls-cert) is
// said to be what it is, at once: the admin endpoint would otherwise keep
// the check waiting for its 5 s header timeout.
func TestNotKafkaCannotRun(t *testing.T) {
	adm, err := admin.Listen(admin.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	go adm.Serve()
	defer adm.Shutdown(context.Background())

	// A Kafka SSL listener answers bytes that are not TLS with a fatal
	// alert (unexpected_message) before it closes.
	alerting, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer alerting.Close()
	go func() {
		for {
			c, err := alerting.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512))
			c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a})
			c.Close()
		}
	}()

	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ca, err := testcerts.NewCA("check")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("proxy", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = kc.ListenAddrs()
	if cfg.TLSCert, cfg.TLSKey, err = pair.Write(t.TempDir(), "proxy"); err != nil {
		t.Fatal(err)
	}
	tlsProxy, err := proxy.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsProxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer tlsProxy.Close()

	for _, tc := range []struct {
		name, addr string
		reason     check.Reason
		want       string
	}{
		{"admin endpoint", adm.Addr(), check.ReasonNotKafka,
			"check could not run (not Kafka): asking " + adm.Addr() + " for its API versions: the address answered HTTP: it is not a Kafka port (an HTTP endpoint, such as inorder's --admin-listen); give --bootstrap a Kafka listener"},
		{"TLS alert", alerting.Addr().String(), check.ReasonNotKafka,
			"check could not run (not Kafka): asking " + alerting.Addr().String() + " for its API versions: the address answered with a TLS alert: the broker speaks TLS, and the check speaks plaintext only; give --bootstrap a plaintext listener, or inorder in front of the broker (with --upstream-tls)"},
		{"TLS listener", tlsProxy.Addr(), check.ReasonFailed,
			"check could not run (failed): asking " + tlsProxy.Addr() + " for its API versions: the address closed the connection without answering ApiVersions, which every Kafka listener answers (EOF): a TLS listener (the check speaks plaintext only), or not a Kafka port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := check.Run(context.Background(), check.Options{Bootstrap: tc.addr, DialTimeout: 10 * time.Second})
			var cre *check.CannotRunError
			if !errors.As(err, &cre) || cre.Reason != tc.reason || err.Error() != tc.want {
				t.Fatalf("got\n\t%v\nwant\n\t%s", err, tc.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v to say so", d)
			}
		})
	}
}
