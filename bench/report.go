package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Median is the per-metric median over rounds; each field is its own
// median, so the figures need not come from the same round.
func (t TargetResult) Median() Sample {
	pick := func(f func(Sample) float64) float64 {
		v := make([]float64, len(t.Rounds))
		for i, s := range t.Rounds {
			v[i] = f(s)
		}
		return median(v)
	}
	m := Sample{Elapsed: time.Second}
	m.Produced = int64(pick(Sample.ProduceRate))
	m.ProducedBytes = int64(pick(Sample.ProduceMBps) * 1e6)
	m.Consumed = int64(pick(Sample.ConsumeRate))
	m.ConsumedBytes = int64(pick(Sample.ConsumeMBps) * 1e6)
	m.ProduceErrors = int64(pick(func(s Sample) float64 { return float64(s.ProduceErrors) }))
	m.P50 = time.Duration(pick(func(s Sample) float64 { return float64(s.P50) }))
	m.P99 = time.Duration(pick(func(s Sample) float64 { return float64(s.P99) }))
	m.P999 = time.Duration(pick(func(s Sample) float64 { return float64(s.P999) }))
	// CPU is scaled so that CPUPerGB of the median is the median CPUPerGB.
	perGB := pick(Sample.CPUPerGB)
	m.CPU = time.Duration(perGB * float64(m.ProducedBytes+m.ConsumedBytes) / 1e9 * float64(time.Second))
	return m
}

// PeakRSS is the highest resident memory of the target's measured process
// over every round, in bytes; zero when none was measured.
func (t TargetResult) PeakRSS() int64 {
	var hi int64
	for _, s := range t.Rounds {
		hi = max(hi, s.PeakRSS)
	}
	return hi
}

// P99Spread is the range of the target's p99 over rounds (highest minus
// lowest): its own run-to-run noise, beside which a difference in medians
// is to be read.
func (t TargetResult) P99Spread() time.Duration {
	if len(t.Rounds) == 0 {
		return 0
	}
	lo, hi := t.Rounds[0].P99, t.Rounds[0].P99
	for _, s := range t.Rounds[1:] {
		lo, hi = min(lo, s.P99), max(hi, s.P99)
	}
	return hi - lo
}

// Comparison is how one target fared against a reference, round by round:
// each figure is the median over rounds of the per-round ratio or
// difference, which cancels the drift a shared machine adds between rounds.
type Comparison struct {
	Target, Reference string
	// Produce and Consume are throughput ratios (target / reference);
	// zero when that side of the workload did not run.
	Produce, Consume float64
	// P99Delta is target p99 produce latency minus the reference's.
	P99Delta time.Duration
	// CPU is the ratio of CPU seconds per GB (target / reference), zero
	// unless both processes were measured; CPULow and CPUHigh are the
	// quartiles of the per-round ratios, the spread to read it beside.
	CPU, CPULow, CPUHigh float64
}

// Compare compares target i with target j.
func (r Result) Compare(i, j int) Comparison {
	a, b := r.Targets[i], r.Targets[j]
	n := min(len(a.Rounds), len(b.Rounds))
	var prod, cons, dp99, cpu []float64
	for k := 0; k < n; k++ {
		x, y := a.Rounds[k], b.Rounds[k]
		// A round in which either path moved nothing, or was not
		// measured, has no ratio.
		if x.CPUPerGB() > 0 && y.CPUPerGB() > 0 {
			cpu = append(cpu, x.CPUPerGB()/y.CPUPerGB())
		}
		if y.ProduceRate() > 0 {
			prod = append(prod, x.ProduceRate()/y.ProduceRate())
		}
		if y.ConsumeRate() > 0 {
			cons = append(cons, x.ConsumeRate()/y.ConsumeRate())
		}
		dp99 = append(dp99, float64(x.P99-y.P99))
	}
	return Comparison{
		Target:    a.Target.label(),
		Reference: b.Target.label(),
		Produce:   median(prod),
		Consume:   median(cons),
		P99Delta:  time.Duration(median(dp99)),
		CPU:       median(cpu),
		CPULow:    quantile(cpu, 0.25),
		CPUHigh:   quantile(cpu, 0.75),
	}
}

func (r Result) index(name string) int {
	for i, t := range r.Targets {
		if t.Target.label() == name {
			return i
		}
	}
	return -1
}

// quantile is the q-quantile of v, interpolated between the two nearest
// values.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	pos := q * float64(len(v)-1)
	i := int(pos)
	if i+1 >= len(v) {
		return v[i]
	}
	return v[i] + (pos-float64(i))*(v[i+1]-v[i])
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Write reports the medians of every target and its comparisons with every
// reference, as aligned text or as a Markdown table.
func (r Result) Write(w io.Writer, format string) error {
	o := r.Options
	var head []string
	head = append(head, "path")
	if o.Produce {
		head = append(head, "produce rec/s", "produce MB/s", "p50", "p99", "p99.9", "p99 spread")
	}
	if o.Consume {
		head = append(head, "consume rec/s", "consume MB/s")
	}
	if o.measuresAny() {
		head = append(head, "path CPU s/GB", "path peak RSS MiB")
	}
	for _, ref := range o.RatioTo {
		if o.Produce {
			head = append(head, "produce ×"+ref)
		}
		if o.Consume {
			head = append(head, "consume ×"+ref)
		}
		if o.Produce {
			head = append(head, "Δp99 vs "+ref)
		}
		if cpuCompared(o, ref) {
			head = append(head, "CPU/GB ×"+ref, "CPU/GB ×"+ref+" IQR")
		}
	}
	rows := [][]string{head}
	for i, t := range r.Targets {
		m := t.Median()
		row := []string{t.Target.label()}
		if o.Produce {
			row = append(row, fmt.Sprintf("%.0f", m.ProduceRate()), fmt.Sprintf("%.1f", m.ProduceMBps()),
				fmtDur(m.P50), fmtDur(m.P99), fmtDur(m.P999), fmtDur(t.P99Spread()))
		}
		if o.Consume {
			row = append(row, fmt.Sprintf("%.0f", m.ConsumeRate()), fmt.Sprintf("%.1f", m.ConsumeMBps()))
		}
		if o.measuresAny() {
			if o.measured(t.Target.label()) {
				row = append(row, fmt.Sprintf("%.3f", m.CPUPerGB()), fmt.Sprintf("%.1f", float64(t.PeakRSS())/(1<<20)))
			} else {
				row = append(row, "—", "—")
			}
		}
		for _, ref := range o.RatioTo {
			j := r.index(ref)
			if j == i {
				n := 0
				if o.Produce {
					n += 2
				}
				if o.Consume {
					n++
				}
				if cpuCompared(o, ref) {
					n += 2
				}
				for ; n > 0; n-- {
					row = append(row, "—")
				}
				continue
			}
			c := r.Compare(i, j)
			if o.Produce {
				row = append(row, fmt.Sprintf("%.3f", c.Produce))
			}
			if o.Consume {
				row = append(row, fmt.Sprintf("%.3f", c.Consume))
			}
			if o.Produce {
				row = append(row, fmtDelta(c.P99Delta))
			}
			if cpuCompared(o, ref) {
				if c.CPU > 0 {
					row = append(row, fmt.Sprintf("%.3f", c.CPU), fmt.Sprintf("%.2f–%.2f", c.CPULow, c.CPUHigh))
				} else {
					row = append(row, "—", "—")
				}
			}
		}
		rows = append(rows, row)
	}
	if format == "markdown" {
		return writeMarkdown(w, rows)
	}
	return writeText(w, rows, r)
}

// cpuCompared reports whether the table has CPU ratio columns against ref:
// its process was measured.
func cpuCompared(o Options, ref string) bool {
	return o.measured(ref)
}

func writeMarkdown(w io.Writer, rows [][]string) error {
	var b strings.Builder
	for i, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat(" --- |", len(row)) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeText(w io.Writer, rows [][]string, r Result) error {
	o := r.Options
	what := []string{}
	if o.Produce {
		what = append(what, fmt.Sprintf("produce %d B records to %d partition(s), acks=%d, compression %s", o.RecordBytes, o.Partitions, o.Acks, o.Compression))
		if o.Rate > 0 {
			what = append(what, fmt.Sprintf("at %.0f rec/s", o.Rate))
		}
	}
	if o.Consume {
		what = append(what, fmt.Sprintf("consume with fetches of up to %d B, %d B per partition", o.FetchMaxBytes, o.FetchPartitionBytes))
		if o.Rate > 0 {
			what = append(what, fmt.Sprintf("at %.0f rec/s", o.Rate))
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s; median of %d round(s)\n", strings.Join(what, ", "), o.Rounds)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/1e6)
}

func fmtDelta(d time.Duration) string {
	return fmt.Sprintf("%+.3fms", float64(d)/1e6)
}
