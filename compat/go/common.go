package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rec is one record the workload sends: its sequence number is the value,
// its key is derived from the sequence, its partition from the key.
type Rec struct {
	Seq       int
	Partition int32
}

func (r Rec) Key() string   { return "k" + strconv.Itoa(r.Seq%50) }
func (r Rec) Value() string { return strconv.Itoa(r.Seq) }

// Got is one record a consumer received.
type Got struct {
	Seq       int
	Partition int32
	Offset    int64
}

func parseGot(value []byte, partition int32, offset int64) (Got, error) {
	s, err := strconv.Atoi(string(value))
	if err != nil {
		return Got{}, fmt.Errorf("unexpected value %q at partition %d offset %d", value, partition, offset)
	}
	return Got{Seq: s, Partition: partition, Offset: offset}, nil
}

func genRecs(from, to, partitions int) []Rec {
	out := make([]Rec, 0, to-from)
	for s := from; s < to; s++ {
		out = append(out, Rec{Seq: s, Partition: int32((s % 50) % partitions)})
	}
	return out
}

// ErrLimit marks a step the client cannot do (its own limitation).
type ErrLimit struct{ Why string }

func (e ErrLimit) Error() string { return "client limitation: " + e.Why }

// verify checks that the records received by the consumers (one slice per
// group member, each in consumption order) are exactly the records sent:
// nothing lost, nothing duplicated, nothing extra, and per partition in send
// order. A partition must be read by one member only.
func verify(sent []Rec, members [][]Got) error {
	want := map[int]Rec{}
	perPartWant := map[int32][]int{}
	for _, r := range sent {
		want[r.Seq] = r
		perPartWant[r.Partition] = append(perPartWant[r.Partition], r.Seq)
	}
	seen := map[int]bool{}
	owner := map[int32]int{}
	perPartGot := map[int32][]int{}
	lastOff := map[int32]int64{}
	var problems []string
	add := func(format string, a ...any) {
		if len(problems) < 8 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
	}
	for m, gots := range members {
		for _, g := range gots {
			r, ok := want[g.Seq]
			switch {
			case !ok:
				add("unexpected record seq %d (partition %d offset %d)", g.Seq, g.Partition, g.Offset)
				continue
			case seen[g.Seq]:
				add("duplicate record seq %d (partition %d offset %d)", g.Seq, g.Partition, g.Offset)
				continue
			case r.Partition != g.Partition:
				add("record seq %d sent to partition %d, read from %d", g.Seq, r.Partition, g.Partition)
			}
			seen[g.Seq] = true
			if o, ok := owner[g.Partition]; ok && o != m {
				add("partition %d read by members %d and %d", g.Partition, o, m)
			}
			owner[g.Partition] = m
			if lo, ok := lastOff[g.Partition]; ok && g.Offset <= lo {
				add("partition %d offsets not increasing: %d after %d", g.Partition, g.Offset, lo)
			}
			lastOff[g.Partition] = g.Offset
			perPartGot[g.Partition] = append(perPartGot[g.Partition], g.Seq)
		}
	}
	missing := 0
	for s := range want {
		if !seen[s] {
			missing++
		}
	}
	if missing > 0 {
		add("%d of %d records lost", missing, len(sent))
	}
	for p, w := range perPartWant {
		g := perPartGot[p]
		n := min(len(g), len(w))
		for i := 0; i < n; i++ {
			if g[i] != w[i] {
				add("partition %d: record #%d is seq %d, sent order says %d", p, i, g[i], w[i])
				break
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// expectSet is the set of host:port a client may learn ("-" or "" = skip).
// Items are host:port or host:lo-hi, comma separated.
type expectSet struct {
	items []struct {
		host   string
		lo, hi int
	}
}

func parseExpect(s string) (*expectSet, error) {
	if s == "" || s == "-" {
		return nil, nil
	}
	e := &expectSet{}
	for _, it := range strings.Split(s, ",") {
		host, ports, err := net.SplitHostPort(strings.TrimSpace(it))
		if err != nil {
			return nil, fmt.Errorf("bad expect item %q: %v", it, err)
		}
		lo, hi := ports, ports
		if i := strings.IndexByte(ports, '-'); i >= 0 {
			lo, hi = ports[:i], ports[i+1:]
		}
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || l > h {
			return nil, fmt.Errorf("bad expect item %q", it)
		}
		e.items = append(e.items, struct {
			host   string
			lo, hi int
		}{host, l, h})
	}
	return e, nil
}

func (e *expectSet) allows(addr string) bool {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	for _, it := range e.items {
		if it.host == host && p >= it.lo && p <= it.hi {
			return true
		}
	}
	return false
}

func checkAddrs(e *expectSet, addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("client reported no broker addresses")
	}
	sort.Strings(addrs)
	var bad []string
	for _, a := range addrs {
		if !e.allows(a) {
			bad = append(bad, a)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("client learned addresses outside the proxy: %v (all: %v)", bad, addrs)
	}
	return nil
}

// noted limitations of the client that do not stop a step.
var (
	notedMu sync.Mutex
	noted   []string
)

func noteLimit(step, why string) {
	notedMu.Lock()
	defer notedMu.Unlock()
	fmt.Printf("LIMIT %s: %s\n", step, why)
	noted = append(noted, step+": "+why)
}

// Step bookkeeping: every step prints one line; the last line is RESULT.
type runner struct {
	client  string
	failed  []string
	limits  []string
	started time.Time
}

func (r *runner) step(name string, timeout time.Duration, f func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t := time.Now()
	err := f(ctx)
	d := time.Since(t).Round(time.Millisecond)
	var lim ErrLimit
	switch {
	case err == nil:
		fmt.Printf("STEP %s ok (%v)\n", name, d)
		return true
	case errors.As(err, &lim):
		fmt.Printf("LIMIT %s: %s\n", name, lim.Why)
		r.limits = append(r.limits, name+": "+lim.Why)
		return false
	default:
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (step timeout %v)", err, timeout)
		}
		fmt.Printf("FAIL %s: %v (%v)\n", name, err, d)
		r.failed = append(r.failed, name+": "+err.Error())
		return false
	}
}

func (r *runner) finish() {
	d := time.Since(r.started).Round(time.Millisecond)
	if len(r.failed) > 0 {
		fmt.Printf("RESULT fail %s (%v): %s\n", r.client, d, strings.Join(r.failed, " | "))
		os.Exit(1)
	}
	notedMu.Lock()
	r.limits = append(r.limits, noted...)
	notedMu.Unlock()
	if len(r.limits) > 0 {
		fmt.Printf("RESULT pass %s (%v) with limitations: %s\n", r.client, d, strings.Join(r.limits, " | "))
		return
	}
	fmt.Printf("RESULT pass %s (%v)\n", r.client, d)
}
