// Command faults runs inorder in front of the three-node Apache Kafka of
// testenv/kafka, drives producers and consumers through it, injects one
// fault at a time while they run (brokers killed, stalled or restarted,
// the proxy stopped or killed and started again, the connections between
// proxy and brokers reset or stalled), checks the data after each fault,
// and writes RELIABILITY.md. With -soak it also runs the workloads for a
// long stretch with occasional faults, sampling the proxy's resources.
//
//	go build -o /tmp/inorder ./cmd/inorder
//	go run ./testenv/faults -bin /tmp/inorder            # every fault but those run only when named, both modes, a 2.5 min soak
//	go run ./testenv/faults -bin /tmp/inorder -faults broker-kill -modes none -soak 0
//	go run ./testenv/faults -bin /tmp/inorder -faults none -single broker-kill -soak 0   # in the single topology too
//	go run ./testenv/faults -bin /tmp/inorder -faults none -single broker-blackhole -soak 0   # run only when named
//
// testenv/faults/run.sh does both steps; see RELIABILITY.md for the flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	root, bin, out, plot, results, runDir string
	modes, faults, single                 []string
	warm, after                           time.Duration
	rate                                  int
	soak, soakEvery                       time.Duration
}

func parseFlags() (options, error) {
	var o options
	var modes, faults, single string
	flag.StringVar(&o.root, "root", ".", "repository root (testenv/kafka's scripts are read from there)")
	flag.StringVar(&o.bin, "bin", "", "the inorder binary to test (required)")
	flag.StringVar(&o.out, "out", "RELIABILITY.md", "report to write, relative to -root")
	flag.StringVar(&o.plot, "plot", "testenv/faults/soak.svg", "soak plot to write, relative to -root; the report links to it")
	flag.StringVar(&o.results, "results", "testenv/faults/results", "directory for logs, relative to -root")
	flag.StringVar(&o.runDir, "kafka-run-dir", "/tmp/faults-kafka", "KAFKA_RUN_DIR of the cluster the suite starts")
	flag.StringVar(&modes, "modes", "none,connection", "--upstream-ordering modes to test")
	var names, defaults []string
	for _, f := range allFaults {
		names = append(names, f.name)
		if !f.named {
			defaults = append(defaults, f.name)
		}
	}
	flag.StringVar(&faults, "faults", strings.Join(defaults, ","), "faults to inject, one round each (known: "+strings.Join(names, ", ")+")")
	flag.StringVar(&single, "single", "", "faults to inject again with the proxy in --topology single, one round each in every mode")
	flag.DurationVar(&o.warm, "warm", 4*time.Second, "load before each fault")
	flag.DurationVar(&o.after, "after", 8*time.Second, "load after each fault ends")
	flag.IntVar(&o.rate, "rate", 100, "records per second of each producer")
	flag.DurationVar(&o.soak, "soak", 120*time.Second, "soak duration (0: no soak)")
	flag.DurationVar(&o.soakEvery, "soak-fault-every", 40*time.Second, "time between faults during the soak")
	flag.Parse()
	if o.bin == "" {
		return o, fmt.Errorf("-bin is required")
	}
	var err error
	if o.root, err = filepath.Abs(o.root); err != nil {
		return o, err
	}
	if o.bin, err = filepath.Abs(o.bin); err != nil {
		return o, err
	}
	for _, m := range strings.Split(modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			if m != "none" && m != "connection" {
				return o, fmt.Errorf("unknown mode %q", m)
			}
			o.modes = append(o.modes, m)
		}
	}
	for _, list := range []struct {
		flag string
		dst  *[]string
	}{{faults, &o.faults}, {single, &o.single}} {
		for _, f := range strings.Split(list.flag, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if _, ok := faultByName(f); !ok {
					return o, fmt.Errorf("unknown fault %q (known: %s)", f, strings.Join(names, ", "))
				}
				*list.dst = append(*list.dst, f)
			}
		}
	}
	return o, nil
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	os.Exit(run(o))
}

// run starts the cluster, runs every round and the soak, writes the report
// and stops everything it started, also on failure or interrupt. It
// returns the process's exit code.
func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results := filepath.Join(o.root, o.results)
	if err := os.MkdirAll(results, 0o755); err != nil {
		slog.Error("results directory", "err", err)
		return 2
	}
	r := &runner{opts: o, results: results, started: time.Now(), runID: time.Now().Format("150405")}
	r.cluster = newCluster(o.root, o.runDir)
	defer r.cluster.stop()
	r.logf("starting the three-node Kafka cluster (KAFKA_RUN_DIR=%s)", o.runDir)
	if err := r.cluster.start(ctx); err != nil {
		slog.Error("cluster", "err", err)
		return 1
	}
	if err := prime(ctx); err != nil {
		slog.Error("priming the cluster's internal topics", "err", err)
		return 1
	}
	defer r.stopProxy()
	admin, pprof := adminAddr(o.bin)
	for _, mode := range o.modes {
		r.proxy = &proxy{bin: o.bin, mode: mode, logPath: filepath.Join(results, "proxy-"+mode+".log"), admin: admin, pprof: pprof}
		if err := r.startProxy(true); err != nil {
			slog.Error("proxy", "mode", mode, "err", err)
			return 1
		}
		for _, name := range o.faults {
			f, _ := faultByName(name)
			if ctx.Err() != nil {
				break
			}
			r.round(ctx, mode, f)
		}
		r.stopProxy()
	}
	for _, mode := range o.modes {
		if len(o.single) == 0 || ctx.Err() != nil {
			break
		}
		r.proxy = &proxy{bin: o.bin, mode: mode, single: true, logPath: filepath.Join(results, "proxy-single-"+mode+".log"), admin: admin, pprof: pprof}
		if err := r.startProxy(true); err != nil {
			slog.Error("proxy", "mode", mode, "topology", "single", "err", err)
			return 1
		}
		for _, name := range o.single {
			f, _ := faultByName(name)
			if ctx.Err() != nil {
				break
			}
			r.round(ctx, mode+", single endpoint", f)
		}
		r.stopProxy()
	}
	if o.soak > 0 && ctx.Err() == nil {
		r.proxy = &proxy{bin: o.bin, mode: "none", logPath: filepath.Join(results, "proxy-soak.log"), admin: admin, pprof: pprof}
		if err := r.startProxy(true); err != nil {
			slog.Error("proxy", "mode", "soak", "err", err)
			return 1
		}
		r.runSoak(ctx)
		r.stopProxy()
	}
	if ctx.Err() != nil {
		r.logf("interrupted; no report written")
		return 130
	}
	if err := r.writeReport(); err != nil {
		slog.Error("report", "err", err)
		return 1
	}
	passed, failed := r.count()
	// the plain closing line CI reads
	fmt.Printf("faults: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
