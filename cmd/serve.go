package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/proxy"
)

func newServeCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve --upstream HOST:PORT[,HOST:PORT...]",
		Short: "Proxy an existing Kafka-compatible cluster",
		Long: `serve puts inorder in front of an existing cluster. Clients use the
bootstrap listener (--listen); every upstream node gets a listener of its
own on the same host, at --node-port-base + node id (default: bootstrap
port + 1 + node id), and every broker address the upstream hands out is
rewritten to those listeners.`,
		Args: noArgs,
	}
	cfg := config.Default()
	fs := c.Flags()
	fs.String(config.FlagConfig, "", "YAML file with the same keys as the flags")
	config.BindFlags(fs, &cfg)
	c.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := config.Resolve(c.Flags(), config.Default())
		if err != nil {
			return usage(err)
		}
		setMemoryLimit(cfg)
		log, level := newLogger(c.ErrOrStderr(), cfg)
		m := newMetrics(cfg)
		auth, err := newClientAuth(cfg, m, log)
		if err != nil {
			return err
		}
		defer auth.close()
		guard, err := newACLGuard(cfg, m, log)
		if err != nil {
			return err
		}
		ids, err := newUpstreamIdentities(cfg, log)
		if err != nil {
			return err
		}
		b := budget.New(cfg.Memory())
		trail, err := newAudit(cfg, b, m, log)
		if err != nil {
			return err
		}
		opts := append(append(append(auth.options(), guard.options()...), ids.options()...), proxy.WithMetrics(m), proxy.WithBudget(b))
		p, err := proxy.New(cfg, log, append(opts, trail.options()...)...)
		if err != nil {
			trail.shutdown(context.Background(), log)
			return err
		}
		defer auth.watch(c.Context())()
		defer guard.watch(c.Context())()
		defer ids.watch(c.Context())()
		hooks := append(append(auth.hooks(), guard.hooks()...), ids.hooks()...)
		s, err := runProxy(c.Context(), p, trail, cfg, log, c.OutOrStdout(), reloadSource{flags: c.Flags(), base: config.Default(), level: level, hooks: hooks})
		if err == nil {
			logStopped(log, s)
		}
		return err
	}
	return c
}
