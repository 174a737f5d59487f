package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// newLogger returns the logger cfg asks for and its level, which a reload
// changes in place.
func newLogger(w io.Writer, cfg config.Config) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	if l, err := cfg.SlogLevel(); err == nil {
		level.Set(l)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), level
	}
	return slog.New(slog.NewTextHandler(w, opts)), level
}

// reloadSource is where a command's configuration came from, so that a
// reload can read it again the same way.
type reloadSource struct {
	flags *pflag.FlagSet
	base  config.Config
	// adjust applies what the command applied to the configuration at
	// start; nil changes nothing.
	adjust func(*config.Config)
	level  *slog.LevelVar
	// hooks run on every reload, for what is re-read from files of its
	// own (certificates).
	hooks []func() error
}

// stopped is what a stop drained, for the last log line.
type stopped struct {
	conns   int           // client connections open when the stop began
	drained bool          // every one delivered its in-flight responses in time
	took    time.Duration // from the signal to the last connection closed
}

// logStopped writes the last line of a run, so that a clean stop reads
// differently from a hang.
func logStopped(log *slog.Logger, s stopped, extra ...any) {
	args := append([]any{"connections", s.conns, "drained", s.drained, "took", s.took.Round(time.Millisecond)}, extra...)
	log.Info("stopped", args...)
}

// runProxy serves until ctx ends (SIGINT or SIGTERM), then drains for the
// grace period. A signal before the proxy serves is a normal stop too.
func runProxy(ctx context.Context, p *proxy.Proxy, cfg config.Config, log *slog.Logger, out io.Writer, src reloadSource) (_ stopped, err error) {
	report, err := openReport(cfg)
	if err != nil {
		p.Close()
		return stopped{}, err
	}
	defer func() { err = finishVerify(p, cfg, report, log, err) }()
	stopAdmin, err := startAdmin(cfg, p, log, out)
	if err != nil {
		p.Close()
		return stopped{}, err
	}
	defer stopAdmin()
	rl := &reloader{flags: src.flags, base: src.base, adjust: src.adjust, apply: p.Reload, level: src.level,
		log: log, m: p.Metrics(), hooks: append(slices.Clone(src.hooks), p.ReloadCertificates), running: cfg}
	rctx, stopReload := context.WithCancel(ctx)
	reloading := make(chan struct{})
	go func() {
		defer close(reloading)
		rl.run(rctx)
	}()
	defer func() {
		stopReload()
		<-reloading
	}()
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+5*time.Second)
	err = p.Discover(dctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		p.Close()
		return stopped{drained: true}, nil
	case errors.Is(err, proxy.ErrNodePort):
		p.Close()
		return stopped{}, err
	case errors.Is(err, proxy.ErrUpstreamNeedsCredentials):
		log.Info("the upstream answers but lists its brokers only to authenticated clients; with SASL passed through, node listeners open when the metadata clients receive names them",
			"upstream", cfg.Upstreams)
	case err != nil:
		log.Warn("no upstream could be reached: clients will be disconnected until one answers; node listeners open when metadata names them",
			"upstream", cfg.Upstreams, "err", err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve() }()
	log.Info("proxy ready", "listen", p.Addr(), "upstream", cfg.Upstreams, "ordering", cfg.Ordering())
	fmt.Fprintf(out, "inorder: clients connect to %s\n", p.Addr())
	select {
	case err := <-served:
		p.Close()
		return stopped{}, err
	case <-ctx.Done():
	}
	grace := rl.current().ShutdownGrace
	log.Info("shutting down", "grace", grace)
	start := time.Now()
	s := stopped{conns: p.Stats().Conns, drained: true}
	sctx, scancel := context.WithTimeout(context.Background(), grace)
	defer scancel()
	if err := p.Shutdown(sctx); err != nil {
		s.drained = false
		log.Warn("grace period over; closed remaining connections", "err", err)
	}
	s.took = time.Since(start)
	if err := <-served; err != nil && !errors.Is(err, proxy.ErrClosed) {
		return s, err
	}
	return s, nil
}
