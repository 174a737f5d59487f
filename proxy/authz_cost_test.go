package proxy_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestACLReloadRevokesKeptDecision: a connection that wrote a topic
// request after request, its decision kept, is refused at its next
// request once a reload denies the topic, whether the Produce is read
// whole or streams from its head.
func TestACLReloadRevokesKeptDecision(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, size := range []int{10, 256 << 10} {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a"))
				p, path, g, _ := aclProxy(t, kc, config.TopologyPorts, mode, aclTestFile(authz.Anonymous, ""))
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				req := multiProduce(9, "a", []int32{0}, []string{"v"}, size)
				send := func(corr int32) map[string]int16 { return produceVia(t, c, req, corr) }
				for corr := int32(1); corr <= 3; corr++ {
					wantCodes(t, "before", send(corr), map[string]int16{"a": 0})
				}
				deny := "  - {principal: \"" + authz.Anonymous + "\", resourceType: TOPIC, resourceName: a, operation: WRITE, permissionType: DENY}\n"
				if err := os.WriteFile(path, []byte(aclTestFile(authz.Anonymous, deny)), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := g.Reload(); err != nil {
					t.Fatal(err)
				}
				wantCodes(t, "after", send(4), map[string]int16{"a": acl.TopicAuthorizationFailed})
			})
		}
	}
}

// produceVia sends the Produce v9 req numbered corr on c and returns its
// answer's error codes by topic.
func produceVia(t *testing.T, c net.Conn, req *kmsg.ProduceRequest, corr int32) map[string]int16 {
	t.Helper()
	return produceCodes(t, produceExchange(t, c, kmsg.NewRequestFormatter().AppendRequest(nil, req, corr), corr))
}

// TestACLAllowedAllocatesNothing counts the proxy's allocations per
// allowed Produce round trip (1 and 12 partitions; the 16 KiB ones
// stream from their head) with an ACL file: as without one, none. Like
// TestQuotaNotExceededAllocatesNothing it runs without the race detector.
func TestACLAllowedAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	small := multiProduce(9, "quota", []int32{0}, []string{"p"}, 100)
	smallFrame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo")).AppendRequest(nil, small, 5)
	p1Body, p1 := quotaProduce(1)
	p12Body, p12 := quotaProduce(12)
	for _, tc := range []struct {
		name        string
		body, frame []byte
	}{
		{"small", cannedProduce(0), smallFrame},
		{"produce1", p1Body, p1},
		{"produce12", p12Body, p12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := aclCostRoundTrip(t, tc.body, tc.frame)
			if n := testing.AllocsPerRun(200, rt); n >= 0.5 {
				t.Errorf("%.2f allocations per round trip, want none", n)
			}
		})
	}
}

// aclCostRoundTrip is quotaCostRoundTrip with an ACL file that lets the
// anonymous client write the topic "quota" and no quotas.
func aclCostRoundTrip(tb testing.TB, body, frame []byte) func() {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "acls.yaml")
	text := "acls:\n  - {principal: \"" + authz.Anonymous + "\", resourceType: TOPIC, resourceName: quo, patternType: PREFIXED, operation: WRITE}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	g, err := authz.New(path, acl.Options{}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rt, _ := quotaCostRoundTrip(tb, body, frame, "", metrics.New(), proxy.WithAuthorization(g))
	return rt
}
