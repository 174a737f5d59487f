package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/inorder-proxy/inorder/admin"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// newMetrics returns the metrics the proxy records into: nil (nothing
// recorded, nothing paid) unless the admin endpoint will serve them.
func newMetrics(cfg config.Config) *metrics.Metrics {
	if cfg.AdminListen == "" {
		return nil
	}
	m := metrics.New()
	b := currentBuild()
	m.BuildInfo(b.Version, b.revisionLabel())
	return m
}

// startAdmin serves the admin endpoint when configured and returns the
// function that stops it; the caller stops it after the proxy has drained,
// so that /readyz answers 503 throughout the drain. ready is what /readyz
// reports: the proxy's readiness and the audit trail's health.
func startAdmin(cfg config.Config, p *proxy.Proxy, ready func() error, log *slog.Logger, out io.Writer) (stop func(), err error) {
	if cfg.AdminListen == "" {
		return func() {}, nil
	}
	s, err := admin.Listen(admin.Options{
		Listen:  cfg.AdminListen,
		Pprof:   cfg.AdminPprof,
		Metrics: p.Metrics(),
		Ready:   ready,
		Log:     log,
	})
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	log.Info("admin endpoint", "listen", s.Addr(), "pprof", cfg.AdminPprof)
	fmt.Fprintf(out, "inorder: admin endpoint at http://%s (/metrics, /healthz, /readyz)\n", s.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-served; err != nil {
			log.Warn("admin endpoint failed", "err", err)
		}
	}, nil
}
