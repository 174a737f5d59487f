package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// auditTrail is the audit trail of a run; its zero value (no sink
// configured) records nothing and costs the proxy a nil check.
type auditTrail struct {
	t *audit.Trail
}

// newAudit builds the trail the configuration asks for. The trail's queue
// is reserved from b, the proxy's own memory budget, so that the process
// keeps one bound; its metrics go on m's registry when the admin endpoint
// serves one.
func newAudit(cfg config.Config, b *budget.Budget, m *metrics.Metrics, log *slog.Logger) (auditTrail, error) {
	var am *audit.Metrics
	if m != nil {
		am = audit.NewMetrics(m.Registry())
	}
	host, _ := os.Hostname()
	src := audit.NewSource(host + "-" + time.Now().UTC().Format("20060102T150405.000000000Z"))
	t, err := audit.FromConfig(&cfg, src, b, am, log)
	if err != nil {
		return auditTrail{}, err
	}
	return auditTrail{t: t}, nil
}

// options are the proxy options that make it record into the trail.
func (a auditTrail) options() []proxy.Option {
	if a.t == nil {
		return nil
	}
	return []proxy.Option{proxy.WithRecorder(a.t)}
}

// ready adds the trail's health to the proxy's readiness: a sink that
// fails or stalls means the events are not being written, so the proxy
// asks not to be sent traffic it cannot account for.
func (a auditTrail) ready(proxyReady func() error) func() error {
	return func() error {
		if err := proxyReady(); err != nil {
			return err
		}
		if a.t != nil {
			if err := a.t.Err(); err != nil {
				return fmt.Errorf("%w: %w", proxy.ErrNotReady, err)
			}
		}
		return nil
	}
}

// shutdown writes every queued event, after the connections have drained
// (their closes record their last summaries), within what is left of ctx.
func (a auditTrail) shutdown(ctx context.Context, log *slog.Logger) {
	if a.t == nil {
		return
	}
	if err := a.t.Shutdown(ctx); err != nil {
		log.Warn("audit trail not flushed whole at stop", "err", err)
	}
}
