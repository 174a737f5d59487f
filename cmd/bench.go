package cmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/bench"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/tlsconf"
)

func newBenchCommand() *cobra.Command {
	var (
		bootstrap string
		compare   []string
		ratioTo   []string
		cpuPIDs   map[string]int
		pidFiles  map[string]string
		before    string
		quiet     bool
		tlsCA     string
		tlsNames  []string
	)
	o := bench.Default()
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure a Kafka path: produce and consume throughput, produce latency",
		Long: `bench drives a workload with the franz-go client against a bootstrap
address and reports records/s, MB/s and produce latency percentiles.

With --compare it runs the same workload against more addresses, one after
the other in every round, and reports each figure as the median over rounds
with the median per-round ratio to the compared addresses, so that a proxy
can be measured against the broker it fronts on the same machine.

Addresses may be named. To measure what the proxy costs in front of
inorder dev, compare it with the embedded broker's own address, which dev
prints next to the one clients use ("embedded broker at ...") and which
follows dev's --listen, the same at every start (with dev's defaults):

  inorder bench --bootstrap inorder=127.0.0.1:9092 --compare direct=127.0.0.1:9096

A topic the run creates is deleted at the end (--keep-topic keeps it), so
repeated runs do not fill the broker's disk.

With --before-round a command (run by sh) starts every round, and the run
ends if it fails; with --cpu-pid-file the process measured on a path is the
one whose id a file holds as a window starts. Together they measure a fresh
process each round: a command that restarts the proxies and writes their
ids keeps what one process costs over another of the same build out of
every round but its own.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts := o
			t, err := bench.ParseTarget(bootstrap)
			if err != nil {
				return usage(&config.FieldError{Field: "--bootstrap", Value: bootstrap, Reason: "has no address: write [NAME=]HOST:PORT"})
			}
			opts.Targets = []bench.Target{t}
			for _, s := range compare {
				t, err := bench.ParseTarget(s)
				if err != nil {
					return usage(&config.FieldError{Field: "--compare", Value: s, Reason: "has no address: write [NAME=]HOST:PORT"})
				}
				opts.Targets = append(opts.Targets, t)
			}
			if err := benchTLS(opts.Targets, tlsNames, tlsCA); err != nil {
				return err
			}
			opts.RatioTo = ratioTo
			opts.CPUPIDs = cpuPIDs
			opts.CPUPIDFiles = pidFiles
			if before != "" {
				opts.BeforeRound = beforeRound(before, c.ErrOrStderr())
			}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			if opts.Acks != -1 || opts.MaxInFlight > 5 {
				opts.Idempotent = false
			}
			if err := opts.Validate(); err != nil {
				return benchOptionError(c.Flags(), err)
			}
			_, err = bench.Run(c.Context(), opts, c.OutOrStdout())
			return err
		},
	}
	f := c.Flags()
	f.StringVarP(&bootstrap, "bootstrap", "b", "127.0.0.1:9092", "bootstrap address to measure, [NAME=]HOST:PORT[,HOST:PORT]")
	f.StringArrayVar(&compare, "compare", nil, "also run the workload against this [NAME=]ADDRESS in every round (repeatable)")
	f.StringSliceVar(&ratioTo, "ratio-to", nil, "names of the targets to divide by (default: every --compare target)")
	f.StringToIntVar(&cpuPIDs, "cpu-pid", nil, "NAME=PID: report the CPU time per GB and the peak resident memory of this process (a proxy on that target's path), its CPU time read in nanoseconds from the kernel's CPU clock of the process, and its round-by-round CPU ratio to every --ratio-to target so measured")
	f.StringToStringVar(&pidFiles, "cpu-pid-file", nil, "NAME=FILE: as --cpu-pid, the process id read from FILE as each window starts (for processes --before-round restarts)")
	f.StringVar(&before, "before-round", "", "shell command run (by sh, with INORDER_BENCH_ROUND set to the round, from 1) before every round; the run ends if it fails")
	f.IntVar(&o.Rounds, "rounds", 0, "rounds; every target runs once per round (default 1, or 5 with --compare)")
	f.BoolVar(&o.Produce, "produce", o.Produce, "produce records")
	f.BoolVar(&o.Consume, "consume", o.Consume, "consume records from the start of the topic")
	f.StringVar(&o.Topic, "topic", "", "topic (default inorder-bench-p<partitions>)")
	f.IntVar(&o.Partitions, "partitions", o.Partitions, "partitions of the topic when it is created")
	f.BoolVar(&o.CreateTopic, "create-topic", o.CreateTopic, "create the topic when it is missing")
	f.BoolVar(&o.KeepTopic, "keep-topic", o.KeepTopic, "keep a topic this run created (by default it is deleted at the end)")
	f.StringVar(&o.Partitioner, "partitioner", "sticky", "sticky (one partition per batch) or round-robin (each record to the next partition)")
	f.DurationVar(&o.Duration, "duration", o.Duration, "measured time per target per round")
	f.DurationVar(&o.Warmup, "warmup", o.Warmup, "unmeasured time before each measurement")
	f.Int64Var(&o.Records, "records", 0, "produce exactly this many records per target per round instead of running for --duration")
	f.Float64Var(&o.Rate, "rate", 0, "produce, and consume, at most this many records per second each (0: as fast as possible)")
	f.IntVar(&o.RecordBytes, "record-size", o.RecordBytes, "bytes per record value")
	f.BoolVar(&o.Compressible, "compressible", false, "fill values with a repeating pattern instead of random bytes")
	f.StringVar(&o.Compression, "compression", o.Compression, "none, gzip, snappy, lz4 or zstd")
	f.IntVar(&o.Acks, "acks", o.Acks, "-1 (all), 1 or 0; anything but -1 turns idempotence off")
	f.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "produce requests in flight per broker; above 5 turns idempotence off")
	f.DurationVar(&o.Linger, "linger", 0, "how long a partition waits to fill a batch")
	f.Int32Var(&o.FetchMaxBytes, "fetch-max-bytes", 1<<20, "bytes per fetch response (franz-go's and Java's default: 52428800)")
	f.Int32Var(&o.FetchPartitionBytes, "fetch-partition-bytes", 0, "bytes per partition in a fetch response (default: --fetch-max-bytes; franz-go's and Java's: 1048576)")
	f.StringVar(&o.Format, "format", o.Format, "report format: text or markdown")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	f.StringArrayVar(&tlsNames, "tls", nil, "dial the target of this NAME with TLS (repeatable)")
	f.StringVar(&tlsCA, "tls-ca", "", "PEM CAs that verify the targets named by --tls (default: the system roots)")

	c.AddCommand(newBenchBrokerCommand(), newBenchRelayCommand(), newBenchConnsCommand(), newBenchWideCommand())
	return c
}

func newBenchBrokerCommand() *cobra.Command {
	var (
		cfg             bench.BrokerConfig
		kind            string
		timeout         time.Duration
		tlsCert, tlsKey string
		topics          map[string]int
		misbehave       string
	)
	c := &cobra.Command{
		Use:   "broker",
		Short: "Run an embedded broker that is never the bottleneck, or one that breaks ordering",
		Long: `broker runs a single-node kfake cluster on 127.0.0.1: blackhole discards
produced records, synthetic serves random 1 MiB fetches from any offset, plain
stores records. With --advertise it hands out that address in metadata, so
that a relay in front of it is never bypassed.

With --misbehave it stores records but breaks Kafka's per-connection
ordering, so that a gate can be seen failing before a pass is trusted:
reorder answers pipelined requests concurrently, in completion order
(responses and appends out of order); swap keeps the log in order but
writes one response in 200 after the next. inorder check against it exits
1; through inorder serve it passes, and serve --upstream-ordering
connection --verify counts what it does. At exit it prints how many
responses it wrote out of order.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := cfg
			cfg.Kind = bench.BrokerKind(kind)
			cfg.Misbehave = bench.Misbehavior(misbehave)
			if misbehave != "" && !c.Flags().Changed("kind") {
				cfg.Kind = bench.Plain
			}
			for t, n := range topics {
				if cfg.Topics == nil {
					cfg.Topics = make(map[string]int32)
				}
				cfg.Topics[t] = int32(n)
			}
			if tlsCert != "" {
				pair, err := loadPair(tlsCert, tlsKey)
				if err != nil {
					return err
				}
				cfg.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
			}
			b, err := bench.NewBroker(cfg)
			if err != nil {
				return benchOptionError(c.Flags(), err)
			}
			defer b.Close()
			fmt.Fprintln(c.OutOrStdout(), "listening", b.Addr())
			err = waitFor(c.Context(), timeout)
			if misbehave != "" {
				fmt.Fprintf(c.OutOrStdout(), "misbehaved (%s): %d responses written before one to a request sent earlier on their connection\n", misbehave, b.Misbehaved())
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&kind, "kind", string(bench.Blackhole), "blackhole, synthetic or plain")
	f.IntVar(&cfg.Port, "port", 0, "port on 127.0.0.1 (0: any free port); with --brokers, the first broker's, the next ones on the ports after it")
	f.IntVar(&cfg.Brokers, "brokers", 1, "brokers in the cluster (more than one cannot take --advertise)")
	f.StringToIntVar(&topics, "topic", nil, "NAME=PARTITIONS: create this topic at start, partition p led by broker p modulo --brokers (repeatable)")
	f.StringVar(&cfg.Advertise, "advertise", "", "IP:PORT to hand out in metadata instead of the broker's own")
	f.IntVar(&cfg.RecordBytes, "record-size", 1024, "value size of synthetic records")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate: the broker speaks TLS")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&misbehave, "misbehave", "", "break per-connection ordering, to see a gate fail: reorder (responses and appends in completion order) or swap (one response in 200 after the next); implies --kind plain")
	f.DurationVar(&timeout, "timeout", time.Hour, "exit after this long")
	return c
}

func newBenchRelayCommand() *cobra.Command {
	var (
		listen, to      string
		timeout         time.Duration
		buffer          int
		tlsCert, tlsKey string
		toCA            string
	)
	c := &cobra.Command{
		Use:   "relay",
		Short: "Relay TCP connections to one address, the ceiling for any proxy",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if to == "" {
				return usage(&config.FieldError{Field: "--to", Reason: "is required: the HOST:PORT to relay to"})
			}
			r, err := bench.NewRelay(listen, to)
			if err != nil {
				return err
			}
			r.SetBuffer(buffer)
			if err := relayTLS(r, to, tlsCert, tlsKey, toCA); err != nil {
				r.Close()
				return err
			}
			errc := make(chan error, 1)
			go func() { errc <- r.Serve() }()
			fmt.Fprintln(c.OutOrStdout(), "relaying", r.Addr(), "to", to)
			werr := waitFor(c.Context(), timeout)
			r.Close()
			if err := <-errc; err != nil {
				return err
			}
			return werr
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:0", "address to accept on")
	f.StringVar(&to, "to", "", "address to relay to")
	f.IntVar(&buffer, "buffer", 0, "copy through a buffer of this many bytes with read and write (0: let io.Copy splice)")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate: accept TLS from clients")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&toCA, "to-tls-ca", "", "dial --to with TLS, verified with these PEM CAs")
	f.DurationVar(&timeout, "timeout", time.Hour, "exit after this long")
	return c
}

func newBenchConnsCommand() *cobra.Command {
	var (
		addr             string
		idle, parallel   int
		hold, churn      time.Duration
		pid, churnWorker int
	)
	c := &cobra.Command{
		Use:   "conns",
		Short: "Hold idle connections and churn connections through an address",
		Long: `conns opens --idle connections that each complete one ApiVersions exchange,
holds them for --hold, then opens, uses once and closes connections for
--churn and reports how many per second. With --pid it reports that process's
resident memory before and after the idle connections opened.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out := c.OutOrStdout()
			var before int64
			if pid > 0 {
				var err error
				if before, err = bench.ProcessRSS(pid); err != nil {
					return err
				}
			}
			if idle > 0 {
				start := time.Now()
				ic, err := bench.OpenIdle(ctx, addr, idle, parallel)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "idle: %d connections open in %v\n", ic.Len(), time.Since(start).Round(time.Millisecond))
				ok := sleepFor(ctx, hold)
				if pid > 0 {
					after, err := bench.ProcessRSS(pid)
					if err != nil {
						ic.Close()
						return err
					}
					fmt.Fprintf(out, "idle: rss %.1f MiB before, %.1f MiB with %d connections, %.0f bytes per connection\n",
						float64(before)/(1<<20), float64(after)/(1<<20), ic.Len(), float64(after-before)/float64(ic.Len()))
				}
				ic.Close()
				if !ok {
					return ctx.Err()
				}
			}
			if churn > 0 {
				rate, err := bench.Churn(ctx, addr, churn, churnWorker)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "churn: %.0f connections/s (open, ApiVersions, close; %d in parallel)\n", rate, churnWorker)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&addr, "bootstrap", "b", "127.0.0.1:9092", "address to connect to")
	f.IntVar(&idle, "idle", 1000, "idle connections to open")
	f.IntVar(&parallel, "parallel", 32, "connections opened at a time")
	f.DurationVar(&hold, "hold", 2*time.Second, "how long the idle connections stay open before memory is read")
	f.DurationVar(&churn, "churn", 2*time.Second, "how long to churn connections (0: skip)")
	f.IntVar(&churnWorker, "churn-parallel", 4, "connections churned at a time")
	f.IntVar(&pid, "pid", 0, "process whose resident memory to report")
	return c
}

func newBenchWideCommand() *cobra.Command {
	var (
		bootstrap string
		compare   []string
		format    string
		quiet     bool
	)
	var o bench.WideOptions
	c := &cobra.Command{
		Use:   "wide",
		Short: "Pipeline Produce requests of many partitions and no records on one connection",
		Long: `wide writes --requests Produce requests, each naming --partitions partitions
with no records (a few bytes each), pipelined on one connection to every
address in turn, and reports the median time until the last response and,
with --cpu-pid, the CPU time the process on that path spent. Few bytes name
many partitions: a proxy whose work follows the partitions rather than the
bytes shows it here.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			for i, s := range append([]string{bootstrap}, compare...) {
				t, err := bench.ParseTarget(s)
				if err != nil {
					field := "--compare"
					if i == 0 {
						field = "--bootstrap"
					}
					return usage(&config.FieldError{Field: field, Value: s, Reason: "has no address: write [NAME=]HOST:PORT"})
				}
				o.Targets = append(o.Targets, t)
			}
			if format != "text" && format != "markdown" {
				return usage(&config.FieldError{Field: "--format", Value: format, Reason: "must be text or markdown"})
			}
			var progress io.Writer
			if !quiet {
				progress = c.ErrOrStderr()
			}
			res, err := bench.RunWide(c.Context(), o, progress)
			if err != nil {
				return err
			}
			return bench.WriteWide(c.OutOrStdout(), format, res)
		},
	}
	f := c.Flags()
	f.StringVarP(&bootstrap, "bootstrap", "b", "127.0.0.1:9092", "address to measure, [NAME=]HOST:PORT")
	f.StringArrayVar(&compare, "compare", nil, "also run against this [NAME=]HOST:PORT in every round (repeatable)")
	f.StringToIntVar(&o.CPUPIDs, "cpu-pid", nil, "NAME=PID: report the CPU time this process (a proxy on that target's path) spent, read in nanoseconds from the kernel's CPU clock of the process")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds; every target runs once per round")
	f.IntVar(&o.Partitions, "partitions", 100_000, "partitions each request names")
	f.IntVar(&o.Requests, "requests", 20, "requests pipelined on the connection")
	f.StringVar(&o.Topic, "topic", "inorder-bench-wide", "topic the requests write to (it need not exist)")
	f.StringVar(&format, "format", "text", "report format: text or markdown")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return c
}

// waitFor returns nil once d has passed and ctx's error if it ends first; a
// signal is the normal way to stop a helper, so it is not an error.
func waitFor(ctx context.Context, d time.Duration) error {
	if sleepFor(ctx, d) || errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// benchTLS makes the targets named in names dial with TLS verified by ca
// (the system roots if empty).
func benchTLS(targets []bench.Target, names []string, ca string) error {
	if len(names) == 0 {
		return nil
	}
	cfg, err := tlsconf.Upstream(tlsconf.UpstreamOptions{CA: ca, CAFlag: "--tls-ca"})
	if err != nil {
		return err
	}
	for _, n := range names {
		found := false
		for i := range targets {
			if targets[i].Name == n {
				targets[i].TLS, found = cfg, true
			}
		}
		if !found {
			return usage(&config.FieldError{Field: "--tls", Value: n, Reason: "names no target: name one with --bootstrap NAME=HOST:PORT or --compare NAME=HOST:PORT"})
		}
	}
	return nil
}

// relayTLS sets the relay's TLS on either side, as its flags ask.
func relayTLS(r *bench.Relay, to, cert, key, toCA string) error {
	var listen, dial *tls.Config
	if cert != "" {
		pair, err := loadPair(cert, key)
		if err != nil {
			return err
		}
		listen = &tls.Config{Certificates: []tls.Certificate{pair}}
	}
	if toCA != "" {
		cfg, err := tlsconf.Upstream(tlsconf.UpstreamOptions{CA: toCA, CAFlag: "--to-tls-ca"})
		if err != nil {
			return err
		}
		host, _, _ := net.SplitHostPort(to)
		dial = tlsconf.ForHost(cfg, host)
	}
	r.SetTLS(listen, dial)
	return nil
}

// loadPair loads the --tls-cert and --tls-key of a bench helper.
func loadPair(cert, key string) (tls.Certificate, error) {
	if key == "" {
		return tls.Certificate{}, usage(&config.FieldError{Field: "--tls-cert", Value: cert, Reason: "needs --tls-key, its private key"})
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %q and --tls-key %q do not load: %w", cert, key, err)
	}
	return pair, nil
}

// benchFlags names the flag that sets each field of bench.Options.
var benchFlags = map[string]string{
	"Targets": "compare", "RatioTo": "ratio-to", "CPUPIDs": "cpu-pid", "CPUPIDFiles": "cpu-pid-file", "Rounds": "rounds",
	"Produce": "produce", "Consume": "consume", "Partitions": "partitions", "Partitioner": "partitioner",
	"Duration": "duration", "Warmup": "warmup", "Records": "records", "Rate": "rate",
	"RecordBytes": "record-size", "Compression": "compression", "Acks": "acks", "Idempotent": "acks",
	"MaxInFlight": "max-in-flight", "Linger": "linger", "FetchMaxBytes": "fetch-max-bytes", "Format": "format",
	"Kind": "kind", "Advertise": "advertise", "Brokers": "brokers", "Misbehave": "misbehave", "TLS": "tls-cert", // bench broker's
}

// benchOptionError words a *bench.OptionError as a usage error about the
// flag that set the field, its value as typed; other errors pass through.
func benchOptionError(fs *pflag.FlagSet, err error) error {
	var oe *bench.OptionError
	name, ok := "", false
	if errors.As(err, &oe) {
		name, ok = benchFlags[oe.Field]
	}
	if !ok {
		return err
	}
	reason := oe.Reason
	if oe.Other != "" {
		reason = fmt.Sprintf(reason, "--"+benchFlags[oe.Other])
	}
	if _, list := benchListFlags[name]; list {
		// A list's error names the entry at fault.
		return usage(&config.FieldError{Field: "--" + name, Value: oe.Value, Reason: reason})
	}
	return usage(config.InvalidFlag(fs, name, reason))
}

// benchListFlags are the bench flags that take several values.
var benchListFlags = map[string]struct{}{"compare": {}, "ratio-to": {}, "cpu-pid": {}, "cpu-pid-file": {}}

// beforeRound runs cmd by sh before each round, its output to log, the
// round in INORDER_BENCH_ROUND.
func beforeRound(cmd string, log io.Writer) func(context.Context, int) error {
	return func(ctx context.Context, round int) error {
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Env = append(os.Environ(), fmt.Sprintf("INORDER_BENCH_ROUND=%d", round))
		c.Stdout, c.Stderr = log, log
		if err := c.Run(); err != nil {
			return fmt.Errorf("--before-round %q: %w", cmd, err)
		}
		return nil
	}
}
