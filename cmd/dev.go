package cmd

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/devcluster"
	"github.com/inorder-proxy/inorder/proxy"
)

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "inorder", "dev")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "inorder", "dev")
	}
	return filepath.Join(os.TempDir(), "inorder-dev")
}

func newDevCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded Kafka-compatible broker behind the proxy",
		Long: `dev starts an embedded broker (franz-go's kfake, three nodes, data kept in
--data-dir so a restart keeps the records) and the proxy in front of it,
and prints the one address clients should use.`,
		Args: cobra.NoArgs,
	}
	cfg := config.Default()
	fs := c.Flags()
	fs.String(config.FlagConfig, "", "YAML file with the same keys as the flags")
	config.BindFlags(fs, &cfg)
	dataDir := fs.String("data-dir", defaultDataDir(), "directory keeping the embedded broker's data; empty keeps it in memory")
	brokers := fs.Int("brokers", 3, "number of embedded brokers")
	c.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := config.Resolve(c.Flags(), config.Default())
		if err != nil {
			return err
		}
		if len(cfg.Upstreams) > 0 {
			return &config.FieldError{Field: "upstream", Value: cfg.Upstreams[0], Reason: "is not used by dev, which embeds its backend; use serve"}
		}
		if cfg.AdminListen == "" && !c.Flags().Changed("admin-listen") {
			// dev is for trying things: show the metrics and probes too.
			cfg.AdminListen = "127.0.0.1:0"
		}
		log := newLogger(c.ErrOrStderr(), cfg)
		kc, err := devcluster.Start(c.Context(), devcluster.Options{Brokers: *brokers, DataDir: *dataDir})
		if err != nil {
			return err
		}
		defer kc.Close()
		log.Info("embedded broker started", "brokers", *brokers, "data_dir", *dataDir)
		cfg.Upstreams = kc.ListenAddrs()
		p, err := proxy.New(cfg, log, proxy.WithVersions(kc.Versions), proxy.WithFixup(devcluster.Fixup{}), proxy.WithMetrics(newMetrics(cfg)))
		if err != nil {
			return err
		}
		return runProxy(c.Context(), p, cfg, log, c.OutOrStdout())
	}
	return c
}
