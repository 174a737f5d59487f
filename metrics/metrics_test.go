package metrics

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// exerciseAll calls every recording method once.
func exerciseAll(m *Metrics) {
	m.BuildInfo("v0.0.0-test", "0123abcd")
	m.RequestRead(0)
	m.ResponseWritten(0, time.Millisecond, 500*time.Microsecond)
	m.ConnAccepted(ListenerBootstrap)
	m.ConnRejected(RejectLimit)
	m.ConnClosed(CloseClientClosed)
	m.WriteWait(PhaseQueued, time.Millisecond)
	m.ReadPaused(PauseBytes, time.Second)
	m.UpstreamOutOfOrder()
	m.Violation(ViolationOffsetRegression)
	m.UpstreamDialError(DialRefused)
	m.UpstreamProtocolError(ProtoBadFrame)
	m.ConfigReload(ReloadSuccess)
	m.TLSHandshakeFailure(SideClient, TLSPlaintext)
	m.SASLAuthentication("PLAIN", ResultSuccess)
	r := m.SNIRoute(SNINode, 1)
	r.Connected()
	r.Received(10)
	r.Sent(20)
	m.SNIRefused(SNIUnknownName)
	m.SetGaugeSource(func(g *Gauges) { g.ConnectionsOpen = 1 })
	m.SetQuotaSource(func() []QuotaStat {
		return []QuotaStat{{Kind: QuotaProduce, Entity: "users/alice", Bytes: 10, Throttle: time.Second}, {Kind: QuotaRequest, Entity: "users/alice"}}
	})
}

func TestDisabledRecordsNothing(t *testing.T) {
	var m *Metrics
	exerciseAll(m) // must not panic
	if m.Enabled() || !m.Now().IsZero() || m.Registry() != nil {
		t.Fatal("nil Metrics claims to be enabled")
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("disabled handler answered %d, want 404", rec.Code)
	}
}

func TestNamesMatchRegistry(t *testing.T) {
	m := New()
	exerciseAll(m)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "inorder_") {
			got = append(got, f.GetName())
		}
	}
	want := slices.Clone(Names())
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("registered families differ from Names():\n got %v\nwant %v", got, want)
	}
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "inorder_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestFigures(t *testing.T) {
	m := New()
	for range 3 {
		m.RequestRead(0) // Produce
	}
	m.RequestRead(3)   // Metadata
	m.RequestRead(999) // not a Kafka key
	m.ResponseWritten(0, 20*time.Millisecond, 5*time.Millisecond)
	m.ResponseWritten(3, 20*time.Millisecond, 0) // answered by the proxy: no upstream share
	if got := testutil.ToFloat64(m.requests.WithLabelValues("Produce")); got != 3 {
		t.Errorf("Produce requests = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("Unknown")); got != 1 {
		t.Errorf("unknown-key requests = %v, want 1", got)
	}
	h := histogram(t, m, NameRequestDuration, "Produce")
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.02 {
		t.Errorf("Produce latency: count %d sum %v, want 1 and 0.02", h.GetSampleCount(), h.GetSampleSum())
	}
	if u := histogram(t, m, NameUpstreamDuration, "Produce"); u.GetSampleCount() != 1 || u.GetSampleSum() != 0.005 {
		t.Errorf("Produce upstream share: count %d sum %v, want 1 and 0.005", u.GetSampleCount(), u.GetSampleSum())
	}
	if u := histogram(t, m, NameUpstreamDuration, "Metadata"); u != nil && u.GetSampleCount() != 0 {
		t.Errorf("a request answered by the proxy was given an upstream share")
	}

	m.ConnClosed(CloseIdle)
	m.ConnClosed(CloseReason("made up by a caller"))
	if got := testutil.ToFloat64(m.closed.get(CloseIdle)); got != 1 {
		t.Errorf("closed{idle} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.closed.get(CloseOther)); got != 1 {
		t.Errorf("closed{other} = %v, want 1 (unknown reasons fold into other)", got)
	}
	m.SASLAuthentication("X-CLIENT-CHOSEN-NAME", ResultFailure)
	m.SASLAuthentication("SCRAM-SHA-256", ResultSuccess)
	if got := testutil.ToFloat64(m.sasl[ResultFailure].get("other")); got != 1 {
		t.Errorf("sasl{other,failure} = %v, want 1", got)
	}
	m.ReadPaused(PauseInFlight, 1500*time.Millisecond)
	m.ReadPaused(PauseInFlight, 500*time.Millisecond)
	if got := testutil.ToFloat64(m.paused.get(PauseInFlight)); got != 2 {
		t.Errorf("paused seconds = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.pauses.get(PauseInFlight)); got != 2 {
		t.Errorf("pauses = %v, want 2", got)
	}

	m.SetGaugeSource(func(g *Gauges) {
		g.ConnectionsOpen, g.RequestsInFlight, g.HeldBytes = 4, 7, 4096
		g.NodeListeners, g.ControllerListeners = 3, 1
	})
	const want = `
# HELP inorder_listeners_open Node and controller listeners open, by kind.
# TYPE inorder_listeners_open gauge
inorder_listeners_open{kind="controller"} 1
inorder_listeners_open{kind="node"} 3
# HELP inorder_requests_in_flight Requests read whose response is not yet written.
# TYPE inorder_requests_in_flight gauge
inorder_requests_in_flight 7
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), NameListenersOpen, NameRequestsInFlight); err != nil {
		t.Error(err)
	}
	// A scrape through the handler shows the same figures in the text format.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{`inorder_requests_total{api="Produce"} 3`, `inorder_held_bytes 4096`, `inorder_connections_open 4`} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
}

// histogram returns the histogram of family name for API key api, or nil.
func histogram(t *testing.T, m *Metrics, name, api string) *dto.Histogram {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "api" && l.GetValue() == api {
					return mt.GetHistogram()
				}
			}
		}
	}
	return nil
}
