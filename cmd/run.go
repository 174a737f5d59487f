package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	level, _ := cfg.SlogLevel()
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runProxy serves until ctx ends (SIGINT or SIGTERM), then drains for the
// grace period.
func runProxy(ctx context.Context, p *proxy.Proxy, cfg config.Config, log *slog.Logger, out io.Writer) error {
	stopAdmin, err := startAdmin(cfg, p, log, out)
	if err != nil {
		p.Close()
		return err
	}
	defer stopAdmin()
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+5*time.Second)
	if err := p.Discover(dctx); err != nil {
		if errors.Is(err, proxy.ErrNodePort) {
			cancel()
			p.Close()
			return err
		}
		log.Warn("upstream not reachable yet; node listeners open when metadata names them", "err", err)
	}
	cancel()
	served := make(chan error, 1)
	go func() { served <- p.Serve() }()
	log.Info("proxy ready", "listen", p.Addr(), "upstream", cfg.Upstreams, "ordering", cfg.Ordering())
	fmt.Fprintf(out, "inorder: clients connect to %s\n", p.Addr())
	select {
	case err := <-served:
		p.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	sctx, scancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer scancel()
	if err := p.Shutdown(sctx); err != nil {
		log.Warn("grace period over; closed remaining connections", "err", err)
	}
	if err := <-served; err != nil && !errors.Is(err, proxy.ErrClosed) {
		return err
	}
	return nil
}
