package proxy

import (
	"testing"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// TestReleaseFreesTheQueue: a connection that ends with requests still
// queued for the upstream (its writes had failed, so nothing more was
// written) gives back every charge they hold, those never sequenced (an
// acks=0 request in Connection mode) as well as those the sequencer holds.
func TestReleaseFreesTheQueue(t *testing.T) {
	cfg := config.Default()
	p := &Proxy{cfg: cfg, budget: budget.New(1 << 20)}
	c := &conn{p: p, cfg: &cfg, node: -1, mode: ordering.Connection}
	c.seq = ordering.New[*request](c.mode, 64, 1<<20)
	queued := func() *request {
		r := &request{frame: wire.Get(600)}
		n := int64(cap(r.frame.B))
		if !p.budget.TryReserve(n, false) {
			t.Fatal("budget refused a reservation")
		}
		r.bud, r.frameCharge = p.budget, charge{N: n}
		return r
	}
	answered := queued()
	answered.seq = c.seq.Push(ordering.Request{Kind: ordering.Barrier}, answered)
	answered.upCorr = c.upstreamCorrelation(answered.seq)
	unanswered := queued()
	unanswered.upCorr = noCorrelation
	c.outq = append(c.outq, answered, unanswered)
	if p.budget.Used() == 0 {
		t.Fatal("nothing reserved")
	}
	c.release()
	if used := p.budget.Used(); used != 0 {
		t.Fatalf("%d bytes still reserved after release", used)
	}
	if len(c.outq) != 0 {
		t.Fatalf("%d requests still queued after release", len(c.outq))
	}
}
