package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/devcluster"
	"github.com/inorder-proxy/inorder/internal/budget"
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

// devDefault is dev's configuration before flags and file: serve's, with
// an admin endpoint on a free loopback port, since dev is for trying
// things and its metrics and probes are part of that.
func devDefault() config.Config {
	cfg := config.Default()
	cfg.AdminListen = "127.0.0.1:0"
	return cfg
}

func newDevCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded Kafka-compatible broker behind the proxy",
		Long: `dev starts an embedded broker (franz-go's kfake, three nodes) and the
proxy in front of it, and prints the address clients should use, and the
embedded broker's own addresses for comparisons that bypass the proxy
(inorder bench --compare direct=ADDRESS).

The ports follow --listen, so that every start gives the same addresses:
the proxy's node N listens on the --listen port + 1 + N (or on
--node-port-base + N), and the embedded brokers on 127.0.0.1 at the ports
just above the proxy's highest. With the defaults: clients connect to
127.0.0.1:9092, the nodes are at 9093-9095 and the embedded brokers at
127.0.0.1:9096-9098. A --listen port of 0 picks free ports for all of them.

Like an Apache Kafka broker with its defaults, it creates a topic the first
time a client names it, with --default-partitions partitions.

The data is kept in --data-dir, so a restart keeps the records; each
partition keeps at most --retention-bytes and nothing older than
--retention-time. --reset deletes the data before starting.`,
		Args: noArgs,
	}
	cfg := devDefault()
	fs := c.Flags()
	fs.String(config.FlagConfig, "", "YAML file with the same keys as the flags")
	config.BindFlags(fs, &cfg)
	// dev binds every setting, so that its file and serve's share keys,
	// but shows and takes only those that mean something in front of its
	// own brokers.
	config.Refuse(fs, "is not used by dev, which embeds its backend; use serve", "upstream")
	config.Refuse(fs, "does not apply to dev, whose embedded brokers speak plaintext without SASL; use serve",
		"upstream-tls", "upstream-tls-ca", "upstream-tls-cert", "upstream-tls-key", "upstream-tls-server-name",
		"upstream-tls-insecure-skip-verify", "upstream-sasl-mechanism", "upstream-sasl-username",
		"upstream-sasl-password-file", "upstream-sasl-token-file", "allow-unauthenticated-clients", "upstream-principal-credentials")
	config.Refuse(fs, "does not apply to dev, whose brokers are its own, on loopback; use serve", "allow-upstream")
	dataDir := fs.String("data-dir", defaultDataDir(), "directory keeping the embedded broker's data; empty keeps it in memory")
	brokers := fs.Int("brokers", 3, "number of embedded brokers")
	partitions := fs.Int("default-partitions", 1, "partitions of a topic created on first use, or without a count (Kafka's num.partitions)")
	var retentionBytes int64
	config.SizeVar(fs, &retentionBytes, "retention-bytes", 256<<20, "data each partition keeps; older records are deleted past it (0: no bound)")
	retentionTime := fs.Duration("retention-time", 7*24*time.Hour, "age past which records are deleted (0: no bound)")
	reset := fs.Bool("reset", false, "delete the data in --data-dir before starting")
	c.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := config.Resolve(fs, devDefault(), func(cfg *config.Config) error {
			_, err := devPorts(*cfg, *brokers)
			return err
		})
		if err != nil {
			return usage(err)
		}
		if *brokers < 1 {
			return config.InvalidFlag(fs, "brokers", "must be at least 1")
		}
		if *partitions < 1 {
			return config.InvalidFlag(fs, "default-partitions", "must be at least 1")
		}
		if *retentionTime < 0 {
			return config.InvalidFlag(fs, "retention-time", "must not be negative (0: no bound)")
		}
		ports, _ := devPorts(cfg, *brokers) // Resolve refused a layout that cannot work
		log, level := newLogger(c.ErrOrStderr(), cfg)
		// Nothing starts before the data directory and the port are ours:
		// a second dev on the same directory would corrupt it, and one
		// that cannot listen has nothing to offer.
		var lock *devcluster.DirLock
		if *dataDir != "" {
			if lock, err = devcluster.Lock(*dataDir); err != nil {
				return dataDirError(*dataDir, *reset, err)
			}
			defer lock.Unlock()
		}
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return config.ListenError("--listen", cfg.Listen, err, "is inorder dev running?")
		}
		served := false
		defer func() {
			if !served {
				ln.Close()
			}
		}()
		if *reset && lock != nil {
			if err := lock.Reset(); errors.Is(err, devcluster.ErrNotDataDir) {
				return usage(fmt.Errorf("--reset: --data-dir %w", err))
			} else if err != nil {
				return err
			}
			log.Info("data reset", "data_dir", *dataDir)
		}
		ctx := c.Context()
		began := time.Now()
		kc, err := devcluster.Start(ctx, devcluster.Options{
			Brokers: *brokers, DataDir: *dataDir, Partitions: *partitions,
			RetentionBytes: retentionBytes, RetentionTime: *retentionTime,
			Ports: ports.direct,
		})
		if err != nil {
			if ctx.Err() != nil {
				log.Info("stopped during start-up", "data_dir", *dataDir)
				return nil
			}
			return directPortError(err)
		}
		stopBroker := func(s stopped) {
			kc.Close()
			logStopped(log, s, "data_dir", *dataDir)
		}
		if ctx.Err() != nil {
			stopBroker(stopped{drained: true})
			return nil
		}
		log.Info("embedded broker started", "took", time.Since(began).Round(time.Millisecond), "brokers", *brokers, "data_dir", *dataDir,
			"retention_bytes", config.FormatSize(retentionBytes), "retention_time", *retentionTime, "default_partitions", *partitions)
		cfg.Upstreams = kc.ListenAddrs()
		m := newMetrics(cfg)
		auth, err := newClientAuth(cfg, m, log)
		if err != nil {
			kc.Close()
			return err
		}
		defer auth.close()
		guard, err := newACLGuard(cfg, m, log)
		if err != nil {
			kc.Close()
			return err
		}
		b := budget.New(cfg.Memory())
		trail, err := newAudit(cfg, b, m, log)
		if err != nil {
			kc.Close()
			return err
		}
		opts := append(append(auth.options(), guard.options()...), proxy.WithListener(ln), proxy.WithVersions(kc.Versions), proxy.WithFixup(devcluster.Fixup{}), proxy.WithMetrics(m), proxy.WithBudget(b))
		p, err := proxy.New(cfg, log, append(opts, trail.options()...)...)
		if err != nil {
			trail.shutdown(context.Background(), log)
			kc.Close()
			return err
		}
		defer auth.watch(ctx)()
		defer guard.watch(ctx)()
		served = true
		fmt.Fprintf(c.OutOrStdout(), "inorder: embedded broker at %s (direct, bypassing the proxy: for comparisons only)\n",
			strings.Join(kc.ListenAddrs(), ","))
		adminListen := cfg.AdminListen
		s, err := runProxy(ctx, p, trail, cfg, log, c.OutOrStdout(), reloadSource{flags: c.Flags(), base: devDefault(), level: level, hooks: append(auth.hooks(), guard.hooks()...),
			adjust: func(next *config.Config) {
				next.Upstreams = kc.ListenAddrs()
				next.AdminListen = adminListen
			}})
		if err != nil {
			kc.Close()
			return err
		}
		stopBroker(s)
		return nil
	}
	return c
}

// directPortError explains an embedded broker's port that could not be
// listened on; other errors pass through.
func directPortError(err error) error {
	var pe *devcluster.PortError
	if !errors.As(err, &pe) {
		return err
	}
	return config.Explain(err, fmt.Sprintf("embedded broker %d at %s: %s (the embedded brokers listen just above the proxy's ports: free the port, or choose another --listen; --listen port 0 picks free ports)",
		pe.Node, pe.Addr, config.ListenReason(pe.Err)))
}

// dataDirError explains a data directory that could not be taken: another
// dev holding it, named by its process id, and the way out.
func dataDirError(dir string, reset bool, err error) error {
	var le *devcluster.LockedError
	if !errors.As(err, &le) {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	holder := "another inorder dev"
	if le.PID != 0 {
		holder += fmt.Sprintf(" (pid %d)", le.PID)
	}
	if reset {
		return config.Explain(err, fmt.Sprintf("--reset: --data-dir %s is in use by %s (stop it first; its data was not touched)", dir, holder))
	}
	return config.Explain(err, fmt.Sprintf("--data-dir %s: in use by %s (stop it, or choose another --data-dir; --data-dir \"\" keeps the data in memory)", dir, holder))
}

// portLayout is where dev's fixed ports go: the --listen port, the
// proxy's node listeners (--topology ports only; the other topologies open
// none), node N on the port after --listen's plus N or on --node-port-base
// plus N, and the embedded brokers' own ports (their direct addresses, on
// 127.0.0.1) just above the highest of those, so that a restart gives the
// same direct addresses and they can never take a port of the proxy's.
type portLayout struct {
	listen int   // 0: every port is picked free, none is fixed but --node-port-base's
	nodes  []int // by node id; nil when none is fixed
	direct []int // by node id; nil: free ports, with --listen port 0
}

// devPorts works out the ports dev will open at fixed numbers and refuses,
// as asked wrongly, a layout that cannot work: a port past 65535, a node
// on the --listen port, an admin endpoint on one of them. config.Resolve
// runs it, before anything starts, so that such a start prints nothing;
// found later, the proxy would have printed its addresses and then failed.
func devPorts(cfg config.Config, brokers int) (portLayout, error) {
	var l portLayout
	host, port, _ := net.SplitHostPort(cfg.Listen) // Validate checked it
	l.listen, _ = strconv.Atoi(port)
	// from names the setting the highest fixed ports follow, value is its
	// port and rule how they follow it, for the error about a port past
	// 65535, which says what to set and the most it can be.
	from, value, rule := "listen", l.listen, fmt.Sprintf("the embedded brokers take the %d ports above it", brokers)
	top := l.listen
	if cfg.Topology == "" || cfg.Topology == config.TopologyPorts {
		base := cfg.NodePortBase
		switch {
		case base != 0:
			if l.listen != 0 && base <= l.listen && l.listen < base+brokers {
				return l, refusePort(cfg, "node-port-base", fmt.Sprintf("puts node %d on the --listen port, %d (node N listens on --node-port-base + N)", l.listen-base, l.listen))
			}
			if base+brokers-1 > l.listen {
				from, value, rule = "node-port-base", base, fmt.Sprintf("the nodes take the %d ports from it and the embedded brokers the next %d", brokers, brokers)
			}
		case l.listen != 0:
			base = l.listen + 1
			rule = fmt.Sprintf("the nodes take the %d ports above it and the embedded brokers the next %d", brokers, brokers)
		}
		if base != 0 {
			for id := range brokers {
				l.nodes = append(l.nodes, base+id)
			}
			top = max(top, base+brokers-1)
		}
	}
	if l.listen == 0 {
		rule = fmt.Sprintf("the nodes take the %d ports from it", brokers)
	} else {
		for id := range brokers {
			l.direct = append(l.direct, top+1+id)
		}
	}
	names := l.names()
	for _, s := range names {
		if s.port > 65535 {
			last := names[len(names)-1].port
			way := fmt.Sprintf("choose a base up to %d", 65535-(last-value))
			if from == "listen" {
				way = fmt.Sprintf("choose a port up to %d, or 0 for free ports", 65535-(last-value))
			}
			return l, refusePort(cfg, from, fmt.Sprintf("puts %s on port %d, past 65535 (with --brokers %d, %s: %s)", s.name, s.port, brokers, rule, way))
		}
	}
	if cfg.AdminListen != "" {
		ahost, aport, _ := net.SplitHostPort(cfg.AdminListen)
		a, _ := strconv.Atoi(aport)
		for _, s := range names {
			on := host
			if s.direct {
				on = "127.0.0.1"
			}
			if a != 0 && s.port == a && sameInterface(on, ahost) {
				return l, refusePort(cfg, "admin-listen", fmt.Sprintf("is on %s (choose another port, or 0 for a free one)", s.what))
			}
		}
	}
	return l, nil
}

// portName is a fixed port of a portLayout and what listens on it.
type portName struct {
	port   int
	name   string // "node 1"
	what   string // "node 1's port"
	direct bool   // an embedded broker's, on 127.0.0.1
}

// names lists l's fixed ports, the --listen port first, then the nodes'
// and the embedded brokers', each in node id order.
func (l portLayout) names() []portName {
	var out []portName
	if l.listen != 0 {
		out = append(out, portName{port: l.listen, name: "the --listen port", what: "the --listen port"})
	}
	for id, p := range l.nodes {
		out = append(out, portName{port: p, name: fmt.Sprintf("node %d", id), what: fmt.Sprintf("node %d's port", id)})
	}
	for id, p := range l.direct {
		out = append(out, portName{port: p, name: fmt.Sprintf("embedded broker %d", id), what: fmt.Sprintf("embedded broker %d's port", id), direct: true})
	}
	return out
}

// refusePort is the error for setting key of cfg (listen, node-port-base
// or admin-listen), which config.Resolve words as the setting was given.
func refusePort(cfg config.Config, key, reason string) error {
	value := map[string]string{"listen": cfg.Listen, "node-port-base": strconv.Itoa(cfg.NodePortBase), "admin-listen": cfg.AdminListen}[key]
	return &config.FieldError{Field: key, Value: value, Reason: reason}
}

// sameInterface reports whether listeners on hosts a and b can share a
// port number's fate: the same host, or either on every interface.
func sameInterface(a, b string) bool {
	unspecified := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	loopback := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}
	return a == b || unspecified(a) || unspecified(b) || loopback(a) && loopback(b)
}
