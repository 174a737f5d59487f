package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A fault is injected once, while the workloads run, and returns when it
// is over (a broker or proxy is back, a stall released).
type fault struct {
	name string
	desc string
	// proxy says the fault restarts the proxy, which resets its resource
	// baseline.
	proxy bool
	// early injects the fault 2 s after the clients start, while they
	// are still connecting, instead of once all made progress.
	early bool
	// named: the fault runs only when -faults or -single names it, not
	// among the default -faults.
	named  bool
	inject func(ctx context.Context, r *runner) error
}

// brokerDown is how long a killed or stopped broker stays down before its
// restart.
const brokerDown = 5 * time.Second

// blackholeFor is how long a broker's relay stays a black hole: longer
// than the proxy's dial timeout (10 s by default), so that a dial fails
// and the broker's backoff is taken.
const blackholeFor = 15 * time.Second

var allFaults = []fault{
	{name: "none", desc: "no fault: the control row",
		inject: func(ctx context.Context, r *runner) error { return nil }},
	{name: "broker-kill", desc: "SIGKILL of the broker leading partition 0 of the franz-go producer's topic; restarted on its data 5 s later",
		inject: func(ctx context.Context, r *runner) error {
			n, err := r.leader(ctx)
			if err != nil {
				return err
			}
			if err := r.cluster.signal(n, syscall.SIGKILL); err != nil {
				return err
			}
			if err := r.cluster.waitExit(n, 30*time.Second); err != nil {
				return err
			}
			r.logf("killed node %d", n)
			time.Sleep(brokerDown)
			return r.cluster.restart(ctx, n)
		}},
	{name: "broker-stall", desc: fmt.Sprintf("SIGSTOP of that leader for %v (the clients' request timeout is %v, the brokers' session timeout 9 s), then SIGCONT", requestTimeout+5*time.Second, requestTimeout),
		inject: func(ctx context.Context, r *runner) error {
			n, err := r.leader(ctx)
			if err != nil {
				return err
			}
			if err := r.cluster.signal(n, syscall.SIGSTOP); err != nil {
				return err
			}
			r.logf("stopped node %d", n)
			time.Sleep(requestTimeout + 5*time.Second)
			return r.cluster.signal(n, syscall.SIGCONT)
		}},
	{name: "broker-restart", desc: "clean restart (SIGTERM, wait for exit, start) of that leader",
		inject: func(ctx context.Context, r *runner) error {
			n, err := r.leader(ctx)
			if err != nil {
				return err
			}
			if err := r.cluster.signal(n, syscall.SIGTERM); err != nil {
				return err
			}
			if err := r.cluster.waitExit(n, 90*time.Second); err != nil {
				return err
			}
			r.logf("stopped node %d cleanly", n)
			return r.cluster.restart(ctx, n)
		}},
	{name: "broker-blackhole", named: true,
		desc: fmt.Sprintf("the relay in front of that leader becomes a black hole for %v: its connections reset, new ones neither accepted nor refused (a dial waits for its timeout), the broker itself untouched; then it relays again", blackholeFor),
		inject: func(ctx context.Context, r *runner) error {
			n, err := r.leader(ctx)
			if err != nil {
				return err
			}
			if n < 1 || n > len(r.cluster.relays) {
				return fmt.Errorf("no relay for node %d", n)
			}
			restore, err := r.cluster.relays[n-1].Blackhole()
			if err != nil {
				return err
			}
			r.logf("node %d's relay is a black hole", n)
			time.Sleep(blackholeFor)
			return restore()
		}},
	{name: "proxy-term", desc: "SIGTERM of the proxy (it drains for up to its 5 s grace) and a new proxy on the same ports, as a rolling deploy does", proxy: true,
		inject: func(ctx context.Context, r *runner) error { return proxyTerm(r) }},
	{name: "proxy-term-early", desc: "the same SIGTERM and new proxy 2 s after the clients started, while they are still connecting", proxy: true, early: true,
		inject: func(ctx context.Context, r *runner) error { return proxyTerm(r) }},
	{name: "proxy-kill", desc: "SIGKILL of the proxy and a new proxy on the same ports", proxy: true,
		inject: func(ctx context.Context, r *runner) error {
			r.proxy.stop(syscall.SIGKILL, 10*time.Second)
			t1 := time.Now()
			err := r.startProxy(false)
			r.logf("the new proxy listened %v after the SIGKILL", time.Since(t1).Round(10*time.Millisecond))
			return err
		}},
	{name: "upstream-reset", desc: "every connection between proxy and brokers reset (RST both ways) by the relay, three times 2 s apart",
		inject: func(ctx context.Context, r *runner) error {
			for i := range 3 {
				if i > 0 {
					time.Sleep(2 * time.Second)
				}
				n := 0
				for _, rl := range r.cluster.relays {
					n += rl.Cut()
				}
				r.logf("reset %d upstream connections", n)
			}
			return nil
		}},
	{name: "upstream-stall", desc: fmt.Sprintf("the relay delays every chunk by 200 ms for 4 s, then forwards nothing for %v (connections stay open), then carries on", requestTimeout+5*time.Second),
		inject: func(ctx context.Context, r *runner) error {
			for _, rl := range r.cluster.relays {
				rl.SetDelay(200 * time.Millisecond)
			}
			time.Sleep(4 * time.Second)
			var releases []func()
			for _, rl := range r.cluster.relays {
				rl.SetDelay(0)
				releases = append(releases, rl.Hold())
			}
			time.Sleep(requestTimeout + 5*time.Second)
			for _, release := range releases {
				release()
			}
			return nil
		}},
}

// proxyTerm stops the proxy with SIGTERM and starts a new one on the same
// ports once it exited.
func proxyTerm(r *runner) error {
	t0 := time.Now()
	if err := r.proxy.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		return err
	}
	t1 := time.Now()
	err := r.startProxy(false)
	r.logf("proxy exited %v after SIGTERM; the new one listened %v later", t1.Sub(t0).Round(10*time.Millisecond), time.Since(t1).Round(10*time.Millisecond))
	return err
}

// leader is the node leading partition 0 of the round's franz-go
// producer topic, read directly from the brokers.
func (r *runner) leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(directSeeds()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, r.leaderTopic)
	if err != nil {
		return 0, err
	}
	t, ok := md.Topics[r.leaderTopic]
	if !ok || t.Err != nil {
		return 0, fmt.Errorf("metadata of %s: %v", r.leaderTopic, t.Err)
	}
	p, ok := t.Partitions[0]
	if !ok || p.Leader < 1 {
		return 0, fmt.Errorf("no leader for %s/0", r.leaderTopic)
	}
	return int(p.Leader), nil
}

func faultByName(name string) (fault, bool) {
	for _, f := range allFaults {
		if f.name == name {
			return f, true
		}
	}
	return fault{}, false
}
