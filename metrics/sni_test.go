package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSNIRoutes: a route's counters are resolved once and shared by its
// connections; the bootstrap carries no node id; node ids past the bound
// share one series, so no sequence of routes grows the series count
// without limit.
func TestSNIRoutes(t *testing.T) {
	m := New()
	a, b := m.SNIRoute(SNINode, 7), m.SNIRoute(SNINode, 7)
	if a != b {
		t.Fatal("one route resolved twice")
	}
	a.Connected()
	b.Connected()
	a.Received(100)
	b.Sent(40)
	b.Sent(0)
	a.Received(-1)
	if got := testutil.ToFloat64(m.sni.conns.WithLabelValues("node", "7")); got != 2 {
		t.Errorf("node 7 connections %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.sni.bytes.WithLabelValues("node", "7", "received")); got != 100 {
		t.Errorf("node 7 received %v, want 100", got)
	}
	if got := testutil.ToFloat64(m.sni.bytes.WithLabelValues("node", "7", "sent")); got != 40 {
		t.Errorf("node 7 sent %v, want 40", got)
	}
	if m.SNIRoute(SNIBootstrap, 3) != m.SNIRoute(SNIBootstrap, 0) {
		t.Error("the bootstrap route depends on an id")
	}
	m.SNIRoute(SNIBootstrap, 0).Connected()
	if got := testutil.ToFloat64(m.sni.conns.WithLabelValues("bootstrap", "")); got != 1 {
		t.Errorf("bootstrap connections %v, want 1", got)
	}
	m.SNIRoute(SNIController, 7).Connected()
	if got := testutil.ToFloat64(m.sni.conns.WithLabelValues("controller", "7")); got != 1 {
		t.Errorf("controller 7 connections %v, want 1", got)
	}
	m.SNIRoute("weird", 5).Connected()
	if got := testutil.ToFloat64(m.sni.conns.WithLabelValues("other", "")); got != 1 {
		t.Errorf("an unknown role counted %v under other, want 1", got)
	}
	for id := range int32(3 * maxSNINodes) {
		m.SNIRoute(SNINode, id).Connected()
	}
	if n := testutil.CollectAndCount(m.sni.conns); n > 2*maxSNINodes+3 {
		t.Errorf("%d connection series after %d node ids", n, 3*maxSNINodes)
	}
	if got := testutil.ToFloat64(m.sni.conns.WithLabelValues("node", "other")); got != 2*maxSNINodes {
		t.Errorf("node ids past the bound counted %v under other, want %d", got, 2*maxSNINodes)
	}
	m.SNIRefused(SNINoName)
	m.SNIRefused("bogus")
	if got := testutil.ToFloat64(m.sni.refusals.get(SNIRefusalOther)); got != 1 {
		t.Errorf("an unknown refusal reason counted %v under other", got)
	}
	var off *Metrics
	off.SNIRoute(SNINode, 1).Connected() // nil: records nothing, must not panic
	off.SNIRefused(SNINoName)
}
