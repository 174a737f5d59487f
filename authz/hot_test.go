package authz

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/wire"
)

// benchACLs is the ACL file bench/run.sh's write_acls writes for n
// bindings: the bench client's (User:ANONYMOUS, on inorder-bench-*
// topics), a DENY of User:* from one host on the same prefix, and for
// many services the mix an operator keeps.
func benchACLs(n int) string {
	var b strings.Builder
	b.WriteString("acls:\n")
	for _, op := range []string{"CREATE", "DESCRIBE", "WRITE", "READ", "DELETE"} {
		fmt.Fprintf(&b, "  - {principal: User:ANONYMOUS, resourceType: TOPIC, resourceName: inorder-bench-, patternType: PREFIXED, operation: %s}\n", op)
	}
	b.WriteString("  - {principal: \"User:*\", host: 10.20.0.1, resourceType: TOPIC, resourceName: inorder-bench-, patternType: PREFIXED, operation: ALL, permissionType: DENY}\n")
	b.WriteString("  - {principal: \"User:*\", resourceType: TOPIC, resourceName: _internal-, patternType: PREFIXED, operation: WRITE, permissionType: DENY}\n")
	serviceACLs(&b, n-7)
	return b.String()
}

// benchGuard loads benchACLs(1000) from a file under a test's temporary
// directory and returns its Guard and the file's path.
func benchGuard(tb testing.TB) (*Guard, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(benchACLs(1000)), 0o600); err != nil {
		tb.Fatal(err)
	}
	g, err := New(path, acl.Options{}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if got := g.Authorizer().Set().Len(); got != 1000 {
		tb.Fatalf("%d bindings loaded, want 1000", got)
	}
	return g, path
}

// benchClient is the bench client as the ACL proxy sees it.
func benchClient(g *Guard) acl.Client {
	return g.Client("", netip.MustParseAddr("127.0.0.1"))
}

// BenchmarkBenchProduce is the ACL work on one allowed Produce of the
// bench's 1-partition workload with the bench's 1,000 ACLs, read whole
// (kgo's small requests) or streamed from its head, and on one Fetch of
// its topic (checked in place, as a Produce is): without a connection's state
// (no decision kept, as the single topology calls it) and with it.
func BenchmarkBenchProduce(b *testing.B) {
	g, _ := benchGuard(b)
	c := benchClient(g)
	h, f := frame(b, produce(100, "inorder-bench-p1"))
	fh, ff := frame(b, benchFetch())
	for _, tc := range []struct {
		name   string
		decide func(*Conn) bool
	}{
		{"whole", func(st *Conn) bool { out, _ := g.Request(st, c, h, f, nil, false); return out.Action == Pass }},
		{"head", func(st *Conn) bool { return g.ProduceHead(st, c, h, f, len(f)) }},
		{"fetch", func(st *Conn) bool { out, _ := g.Request(st, c, fh, ff, nil, false); return out.Action == Pass }},
	} {
		for _, conn := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/conn=%v", tc.name, conn), func(b *testing.B) {
				var st *Conn
				if conn {
					st = &Conn{}
				}
				b.ReportAllocs()
				for b.Loop() {
					if !tc.decide(st) {
						b.Fatal("denied")
					}
				}
			})
		}
	}
}

// TestDecisionKeptPerConnection counts the decisions asked of the rules:
// a connection's second Produce to the same topic asks none, whether read
// whole or from its head; a reload, another principal or another topic
// asks again, and the answer after a reload is the new rules'.
func TestDecisionKeptPerConnection(t *testing.T) {
	g, path := benchGuard(t)
	c := benchClient(g)
	st := &Conn{}
	h, f := frame(t, produce(100, "inorder-bench-p1"))
	h12, f12 := frame(t, produce(100, "inorder-bench-p12"))
	request := func(h wire.RequestHeader, f []byte, c acl.Client) Action {
		t.Helper()
		out, err := g.Request(st, c, h, f, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return out.Action
	}
	expect := func(made int) {
		t.Helper()
		if st.dec.made != made {
			t.Fatalf("%d decisions asked of the rules, want %d", st.dec.made, made)
		}
	}
	for range 5 {
		if a := request(h, f, c); a != Pass {
			t.Fatalf("action %v, want Pass", a)
		}
		if !g.ProduceHead(st, c, h, f, len(f)) {
			t.Fatal("head refused")
		}
	}
	expect(1)
	request(h12, f12, c)
	request(h, f, c)
	expect(2)

	// Another principal on the connection (re-authentication) is
	// decided for itself: svc-1 may not write the bench's topics.
	svc := g.Client("User:svc-1", c.Host)
	if a := request(h, f, svc); a != Answer {
		t.Fatalf("svc-1's write: action %v, want Answer", a)
	}
	expect(3)
	if a := request(h, f, c); a != Pass {
		t.Fatalf("back to ANONYMOUS: action %v, want Pass", a)
	}
	expect(4)

	// A reload that denies the topic applies at the next request.
	deny := benchACLs(1000) + "  - {principal: User:ANONYMOUS, resourceType: TOPIC, resourceName: inorder-bench-p1, operation: WRITE, permissionType: DENY}\n"
	if err := os.WriteFile(path, []byte(deny), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if a := request(h, f, c); a != Answer {
		t.Fatalf("after the reload: action %v, want Answer", a)
	}
	if g.ProduceHead(st, c, h, f, len(f)) {
		t.Fatal("after the reload: head allowed")
	}
	expect(5)
	if a := request(h12, f12, c); a != Pass {
		t.Fatalf("after the reload, the other topic: action %v, want Pass", a)
	}
	expect(6)
}

// TestDecisionsBounded: a connection keeps decisionsKept decisions, the
// oldest replaced, and none for a name longer than nameKept; what is
// forgotten is decided again.
func TestDecisionsBounded(t *testing.T) {
	g, _ := benchGuard(t)
	c := benchClient(g)
	st := &Conn{}
	var frames [][]byte
	var hdrs []wire.RequestHeader
	for i := range decisionsKept + 1 {
		h, f := frame(t, produce(10, fmt.Sprintf("inorder-bench-%d", i)))
		hdrs, frames = append(hdrs, h), append(frames, f)
	}
	for round := range 3 {
		for i := range frames {
			if out, _ := g.Request(st, c, hdrs[i], frames[i], nil, false); out.Action != Pass {
				t.Fatalf("topic %d: action %v", i, out.Action)
			}
		}
		// Written in turn, one more than kept: each evicts the next.
		if want := (round + 1) * (decisionsKept + 1); st.dec.made != want {
			t.Fatalf("round %d: %d decisions, want %d", round, st.dec.made, want)
		}
	}
	// The last decisionsKept topics, now kept, ask nothing.
	made := st.dec.made
	for i := 1; i < len(frames); i++ {
		g.Request(st, c, hdrs[i], frames[i], nil, false)
	}
	if st.dec.made != made {
		t.Fatalf("%d decisions for topics kept", st.dec.made-made)
	}

	long := "inorder-bench-" + strings.Repeat("x", nameKept)
	h, f := frame(t, produce(10, long))
	for range 3 {
		if out, _ := g.Request(st, c, h, f, nil, false); out.Action != Pass {
			t.Fatalf("long name: action %v", out.Action)
		}
	}
	if st.dec.made != made+3 {
		t.Fatalf("long name: %d decisions, want 3", st.dec.made-made)
	}
	for i := range st.dec.e {
		if n := len(st.dec.e[i].name); n > nameKept {
			t.Fatalf("a name of %d bytes kept", n)
		}
	}
}

// TestDecisionsAgreeWithRules: what a connection keeps answers as the
// rules do, for every principal, host and topic asked in any order.
func TestDecisionsAgreeWithRules(t *testing.T) {
	g, _ := benchGuard(t)
	st := &Conn{}
	topics := []string{"inorder-bench-p1", "orders.svc-0.events", "payments.svc-1.events", "clicks.svc-7.events", "_internal-x", "orders.abc", "inorder-bench-p1"}
	clients := []acl.Client{
		benchClient(g),
		g.Client("User:svc-0", netip.MustParseAddr("127.0.0.1")),
		g.Client("User:svc-7", netip.MustParseAddr("127.0.0.1")),
		g.Client("", netip.MustParseAddr("10.20.0.1")),
	}
	for round := range 2 {
		for _, c := range clients {
			for i := range topics {
				topic := topics[(i+round)%len(topics)]
				h, f := frame(t, produce(10, topic))
				want := g.Authorizer().Authorize(c.Principal, c.Host, acl.Write, acl.Topic, topic)
				out, err := g.Request(st, c, h, f, nil, false)
				if err != nil {
					t.Fatal(err)
				}
				if got := out.Action == Pass; got != want {
					t.Errorf("%s from %v on %s: passed %v, rules say %v", c.Principal, c.Host, topic, got, want)
				}
				if got := g.ProduceHead(st, c, h, f, len(f)); got != want {
					t.Errorf("%s from %v on %s: head allowed %v, rules say %v", c.Principal, c.Host, topic, got, want)
				}
			}
		}
	}
}

// TestDecisionAllocatesNothing: an allowed Produce decided on a
// connection, read whole or from its head, allocates nothing, whether
// its topic's name fits a conversion's stack buffer or not.
func TestDecisionAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	g, _ := benchGuard(t)
	c := benchClient(g)
	for _, topic := range []string{"inorder-bench-p1", "inorder-bench-" + strings.Repeat("long", 20)} {
		st := &Conn{}
		h, f := frame(t, produce(100, topic))
		if out, _ := g.Request(st, c, h, f, nil, false); out.Action != Pass {
			t.Fatalf("%s: action %v, want Pass", topic, out.Action)
		}
		if n := testing.AllocsPerRun(100, func() { g.Request(st, c, h, f, nil, false) }); n != 0 {
			t.Errorf("%s: Request: %v allocations", topic, n)
		}
		if n := testing.AllocsPerRun(100, func() { g.ProduceHead(st, c, h, f, len(f)) }); n != 0 {
			t.Errorf("%s: ProduceHead: %v allocations", topic, n)
		}
		fetch := benchFetch()
		fetch.Topics[0].Topic = topic
		h, f = frame(t, fetch)
		if out, _ := g.Request(st, c, h, f, nil, false); out.Action != Pass {
			t.Fatalf("%s: Fetch: action %v, want Pass", topic, out.Action)
		}
		if n := testing.AllocsPerRun(100, func() { g.Request(st, c, h, f, nil, false) }); n != 0 {
			t.Errorf("%s: Fetch: %v allocations", topic, n)
		}
	}
}

// TestFetchDecisionKept: a Fetch's decisions are kept on the connection
// too: a second Fetch of the same topic asks
// the rules nothing, and a reload that denies it applies at the next.
func TestFetchDecisionKept(t *testing.T) {
	g, path := benchGuard(t)
	c := benchClient(g)
	st := &Conn{}
	h, f := frame(t, benchFetch())
	for range 3 {
		if out, err := g.Request(st, c, h, f, nil, false); err != nil || out.Action != Pass {
			t.Fatalf("action %v, %v; want Pass", out.Action, err)
		}
	}
	if st.dec.made != 1 {
		t.Fatalf("%d decisions asked of the rules for three Fetches, want 1", st.dec.made)
	}
	deny := benchACLs(1000) + "  - {principal: User:ANONYMOUS, resourceType: TOPIC, resourceName: inorder-bench-p1, operation: READ, permissionType: DENY}\n"
	if err := os.WriteFile(path, []byte(deny), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if out, _ := g.Request(st, c, h, f, nil, false); out.Action != Answer {
		t.Fatalf("after the reload: action %v, want Answer", out.Action)
	}
	if st.dec.made != 2 {
		t.Fatalf("%d decisions after the reload, want 2", st.dec.made)
	}
}

// benchFetch is a Fetch v12 of the bench's 1-partition topic.
func benchFetch() *kmsg.FetchRequest {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.ReplicaID = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "inorder-bench-p1"
	ft.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0}}
	fetch.Topics = append(fetch.Topics, ft)
	return fetch
}
