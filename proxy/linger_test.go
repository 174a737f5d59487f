package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
)

// TestReaderLingerSlowResponses: responses far slower than the upstream
// reader's linger (20 ms) arrive whether their request went while the
// reader lingered or after it had ended: the linger's read deadline never
// outlives the linger.
func TestReaderLingerSlowResponses(t *testing.T) {
	b := newReorderer(t, 150*time.Millisecond, 150*time.Millisecond, "t")
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
