package proxy_test

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// pipelineOutcome is what one pipelining client saw: how many of its
// requests were answered, in order, and how reading ended.
type pipelineOutcome struct {
	client   string
	sent     int
	answered int
	err      error
	// longest is the longest the client waited for an answer.
	longest time.Duration
	// goroutines is every goroutine's stack at the moment the proxy was
	// found silent, to show where the owed answer is held.
	goroutines string
}

// answerSilence is how long a pipelining client waits for its next answer
// before it holds the proxy stalled: several times the longest wait the
// proxy itself bounds (the response wait, 2 s in these tests, and the
// read timeout, 5 s), each of which ends in an answer or a close. It is
// per answer, not per pipeline, so a pipeline of many large answers on a
// loaded machine under the race detector is not failed for its length,
// and a request neither answered nor closed still is.
const answerSilence = 20 * time.Second

// writeMix returns a pipeline of n writes (Produce with acks -1 and
// OffsetCommit, on a few partitions, small and large) whose frames stay
// within maxFrame, with correlation ids from 1.
func writeMix(rng *rand.Rand, n, maxFrame int) [][]byte {
	frames := make([][]byte, 0, n)
	sizes := []int{10, 500, 4000, 12000, 40000, 120000}
	for i := range n {
		corr := int32(i + 1)
		var size int
		for {
			size = sizes[rng.IntN(len(sizes))]
			if size < maxFrame/2 {
				break
			}
		}
		parts := make([]int32, 1+rng.IntN(3))
		labels := make([]string, len(parts))
		for j := range parts {
			parts[j], labels[j] = int32(rng.IntN(4)), fmt.Sprintf("%d-%d", i, j)
		}
		if rng.IntN(3) == 0 {
			frames = append(frames, paddedCommit(parts[0], size, corr))
			continue
		}
		req := multiProduce(9, "t", parts, labels, size/len(parts))
		frames = append(frames, kmsg.NewRequestFormatter().AppendRequest(nil, req, corr))
	}
	return frames
}

// pipelineWrites writes frames on a connection of its own to addr and reads
// the responses, which must come in order, until all are answered, the
// proxy closes the connection, or it leaves the client without an answer
// for answerSilence. The writer needs no deadline of its own: closing the
// connection on return ends it.
func pipelineWrites(addr string, frames [][]byte) pipelineOutcome {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return pipelineOutcome{err: err}
	}
	defer c.Close()
	out := pipelineOutcome{client: c.LocalAddr().String(), sent: len(frames)}
	go func() {
		for _, f := range frames {
			if _, err := c.Write(f); err != nil {
				return
			}
		}
	}()
	fail := func(err error) pipelineOutcome {
		out.err = err
		if errors.Is(err, os.ErrDeadlineExceeded) {
			out.goroutines = goroutineDump()
		}
		return out
	}
	var head [8]byte
	for i := range frames {
		asked := time.Now()
		c.SetReadDeadline(asked.Add(answerSilence))
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return fail(err)
		}
		if got, want := binary.BigEndian.Uint32(head[4:]), uint32(i+1); got != want {
			return fail(fmt.Errorf("response %d where %d was owed", got, want))
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:]))-4); err != nil {
			return fail(err)
		}
		out.longest = max(out.longest, time.Since(asked))
		out.answered++
	}
	return out
}

// goroutineDump is every goroutine's stack, the proxy's among them.
func goroutineDump() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}

var budgetSeed = flag.Uint64("budget-seed", 0, "seed of TestAnyPipelineIsAnsweredOrClosed's rounds; 0 takes one from the clock")

// TestAnyPipelineIsAnsweredOrClosed is the memory budget's property: for
// any mix of pipelined writes (Produce and OffsetCommit, small and large,
// overlapping partitions) from several clients at once, in either ordering
// mode, in front of an upstream that answers out of order, and any budget
// size, every request is answered in order or its connection is closed
// with a reason in the log, and a client that asks for the upstream's
// versions meanwhile is answered every time. Rounds are seeded (the seed
// is logged) and bounded in time.
func TestAnyPipelineIsAnsweredOrClosed(t *testing.T) {
	defer proxy.SetResponseWait(2 * time.Second)()
	seed := *budgetSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-budget-seed repeats the rounds)", seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		budget := int64(64<<10) << rng.IntN(6) // 64 KiB to 2 MiB
		mode := []config.Ordering{config.OrderingNone, config.OrderingConnection}[rng.IntN(2)]
		maxFrame := int32(budget / 2)
		readTimeout := []time.Duration{0, 5 * time.Second}[rng.IntN(2)]
		clients := 1 + rng.IntN(4)
		t.Run(fmt.Sprintf("%d:%s/budget=%d/clients=%d/read-timeout=%s", round, mode, budget, clients, readTimeout), func(t *testing.T) {
			up := newReorderer(t, 5*time.Millisecond, time.Duration(5+rng.IntN(45))*time.Millisecond, "t", 4)
			p := startProxy(t, mode, []string{up.Addr()}, func(c *config.Config) {
				c.MaxMemory = budget
				c.MaxRequestSize, c.MaxResponseSize = maxFrame, maxFrame
				c.ReadTimeout = readTimeout
			})
			pipelines := make([][][]byte, clients)
			for i := range pipelines {
				pipelines[i] = writeMix(rng, 40+rng.IntN(80), int(maxFrame))
			}
			closed, asked := runBeside(t, p, pipelines)
			waits, waited := p.Stats().MemoryWaits, p.Stats().MemoryWaited
			t.Logf("%d pipelines, %d closed, %d ApiVersions answered meanwhile; %d waits for memory, %s in all", clients, closed, asked, waits, waited)
		})
	}
}

// runBeside sends each pipeline on a connection of its own, while an
// unrelated client asks for ApiVersions every 100 ms and must be answered,
// and holds every pipeline to being answered whole or closed by the proxy
// with a reason in the log. It gives how many were closed and how many
// ApiVersions were answered meanwhile.
func runBeside(t *testing.T, p *testProxy, pipelines [][][]byte) (closed, asked int) {
	t.Helper()
	var wg sync.WaitGroup
	outcomes := make([]pipelineOutcome, len(pipelines))
	for i := range pipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = pipelineWrites(p.Addr(), pipelines[i])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
observe:
	for {
		asked++
		if took, err := apiVersions(t, p.Addr(), 5*time.Second); err != nil {
			t.Errorf("an unrelated client's ApiVersions: %v after %s", err, took)
		}
		select {
		case <-done:
			break observe
		case <-time.After(100 * time.Millisecond):
		}
	}
	var longest time.Duration
	for _, o := range outcomes {
		longest = max(longest, o.longest)
	}
	t.Logf("the longest wait for an answer: %s of the %s allowed", longest.Round(time.Millisecond), answerSilence)
	for _, o := range outcomes {
		if o.answered == o.sent {
			continue
		}
		if o.client == "" || o.err == nil || !strings.Contains(o.err.Error(), "EOF") && !strings.Contains(o.err.Error(), "reset") {
			t.Errorf("client %s: %d of %d answered, then %v: neither all answered nor closed by the proxy", o.client, o.answered, o.sent, o.err)
			if o.goroutines != "" {
				t.Errorf("goroutines when client %s found the proxy silent for %s:\n%s", o.client, answerSilence, o.goroutines)
			}
			continue
		}
		closed++
		p.log.waitFor(t, `msg="connection closed" client=`+o.client)
		line := logLine(p.log.String(), "client="+o.client)
		if !strings.Contains(line, "reason=") {
			t.Errorf("client %s was closed after %d of %d answers without a reason in the log: %q", o.client, o.answered, o.sent, line)
			for _, l := range strings.Split(p.log.String(), "\n") {
				if strings.Contains(l, o.client) {
					t.Log(l)
				}
			}
		}
		t.Logf("client %s closed after %d of %d answers: %s", o.client, o.answered, o.sent, line)
	}
	return closed, asked
}
