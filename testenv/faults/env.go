package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/inorder-proxy/inorder/internal/hostile"
)

// The three-node cluster of testenv/kafka with its RELAYED listener: node N
// serves clients on relayedBase+N and advertises relayBase+N, where the
// suite's relay listens. The proxy's upstream is the relays, so every byte
// between proxy and brokers crosses a relay the suite can cut.
const (
	nodes        = 3
	brokerBase   = 29091 // PLAINTEXT, used by the suite's own checks only
	controlBase  = 29191
	relayedBase  = 29291
	relayBase    = 29391
	proxyPort    = 22500 // the proxy's bootstrap; node N on proxyPort+1+N
	relayDialMax = 5 * time.Second
)

// cluster drives testenv/kafka's scripts and the brokers' processes.
type cluster struct {
	root   string // repository root
	runDir string
	env    []string
	relays []*hostile.Relay
}

func (c *cluster) script(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(c.root, "testenv/kafka", name)}, args...)...)
	cmd.Env = c.env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(errb.String(), 30))
	}
	return strings.TrimSpace(out.String()), nil
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func newCluster(root, runDir string) *cluster {
	env := append(os.Environ(), "KAFKA_RUN_DIR="+runDir, "KAFKA_RELAYED_LISTENER=1")
	if os.Getenv("KAFKA_HEAP") == "" {
		env = append(env, "KAFKA_HEAP=-Xms128m -Xmx320m")
	}
	return &cluster{root: root, runDir: runDir, env: env}
}

// start formats and starts the cluster and the relays in front of it.
func (c *cluster) start(ctx context.Context) error {
	for n := 1; n <= nodes; n++ {
		r, err := hostile.NewRelay(fmt.Sprintf("127.0.0.1:%d", relayBase+n), fmt.Sprintf("127.0.0.1:%d", relayedBase+n))
		if err != nil {
			return fmt.Errorf("relay for node %d: %w", n, err)
		}
		c.relays = append(c.relays, r)
	}
	_, err := c.script(ctx, "start.sh", "cluster")
	return err
}

// stop stops the cluster (SIGCONT first, in case a node is paused) and the relays.
func (c *cluster) stop() {
	for n := 1; n <= nodes; n++ {
		if pid, err := c.pid(n); err == nil {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.script(ctx, "stop.sh", "cluster"); err != nil {
		slog.Warn("stopping the cluster", "err", err)
	}
	for _, r := range c.relays {
		r.Close()
	}
	c.relays = nil
}

func (c *cluster) pid(n int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.runDir, "cluster", fmt.Sprintf("node%d", n), "pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// pids returns the running brokers' pids.
func (c *cluster) pids() []int {
	var out []int
	for n := 1; n <= nodes; n++ {
		if pid, err := c.pid(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func (c *cluster) signal(n int, sig syscall.Signal) error {
	pid, err := c.pid(n)
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

// waitExit waits until node n's process is gone.
func (c *cluster) waitExit(n int, d time.Duration) error {
	pid, err := c.pid(n)
	if err != nil {
		return err
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %d (pid %d) still running after %v", n, pid, d)
}

// restart starts node n again on its data and waits for its port.
func (c *cluster) restart(ctx context.Context, n int) error {
	_, err := c.script(ctx, "node.sh", "cluster", strconv.Itoa(n))
	return err
}

func directSeeds() []string {
	var s []string
	for n := 1; n <= nodes; n++ {
		s = append(s, fmt.Sprintf("127.0.0.1:%d", brokerBase+n))
	}
	return s
}

// brokerPorts are every port of the cluster a client of the proxy must
// never reach: the brokers' listeners and the relays.
func brokerPorts() map[int]bool {
	m := make(map[int]bool)
	for n := 1; n <= nodes; n++ {
		for _, b := range []int{brokerBase, controlBase, relayedBase, relayBase} {
			m[b+n] = true
		}
	}
	return m
}

// proxyAddrs are the addresses clients may dial: the bootstrap and the
// node listeners, or, with single, the one address of the single
// endpoint.
func proxyAddrs(single bool) map[string]bool {
	m := map[string]bool{fmt.Sprintf("127.0.0.1:%d", proxyPort): true}
	for n := 1; n <= nodes && !single; n++ {
		m[fmt.Sprintf("127.0.0.1:%d", proxyPort+1+n)] = true
	}
	return m
}

// proxy is one `inorder serve` process in front of the relays.
type proxy struct {
	bin, mode, logPath string
	single             bool   // --topology single
	admin              string // host:port of --admin-listen when the binary has it
	// pprof: the binary has --admin-pprof, whose goroutine profile counts
	// the proxy's goroutines exactly (see goroutineTotal)
	pprof bool

	mu  sync.Mutex
	cmd *exec.Cmd
	gen int // how many processes were started
}

func (p *proxy) Bootstrap() string { return fmt.Sprintf("127.0.0.1:%d", proxyPort) }

func (p *proxy) start() error {
	var ups []string
	for n := 1; n <= nodes; n++ {
		ups = append(ups, fmt.Sprintf("127.0.0.1:%d", relayBase+n))
	}
	args := []string{"serve", "--listen", p.Bootstrap(), "--upstream", strings.Join(ups, ","),
		"--upstream-ordering", p.mode, "--shutdown-grace", "5s"}
	if p.single {
		args = append(args, "--topology", "single")
	}
	if p.admin != "" {
		args = append(args, "--admin-listen", p.admin)
		if p.pprof {
			args = append(args, "--admin-pprof")
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// the proxy dies with the suite, even a suite that is killed
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.cmd = cmd
	p.gen++
	p.mu.Unlock()
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		if c, err := net.DialTimeout("tcp", p.Bootstrap(), time.Second); err == nil {
			c.Close()
			return nil
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("proxy did not open %s in 30 s (log %s)", p.Bootstrap(), p.logPath)
}

func (p *proxy) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop sends sig and waits up to d for the process to end (SIGKILL after).
func (p *proxy) stop(sig syscall.Signal, d time.Duration) error {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if sig == syscall.SIGTERM && err != nil && !errors.As(err, &ee) {
			return err
		}
		if sig == syscall.SIGTERM && err != nil {
			return fmt.Errorf("proxy exited on SIGTERM with %v", err)
		}
		return nil
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("proxy still running %v after %v; killed", d, sig)
	}
}

// Usage is a sample of the proxy process's resources.
type Usage struct {
	At         time.Time
	RSSKiB     int64
	Threads    int64
	FDs        int64
	Goroutines int64 // -1 when the proxy does not expose it
}

// sample reads the proxy's resident memory, threads and descriptors from
// /proc, and its goroutines from the admin endpoint if it has one: from
// its goroutine profile where it serves one, else from its metrics.
func (p *proxy) sample() (Usage, error) {
	u := Usage{At: time.Now(), Goroutines: -1}
	pid := p.Pid()
	if pid == 0 {
		return u, errors.New("no proxy running")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSSKiB, _ = strconv.ParseInt(fs[0], 10, 64)
		case "Threads":
			u.Threads, _ = strconv.ParseInt(fs[0], 10, 64)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = int64(len(ents))
	if p.admin != "" {
		if p.pprof {
			u.Goroutines = goroutineTotal("http://" + p.admin + "/debug/pprof/goroutine?debug=1")
		} else {
			u.Goroutines = scrapeGauge("http://"+p.admin+"/metrics", "go_goroutines")
		}
	}
	return u, nil
}
