package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// soakFaults are injected in turn during the soak. The proxy is never
// restarted there: a restart would reset the very figures the soak watches.
var soakFaults = []string{"broker-kill", "upstream-reset", "broker-stall", "broker-restart", "upstream-stall"}

type soakResult struct {
	duration time.Duration
	samples  []Usage
	loadEnd  time.Time
	faults   []string
	rows     []Row
	svg      string
}

// runSoak runs the workloads for the soak duration at a steady rate with a
// fault every soakEvery, sampling the proxy every 2 s, then checks the data
// of the whole stretch, that the proxy went back to its idle baseline, and
// that its memory did not grow.
func (r *runner) runSoak(ctx context.Context) {
	o := r.opts
	res := &soakResult{duration: o.soak}
	r.soak = res
	r.logf("soak for %v, a fault every %v", o.soak, o.soakEvery)
	fail := func(err error) {
		res.rows = append(res.rows, Row{Fault: "soak", Mode: "none", Workload: "soak", Tally: Tally{Violations: []string{trimErr(err)}}})
		r.logf("soak failed: %v", err)
	}
	if err := healthy(ctx, 120*time.Second); err != nil {
		fail(err)
		return
	}
	wls, watch, err := r.workloads(ctx, "s"+r.runID)
	if err != nil {
		fail(err)
		return
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	go watch.run(wctx, time.Second)

	var smu sync.Mutex
	sctx, cancelSample := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			if u, err := r.proxy.sample(); err == nil {
				smu.Lock()
				res.samples = append(res.samples, u)
				smu.Unlock()
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() {
		cancelSample()
		<-sampled
	}()

	defer closeAll(wls)
	if err := startAll(ctx, wls, true); err != nil {
		fail(err)
		return
	}
	start := time.Now()
	lastFaultEnd := start
	end := start.Add(o.soak)
	next := start.Add(o.soakEvery / 2)
	for i := 0; ctx.Err() == nil && time.Now().Before(end); {
		if time.Now().After(next) && time.Until(end) > 20*time.Second {
			f, _ := faultByName(soakFaults[i%len(soakFaults)])
			i++
			at := time.Now()
			if err := f.inject(ctx, r); err != nil {
				fail(fmt.Errorf("inject %s: %w", f.name, err))
			}
			res.faults = append(res.faults, fmt.Sprintf("%s at +%v", f.name, at.Sub(start).Round(time.Second)))
			r.logf("soak: %s at +%v", f.name, at.Sub(start).Round(time.Second))
			lastFaultEnd = time.Now()
			next = lastFaultEnd.Add(o.soakEvery)
			continue
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.loadEnd = time.Now()
	cancelWatch()
	res.rows = append(res.rows, r.finish(ctx, wls, "soak", "none", start, lastFaultEnd, res.loadEnd)...)
	base := r.checkBaseline()
	// a few idle samples after the load, so the plot shows the return
	time.Sleep(4 * time.Second)
	cancelSample()
	<-sampled
	smu.Lock()
	samples := append([]Usage(nil), res.samples...)
	smu.Unlock()
	growth(samples, res.loadEnd, &base)
	res.rows = append(res.rows, Row{Fault: "soak", Mode: "none", Workload: "proxy resources", Tally: base})
	res.samples = samples
	svg := filepath.Join(r.opts.root, r.opts.plot)
	if err := os.WriteFile(svg, []byte(plotSVG(samples, start, res.loadEnd)), 0o644); err != nil {
		fail(err)
	}
	// the report links to the plot from its own directory
	link, err := filepath.Rel(filepath.Dir(filepath.Join(r.opts.root, r.opts.out)), svg)
	if err != nil {
		link = r.opts.plot
	}
	res.svg = filepath.ToSlash(link)
}

// growth fails t when the proxy's memory under load kept growing: the
// largest RSS of the last third of the loaded stretch may not exceed twice
// the largest of the first third plus 32 MiB, nor may the descriptors
// exceed the first third's largest by more than 64.
func growth(samples []Usage, loadEnd time.Time, t *Tally) {
	var loaded []Usage
	for _, s := range samples {
		if s.At.Before(loadEnd) {
			loaded = append(loaded, s)
		}
	}
	if len(loaded) < 9 {
		t.violate("only %d samples under load: too short to judge growth", len(loaded))
		return
	}
	third := len(loaded) / 3
	peak := func(us []Usage) Usage {
		var m Usage
		for _, u := range us {
			m.RSSKiB = max(m.RSSKiB, u.RSSKiB)
			m.FDs = max(m.FDs, u.FDs)
			m.Goroutines = max(m.Goroutines, u.Goroutines)
		}
		return m
	}
	first, last := peak(loaded[:third]), peak(loaded[len(loaded)-third:])
	if last.RSSKiB > 2*first.RSSKiB+32<<10 {
		t.violate("RSS grew under steady load: peak %.1f MiB in the first third, %.1f MiB in the last", float64(first.RSSKiB)/1024, float64(last.RSSKiB)/1024)
	}
	if last.FDs > first.FDs+64 {
		t.violate("descriptors grew under steady load: peak %d in the first third, %d in the last", first.FDs, last.FDs)
	}
	if first.Goroutines > 0 && last.Goroutines > 2*first.Goroutines+64 {
		t.violate("goroutines grew under steady load: peak %d in the first third, %d in the last", first.Goroutines, last.Goroutines)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("peaks under load, first third: RSS %.1f MiB, fds %d; last third: RSS %.1f MiB, fds %d",
		float64(first.RSSKiB)/1024, first.FDs, float64(last.RSSKiB)/1024, last.FDs))
}
