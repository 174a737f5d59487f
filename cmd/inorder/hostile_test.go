package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The bound the hostile tests give the proxy, and what README says its
// resident memory may exceed it by: the runtime's soft limit is 32 MiB
// above the bound (cmd/memlimit.go), the rest is the binary's code and what
// the runtime overshoots that limit by.
const (
	maxMemory   = 256 << 20
	rssConstant = 64 << 20
)

// TestHostileClients runs the built binary in front of an embedded broker
// and attacks it as an unauthenticated client can, while a well-behaved
// client keeps asking for metadata on its own connection:
//
//   - hundreds of connections each send a 100 MiB length prefix and then
//     trickle bytes, and some send tens of MiB of their frame at once and
//     stall;
//   - one client pipelines Produce requests over 100,000 partitions in
//     none mode.
//
// Throughout, the proxy's resident memory stays under --max-memory plus a
// small constant, and the well-behaved client is answered every time.
func TestHostileClients(t *testing.T) {
	measuresBinary(t, "runs the built binary for about half a minute")
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addr, pid := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--max-memory", strconv.Itoa(maxMemory), "--max-response-size", "100MiB", "--read-timeout", "5s", "--log-level", "error")

	probe := startProbe(t, addr)

	t.Run("large prefixes", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		prefix := binary.BigEndian.AppendUint32(nil, 100<<20)
		for i := range 340 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
			c.Write(prefix)
			if i%8 == 0 {
				// Tens of MiB of the frame at once, then a stall.
				go func() {
					c.SetWriteDeadline(time.Now().Add(8 * time.Second))
					c.Write(make([]byte, 40<<20))
				}()
			}
		}
		// The rest trickle a byte every 100 ms.
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			for i, c := range conns {
				if i%8 != 0 {
					c.Write([]byte{0})
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	checkResident(t, pid, "large prefixes")
	probe.check(t, "large prefixes")

	t.Run("produce over 100k partitions", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		frame := wideProduce(100_000)
		const requests = 12
		var answered atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			r := bufio.NewReader(c)
			var lb [4]byte
			for range requests {
				if _, err := io.ReadFull(r, lb[:]); err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(lb[:]))); err != nil {
					return
				}
				answered.Add(1)
			}
		}()
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		for i := range requests {
			binary.BigEndian.PutUint32(frame[8:], uint32(i))
			if _, err := c.Write(frame); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		if n := answered.Load(); n != requests {
			t.Fatalf("%d of %d pipelined produce requests answered", n, requests)
		}
		t.Logf("%d produce requests of %d bytes over 100,000 partitions answered", requests, len(frame))
	})
	checkResident(t, pid, "produce over 100k partitions")
	probe.check(t, "produce over 100k partitions")
}

// startBinary builds cmd/inorder, runs it with args, and returns the
// address it prints and its pid; the process is killed when the test ends.
// measuresBinary skips a test of the built binary's resident memory where
// it cannot run: off Linux, with -short (long says what it would do), and
// under the race detector, whose own memory and latency it would measure;
// .ci/run runs such tests without it.
func measuresBinary(t *testing.T, long string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's resident memory from /proc")
	}
	if testing.Short() {
		t.Skip(long)
	}
	if raceEnabled {
		t.Skip("measures resident memory and latency; .ci/run runs it without the race detector")
	}
}

func startBinary(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inorder")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, addr, ok := strings.Cut(lines.Text(), "clients connect to "); ok {
			go io.Copy(io.Discard, stdout)
			return strings.TrimSpace(addr), cmd.Process.Pid
		}
	}
	t.Fatal("the proxy never printed its address")
	return "", 0
}

// checkResident fails the test if the process's peak resident memory so
// far is above the bound. The peak is the kernel's high-water mark
// (VmHWM), so a spike between two looks is not missed.
func checkResident(t *testing.T, pid int, phase string) {
	t.Helper()
	peak, err := peakResident(pid)
	if err != nil {
		t.Fatalf("%s: %v", phase, err)
	}
	t.Logf("%s: peak resident memory so far %d MiB (bound %d MiB + %d MiB)", phase, peak>>20, maxMemory>>20, rssConstant>>20)
	if peak > maxMemory+rssConstant {
		t.Errorf("%s: resident memory reached %d MiB, above --max-memory %d MiB plus %d MiB", phase, peak>>20, maxMemory>>20, rssConstant>>20)
	}
}

func peakResident(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM line in /proc/%d/status", pid)
}

// probe is a well-behaved client on its own connection. Every 50 ms it
// sends an ApiVersions above the proxy's version, which the proxy answers
// itself (so its latency is the proxy's alone: reading, memory, sequencing,
// writing), and a metadata request, which goes through the broker (whose
// single request loop is busy with the attack's requests, so its latency is
// only checked for liveness).
type probe struct {
	mu          sync.Mutex
	local, full []time.Duration
	failure     error
}

// probeRounds is the fewest answers of each kind a phase is judged on.
const probeRounds = 10

func startProbe(t *testing.T, addr string) *probe {
	p := &probe{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			p.fail(err)
			return
		}
		defer c.Close()
		fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("probe"))
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 99
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 1
		meta.Topics = []kmsg.MetadataRequestTopic{}
		frames := [][]byte{fmtr.AppendRequest(nil, av, 1), fmtr.AppendRequest(nil, meta, 2)}
		var lb [4]byte
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for i, f := range frames {
				start := time.Now()
				c.SetDeadline(start.Add(10 * time.Second))
				_, err := c.Write(f)
				if err == nil {
					_, err = io.ReadFull(c, lb[:])
				}
				if err == nil {
					_, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(lb[:])))
				}
				if err != nil {
					p.fail(err)
					return
				}
				p.mu.Lock()
				if i == 0 {
					p.local = append(p.local, time.Since(start))
				} else {
					p.full = append(p.full, time.Since(start))
				}
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	return p
}

func (p *probe) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure == nil {
		p.failure = err
	}
}

// check fails the test if the probe failed, if the proxy took over a
// second to answer it, or if the broker path took over five; it logs the
// latencies of the phase and starts afresh. A phase shorter than ten of
// the probe's rounds (a proxy that sheds the attack quickly) is judged
// once the probe has made ten since the last check: every answer of the
// phase is among them, and the slowest is what the bounds judge.
func (p *probe) check(t *testing.T, phase string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		enough := p.failure != nil || len(p.local) >= probeRounds && len(p.full) >= probeRounds
		p.mu.Unlock()
		if enough {
			break
		}
	}
	p.mu.Lock()
	local, full, failure := slices.Clone(p.local), slices.Clone(p.full), p.failure
	p.local, p.full = p.local[:0], p.full[:0]
	p.mu.Unlock()
	if failure != nil {
		t.Fatalf("%s: the well-behaved client failed: %v", phase, failure)
	}
	for _, s := range []struct {
		name  string
		took  []time.Duration
		bound time.Duration
	}{{"answered by the proxy", local, time.Second}, {"through the broker", full, 5 * time.Second}} {
		if len(s.took) < probeRounds {
			t.Fatalf("%s: the well-behaved client was answered %d times %s", phase, len(s.took), s.name)
		}
		slices.Sort(s.took)
		worst := s.took[len(s.took)-1]
		t.Logf("%s: well-behaved client, %d requests %s: p50 %s, p99 %s, max %s", phase, len(s.took), s.name,
			s.took[len(s.took)/2], s.took[len(s.took)*99/100], worst)
		if worst > s.bound {
			t.Errorf("%s: a request of the well-behaved client %s took %s", phase, s.name, worst)
		}
	}
}

// wideProduce is a Produce v9 (acks=1) naming n partitions of a topic the
// broker does not have, with no records: the frame is small per partition,
// the key state it would make the proxy hold is not.
func wideProduce(n int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 5000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "wide"
	for i := range n {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = int32(i)
		topic.Partitions = append(topic.Partitions, p)
	}
	req.Topics = append(req.Topics, topic)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("wide")).AppendRequest(nil, req, 0)
}
