package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// dialLog is a kgo dialer that lets a client reach only the proxy: every
// address it is asked for is recorded, and one outside the proxy's
// listeners (reach, from proxyAddrs) is refused and counted as a bypass.
type dialLog struct {
	allowed map[string]bool
	mu      sync.Mutex
	dials   int
	bypass  []string
}

func newDialLog(reach map[string]bool) *dialLog { return &dialLog{allowed: reach} }

func (d *dialLog) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	d.dials++
	ok := d.allowed[host]
	if !ok {
		d.bypass = append(d.bypass, host)
	}
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("refused: %s is not a listener of the proxy", host)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, host)
}

// check adds a violation to t if the client dialled anything but the proxy.
func (d *dialLog) check(t *Tally) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.bypass) > 0 {
		t.violate("client dialled %d addresses that are not the proxy's, e.g. %s", len(d.bypass), d.bypass[0])
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d dials, all to the proxy's listeners", d.dials-len(d.bypass)))
}

// connWatch samples the machine's established TCP connections with ss, as
// compat/run-matrix.sh does, and records every one that a watched process
// (a client that is not in this process) holds to a port of the cluster.
type connWatch struct {
	ports map[int]bool
	mu    sync.Mutex
	pids  map[int]bool
	bad   []string
	runs  int
}

var ssPid = regexp.MustCompile(`pid=(\d+),`)

func newConnWatch() *connWatch { return &connWatch{ports: brokerPorts(), pids: map[int]bool{}} }

func (w *connWatch) watch(pid int) {
	w.mu.Lock()
	w.pids[pid] = true
	w.mu.Unlock()
}

// run samples every interval until ctx ends.
func (w *connWatch) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		out, err := exec.CommandContext(ctx, "ss", "-tnpH", "state", "established").Output()
		if err == nil {
			w.scan(string(out))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scan reads one ss listing: columns Recv-Q Send-Q Local Peer Process.
func (w *connWatch) scan(listing string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs++
	sc := bufio.NewScanner(strings.NewReader(listing))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		_, port, err := net.SplitHostPort(f[3])
		if err != nil {
			continue
		}
		pn, _ := strconv.Atoi(port)
		if !w.ports[pn] {
			continue
		}
		for _, m := range ssPid.FindAllStringSubmatch(f[4], -1) {
			pid, _ := strconv.Atoi(m[1])
			if w.pids[pid] {
				w.bad = append(w.bad, fmt.Sprintf("pid %d %s -> %s", pid, f[2], f[3]))
			}
		}
	}
}

func (w *connWatch) check(t *Tally) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == 0 {
		t.violate("the connection sampler (ss) never ran")
		return
	}
	if len(w.bad) > 0 {
		t.violate("%d sampled connections to the cluster bypass the proxy, e.g. %s", len(w.bad), w.bad[0])
	}
}

// goroutineTotal reads the goroutine count from a goroutine profile's
// first line ("goroutine profile: total N"), or -1. Unlike go_goroutines
// in /metrics, it does not count the metrics registry's own collector
// goroutines, of which a scrape starts a varying number: an idle proxy's
// go_goroutines moves by one from scrape to scrape, which a comparison with
// an idle baseline would take for a leak. The profile's handler runs on one
// goroutine of the admin server in every sample alike.
func goroutineTotal(url string) int64 {
	return scrapeNumber(url, "goroutine profile: total ")
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text endpoint;
// -1 when it cannot.
func scrapeGauge(url, name string) int64 {
	return scrapeNumber(url, name+" ")
}

// scrapeNumber reads the number after prefix on the first line of url's
// body that starts with it; -1 when it cannot.
func scrapeNumber(url, prefix string) int64 {
	// no keep-alive: an idle connection left open would count as one of
	// the proxy's descriptors and goroutines
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}
