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
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), level
	}
	return slog.New(slog.NewTextHandler(w, opts)), level
}

// durationText writes a duration the way its flag is written ("8ms",
// "168h0m0s"), in both formats: slog's JSON handler would write integer
// nanoseconds, beside sizes written as text ("256MiB"). slog calls it for
// the attributes inside groups too.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
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
// grace period. The proxy accepts clients before anything slow starts, so
// a stop at any moment drains what the listener took in, and readiness
// says ready only once it accepts and an upstream answered.
func runProxy(ctx context.Context, p *proxy.Proxy, trail auditTrail, cfg config.Config, log *slog.Logger, out io.Writer, src reloadSource) (_ stopped, err error) {
	report, err := openReport(cfg)
	if err != nil {
		p.Close()
		return stopped{}, err
	}
	defer func() { err = finishVerify(p, cfg, report, log, err) }()
	if err := p.Start(); err != nil {
		trail.shutdown(context.Background(), log)
		return stopped{}, err
	}
	log.Info("accepting clients", "listen", p.Addr())
	stopAdmin, err := startAdmin(cfg, p, trail.ready(p.Ready), log, out)
	if err != nil {
		p.Close()
		trail.shutdown(context.Background(), log)
		return stopped{}, err
	}
	defer stopAdmin()
	rl := &reloader{flags: src.flags, base: src.base, adjust: src.adjust, apply: p.Reload, level: src.level,
		log: log, m: p.Metrics(), hooks: append(slices.Clone(src.hooks), p.ReloadCertificates), running: cfg, wanted: cfg}
	rctx, stopReload := context.WithCancel(ctx)
	reloading := make(chan struct{})
	runReload := rl.start()
	go func() {
		defer close(reloading)
		runReload(rctx)
	}()
	defer func() {
		stopReload()
		<-reloading
	}()
	retrying, err := discoverAtStart(ctx, p, cfg, log)
	defer func() { <-retrying }()
	if err != nil {
		drain(p, trail, rl.current().ShutdownGrace, log)
		return stopped{}, err
	}
	if ctx.Err() == nil {
		fmt.Fprintf(out, "inorder: clients connect to %s\n", p.Addr())
	}
	<-ctx.Done()
	return drain(p, trail, rl.current().ShutdownGrace, log), nil
}

// Discovery retries after a start-up that reached no upstream: the first
// after discoverRetryMin, each wait twice the one before, at most
// discoverRetryMax.
const (
	discoverRetryMin = time.Second
	discoverRetryMax = 30 * time.Second
)

// discoverAtStart runs the start-up discovery. When no upstream answers,
// it says so and goes on trying in the background until one does or ctx
// ends; the returned channel closes when that is over. The error is the
// one that ends a start: a node listener that cannot open.
func discoverAtStart(ctx context.Context, p *proxy.Proxy, cfg config.Config, log *slog.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	err := discoverOnce(ctx, p, cfg)
	switch {
	case ctx.Err() != nil, err == nil:
	case errors.Is(err, proxy.ErrNodePort):
		close(done)
		return done, err
	case errors.Is(err, proxy.ErrUpstreamNeedsCredentials):
		log.Info("the upstream answers but lists its brokers only to authenticated clients; with SASL passed through, node listeners open when the metadata clients receive names them",
			"upstream", cfg.Upstreams)
	default:
		log.Warn("no upstream could be reached: clients will be disconnected until one answers; node listeners open when metadata names them",
			"upstream", cfg.Upstreams, "err", err)
		go func() {
			defer close(done)
			retryDiscovery(ctx, p, cfg, log)
		}()
		return done, nil
	}
	close(done)
	return done, nil
}

// retryDiscovery repeats the discovery with back-off until an upstream
// answers or ctx ends, so that the node listeners open and the proxy turns
// ready without waiting for a client or a readiness probe.
func retryDiscovery(ctx context.Context, p *proxy.Proxy, cfg config.Config, log *slog.Logger) {
	wait := discoverRetryMin
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch err := discoverOnce(ctx, p, cfg); {
		case err == nil, errors.Is(err, proxy.ErrUpstreamNeedsCredentials):
			return
		case errors.Is(err, proxy.ErrNodePort):
			log.Warn("the upstream answered, but a node listener could not open; it is retried when metadata names the node", "err", err)
			return
		}
		wait = min(2*wait, discoverRetryMax)
		t.Reset(wait)
	}
}

// discoverOnce runs one discovery, bounded by the dial timeout and by ctx.
func discoverOnce(ctx context.Context, p *proxy.Proxy, cfg config.Config) error {
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+5*time.Second)
	defer cancel()
	return p.Discover(dctx)
}

// drain stops the proxy: readiness turns false, the listeners close, and
// open connections deliver what is in flight within grace; then what is
// left is closed, and the audit trail writes what its queue holds within
// the same grace.
func drain(p *proxy.Proxy, trail auditTrail, grace time.Duration, log *slog.Logger) stopped {
	log.Info("shutting down", "grace", grace)
	start := time.Now()
	s := stopped{conns: p.Stats().Conns, drained: true}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		s.drained = false
		log.Warn("grace period over; closed remaining connections", "err", err)
	}
	trail.shutdown(sctx, log)
	s.took = time.Since(start)
	return s
}
