package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Row is one line of the report: a workload through one fault in one mode.
type Row struct {
	Fault, Mode, Workload string
	Tally
}

// runner holds the state of a whole run.
type runner struct {
	opts    options
	results string
	started time.Time
	runID   string
	cluster *cluster
	proxy   *proxy

	// baseline is the idle proxy's usage, sampled after each start.
	baseline    Usage
	leaderTopic string

	rows    []Row
	nRounds int
	soak    *soakResult
}

func (r *runner) logf(format string, args ...any) {
	fmt.Printf("[faults %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// adminAddr is where the proxy serves its metrics, when the binary has an
// admin endpoint ("" otherwise), and whether it can serve its goroutine
// profile there too.
func adminAddr(bin string) (addr string, pprof bool) {
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	if !strings.Contains(string(out), "--admin-listen") {
		return "", false
	}
	return fmt.Sprintf("127.0.0.1:%d", proxyPort+90), strings.Contains(string(out), "--admin-pprof")
}

// startProxy starts the proxy; with idle (no clients yet) it samples the
// baseline that later samples are held to. A proxy started again under
// load keeps the baseline of the first: a fresh process of the same binary
// and flags holds the same descriptors and goroutines when idle.
func (r *runner) startProxy(idle bool) error {
	if err := r.proxy.start(); err != nil {
		return err
	}
	if !idle {
		return nil
	}
	// let start-up discovery settle before the idle sample
	time.Sleep(time.Second)
	u, err := r.proxy.sample()
	if err != nil {
		return err
	}
	r.baseline = u
	return nil
}

func (r *runner) stopProxy() {
	if r.proxy != nil {
		if err := r.proxy.stop(syscall.SIGTERM, 30*time.Second); err != nil {
			slog.Warn("stopping the proxy", "err", err)
		}
	}
}

// createTopics creates the round's topics directly on the brokers with
// replication factor 3.
func createTopics(ctx context.Context, parts map[string]int32) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(directSeeds()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for t, p := range parts {
		for {
			resp, err := adm.CreateTopic(ctx, p, 3, nil, t)
			if err == nil {
				err = resp.Err
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("create %s: %w", t, err)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

// prime makes the cluster's internal topics (transaction state, consumer
// offsets) directly, once, so that the first round does not spend its
// fault window creating them.
func prime(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	const topic = "faults-prime"
	if err := createTopics(ctx, map[string]int32{topic: 1}); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(directSeeds()...), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("0")}).FirstErr(); err != nil {
		return err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1})
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, topic, offs)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// healthy waits until all three brokers are registered and every
// partition of topics has its full ISR, so that a round starts on a
// whole cluster.
func healthy(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(directSeeds()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last string
	for {
		md, err := adm.Metadata(ctx)
		if err == nil {
			last = ""
			if len(md.Brokers) < nodes {
				last = fmt.Sprintf("%d brokers registered", len(md.Brokers))
			}
			for _, t := range md.Topics {
				for _, p := range t.Partitions {
					if len(p.ISR) < len(p.Replicas) && last == "" {
						last = fmt.Sprintf("%s/%d has ISR %v of %v", t.Topic, p.Partition, p.ISR, p.Replicas)
					}
				}
			}
			if last == "" {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not whole after %v: %s", d, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// workloads makes the four workloads of a round on fresh topics.
func (r *runner) workloads(ctx context.Context, prefix string) ([]workload, *connWatch, error) {
	t := func(s string) string { return prefix + "-" + s }
	if err := createTopics(ctx, map[string]int32{t("kgo"): 6, t("java"): 6, t("txn"): 3, t("group"): 6}); err != nil {
		return nil, nil, err
	}
	r.leaderTopic = t("kgo")
	watch := newConnWatch()
	boot, reach := r.proxy.Bootstrap(), proxyAddrs(r.proxy.single)
	return []workload{
		newKgoProducer("idempotent (kgo)", boot, t("kgo"), 6, r.opts.rate, reach),
		&javaProducer{bootstrap: boot, topic: t("java"), workDir: r.results, libs: javaLibs(), rate: r.opts.rate, watch: watch},
		newTxnWorkload(boot, t("txn"), t("txn-id"), 3, r.opts.rate, reach),
		newGroupWorkload(boot, t("group"), t("group"), 6, 3, r.opts.rate, reach),
	}, watch, nil
}

// round runs the workloads through one fault in one mode and records a row
// per workload and one for the proxy's resources.
func (r *runner) round(ctx context.Context, mode string, f fault) {
	r.logf("round %s / %s", f.name, mode)
	fail := func(err error) {
		r.rows = append(r.rows, Row{Fault: f.name, Mode: mode, Workload: "round", Tally: Tally{Violations: []string{trimErr(err)}}})
		r.logf("round %s / %s failed: %v", f.name, mode, err)
	}
	if err := healthy(ctx, 120*time.Second); err != nil {
		fail(err)
		return
	}
	r.nRounds++
	wls, watch, err := r.workloads(ctx, fmt.Sprintf("f%s-%d-%s-%s", r.runID, r.nRounds, mode[:4], f.name))
	if err != nil {
		fail(err)
		return
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	go watch.run(wctx, 300*time.Millisecond)
	defer cancelWatch()
	defer closeAll(wls)
	if err := startAll(ctx, wls, !f.early); err != nil {
		fail(err)
		return
	}
	if f.early {
		time.Sleep(2 * time.Second)
	} else {
		time.Sleep(r.opts.warm)
	}
	faultAt := time.Now()
	ferr := f.inject(ctx, r)
	if ferr != nil {
		fail(fmt.Errorf("inject %s: %w", f.name, ferr))
	}
	faultEnd := time.Now()
	r.logf("fault %s over after %v", f.name, faultEnd.Sub(faultAt).Round(100*time.Millisecond))
	time.Sleep(r.opts.after)
	loadEnd := time.Now()
	cancelWatch()
	r.rows = append(r.rows, r.finish(ctx, wls, f.name, mode, faultAt, faultEnd, loadEnd)...)
	r.rows = append(r.rows, Row{Fault: f.name, Mode: mode, Workload: "proxy resources", Tally: r.checkBaseline()})
}

// running waits, bounded, until every workload has made progress, so that
// the fault hits clients that are running rather than starting.
func running(ctx context.Context, wls []workload, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		var idle []string
		for _, w := range wls {
			if w.Progress() == 0 {
				idle = append(idle, w.Name())
			}
		}
		if len(idle) == 0 {
			return nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("no progress within %v of the start: %s", d, strings.Join(idle, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startAll starts the workloads and, with wait, waits until each made
// progress.
func startAll(ctx context.Context, wls []workload, wait bool) error {
	for _, w := range wls {
		if err := w.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", w.Name(), err)
		}
	}
	if !wait {
		return nil
	}
	return running(ctx, wls, 90*time.Second)
}

func closeAll(wls []workload) {
	for _, w := range wls {
		w.Close()
	}
}

// finish stops the workloads at once, closes them (so that the proxy can
// go back to idle) and checks each: its data, and that it made progress
// after the last fault ended. Recovery is measured from faultAt to loadEnd.
func (r *runner) finish(ctx context.Context, wls []workload, fault, mode string, faultAt, faultEnd, loadEnd time.Time) []Row {
	errs := make([]error, len(wls))
	var wg sync.WaitGroup
	for i, w := range wls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Stop(ctx)
		}()
	}
	wg.Wait()
	closeAll(wls)
	var rows []Row
	for i, w := range wls {
		t := w.Verify(ctx, faultAt, loadEnd)
		CheckProgress(&t, faultEnd)
		if errs[i] != nil {
			t.violate("stopping: %s", trimErr(errs[i]))
		}
		rows = append(rows, Row{Fault: fault, Mode: mode, Workload: w.Name(), Tally: t})
		r.logf("  %-34s sent %6d acked %6d found %6d lost %d dup %d reordered %d recovery %v %s",
			w.Name(), t.Sent, t.Acked, t.Found, t.Lost, t.Duplicated, t.Reordered, t.Recovery.Round(100*time.Millisecond), verdict(t))
		for _, v := range t.Violations {
			r.logf("    violation: %s", v)
		}
	}
	return rows
}

// checkBaseline waits, bounded, until the proxy holds no more descriptors
// (and, when it reports them, goroutines) than when it was idle: every
// client connection and the upstream connection behind it are gone.
func (r *runner) checkBaseline() Tally {
	var t Tally
	var u Usage
	var err error
	end := time.Now().Add(20 * time.Second)
	for {
		u, err = r.proxy.sample()
		back := err == nil && u.FDs <= r.baseline.FDs && (u.Goroutines < 0 || u.Goroutines <= r.baseline.Goroutines)
		if back || time.Now().After(end) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.violate("sampling the proxy: %v", err)
		return t
	}
	if u.FDs > r.baseline.FDs {
		t.violate("open descriptors %d, idle baseline %d, 20 s after the clients closed", u.FDs, r.baseline.FDs)
	}
	if u.Goroutines >= 0 && u.Goroutines > r.baseline.Goroutines {
		t.violate("goroutines %d, idle baseline %d, 20 s after the clients closed", u.Goroutines, r.baseline.Goroutines)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("after: %s; idle baseline: %s", u, r.baseline))
	return t
}

func (u Usage) String() string {
	s := fmt.Sprintf("fds %d, threads %d, RSS %.1f MiB", u.FDs, u.Threads, float64(u.RSSKiB)/1024)
	if u.Goroutines >= 0 {
		s += fmt.Sprintf(", goroutines %d", u.Goroutines)
	}
	return s
}

func verdict(t Tally) string {
	if t.Failed() {
		return "FAIL"
	}
	return "ok"
}

func (r *runner) count() (passed, failed int) {
	rows := r.rows
	if r.soak != nil {
		rows = append(rows, r.soak.rows...)
	}
	for _, row := range rows {
		if row.Failed() {
			failed++
		} else {
			passed++
		}
	}
	return passed, failed
}
