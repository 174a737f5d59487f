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

// manyACLs is an ACL file of n bindings as an operator keeps them for
// many services (as bench/run.sh writes for its security section):
// Literal and Prefixed topics with prefixes of many lengths, groups,
// transactional ids, hosts and DENY rules, User:* among them. svc-7 may
// write clicks.svc-7.events and nothing under payments.
func manyACLs(n int) string {
	var b strings.Builder
	b.WriteString("acls:\n")
	b.WriteString("  - {principal: \"User:*\", resourceType: TOPIC, resourceName: _internal-, patternType: PREFIXED, operation: WRITE, permissionType: DENY}\n")
	serviceACLs(&b, n-1)
	return b.String()
}

// serviceACLs writes n bindings of services svc-0, svc-1... eight each:
// Literal and Prefixed topic names of many lengths, Literal and Prefixed
// groups, a DENY from one host and transactional ids.
func serviceACLs(b *strings.Builder, n int) {
	domains := []string{"orders", "payments", "inventory", "shipping", "billing", "users", "audit-log", "clicks", "search", "recs"}
	m := 0
	for i := 0; m < n; i++ {
		svc, d := fmt.Sprintf("svc-%d", i), domains[i%len(domains)]
		lines := []string{
			fmt.Sprintf("{principal: User:%s, resourceType: TOPIC, resourceName: %s.%s.events, operation: WRITE}", svc, d, svc),
			fmt.Sprintf("{principal: User:%s, resourceType: TOPIC, resourceName: %s.%s.events, operation: READ}", svc, d, svc),
			fmt.Sprintf("{principal: User:%s, resourceType: TOPIC, resourceName: %s.%s, patternType: PREFIXED, operation: READ}", svc, d, "abcdefghijklmnopqrstuvwxyz"[:i%23+1]),
			fmt.Sprintf("{principal: User:%s, resourceType: TOPIC, resourceName: %s-, patternType: PREFIXED, operation: DESCRIBE}", svc, d),
			fmt.Sprintf("{principal: User:%s, resourceType: GROUP, resourceName: %s-consumers, operation: READ}", svc, svc),
			fmt.Sprintf("{principal: User:%s, resourceType: GROUP, resourceName: %s-, patternType: PREFIXED, operation: DESCRIBE}", svc, svc),
			fmt.Sprintf("{principal: User:%s, host: 10.%d.%d.%d, resourceType: TOPIC, resourceName: %s.private, operation: ALL, permissionType: DENY}", svc, i%250, i%7, i%200+1, d),
			fmt.Sprintf("{principal: User:%s, resourceType: TRANSACTIONAL_ID, resourceName: %s-tx-, patternType: PREFIXED, operation: WRITE}", svc, svc),
		}
		for k := 0; k < len(lines) && m < n; k++ {
			b.WriteString("  - " + lines[k] + "\n")
			m++
		}
	}
}

func manyACLsGuard(b *testing.B, n int) *Guard {
	b.Helper()
	path := filepath.Join(b.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(manyACLs(n)), 0o600); err != nil {
		b.Fatal(err)
	}
	g, err := New(path, acl.Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if got := g.Authorizer().Set().Len(); got != n {
		b.Fatalf("%d bindings loaded, want %d", got, n)
	}
	return g
}

// BenchmarkDeniedProduce is what a Produce of one 1 KiB record to a topic
// the client may not write costs the proxy with 1,000 ACLs loaded: the
// topics read in place, the decision, the request decoded for the full
// check, the denial counted (and its log line, at most one in 10 s,
// skipped) and the answer, TOPIC_AUTHORIZATION_FAILED for the partition,
// encoded. Nothing reaches the upstream.
func BenchmarkDeniedProduce(b *testing.B) {
	g := manyACLsGuard(b, 1000)
	c := g.Client("User:svc-7", netip.MustParseAddr("10.0.0.1"))
	req := produce(1<<10, "payments.svc-7.events")
	h, f := frame(b, req)
	out, err := g.Request(nil, c, h, f, nil, false)
	if err != nil || out.Action != Answer {
		b.Fatalf("action %v, %v; want Answer", out.Action, err)
	}
	off, err := wire.ResponseBody(out.Response, h.ResponseFlexible())
	if err != nil {
		b.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = h.Version
	if err := resp.ReadFrom(out.Response[off:]); err != nil {
		b.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != acl.TopicAuthorizationFailed {
		b.Fatalf("error code %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Answer {
			b.Fatal(out.Action)
		}
	}
}

// BenchmarkAllowedProduce1000 is the same Produce to a topic the client
// may write, with the same 1,000 ACLs: the path every allowed write
// takes, nothing decoded.
func BenchmarkAllowedProduce1000(b *testing.B) {
	g := manyACLsGuard(b, 1000)
	c := g.Client("User:svc-7", netip.MustParseAddr("10.0.0.1"))
	h, f := frame(b, produce(1<<10, "clicks.svc-7.events"))
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Pass {
			b.Fatal(out.Action)
		}
	}
}
