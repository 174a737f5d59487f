package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestCompareCPUPairsRounds checks that the CPU ratio is taken round by
// round, not as a ratio of medians, and that its quartiles are reported.
func TestCompareCPUPairsRounds(t *testing.T) {
	round := func(cpu time.Duration) Sample {
		return Sample{Elapsed: time.Second, Produced: 1000, ProducedBytes: 1e9, CPU: cpu}
	}
	// The reference's cost drifts between rounds; the target costs 1.1
	// times the reference in every round but the first, where it costs
	// three times as much, which moves the ratio of the medians but not
	// the median of the ratios.
	ref := []time.Duration{400, 500, 600, 700, 800}
	var a, b []Sample
	for i, c := range ref {
		f := 1.1
		if i == 0 {
			f = 3
		}
		a = append(a, round(time.Duration(f*float64(c))*time.Millisecond))
		b = append(b, round(c*time.Millisecond))
	}
	// Two rounds in which the target moved nothing have no ratio; counted
	// as zero they would pull the lower quartile down.
	for range 2 {
		a = append(a, Sample{Elapsed: time.Second, CPU: 100 * time.Millisecond})
		b = append(b, round(500*time.Millisecond))
	}
	o := Default()
	o.Produce, o.Consume = true, false
	o.CPUPIDs = map[string]int{"proxy": 1, "relay": 2}
	o.RatioTo = []string{"relay"}
	res := Result{Options: o, Targets: []TargetResult{
		{Target: Target{Name: "proxy"}, Rounds: a},
		{Target: Target{Name: "relay"}, Rounds: b},
	}}
	c := res.Compare(0, 1)
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(c.CPU, 1.1) || !near(c.CPULow, 1.1) || !near(c.CPUHigh, 1.1) {
		t.Fatalf("CPU ratio %v (IQR %v-%v), want 1.1 (1.1-1.1)", c.CPU, c.CPULow, c.CPUHigh)
	}
	var md bytes.Buffer
	if err := res.Write(&md, "markdown"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| CPU/GB ×relay | CPU/GB ×relay IQR |") ||
		!strings.Contains(md.String(), "| 1.100 | 1.10–1.10 |") {
		t.Fatalf("markdown report has no CPU ratio columns:\n%s", md.String())
	}

	// A target whose process was not measured has no CPU ratio.
	delete(o.CPUPIDs, "proxy")
	for i := range a {
		a[i].CPU = 0
	}
	if c := res.Compare(0, 1); c.CPU != 0 {
		t.Fatalf("unmeasured target's CPU ratio %v, want 0", c.CPU)
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{4, 1, 3, 2, 5}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.25, 2}, {0.5, 3}, {0.75, 4}, {1, 5}, {0.125, 1.5}} {
		if got := quantile(v, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if v[0] != 4 {
		t.Fatal("quantile sorted its argument")
	}
	if quantile(nil, 0.5) != 0 {
		t.Fatal("quantile of nothing is not 0")
	}
}
