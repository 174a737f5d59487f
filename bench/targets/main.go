// Command targets judges the performance goals of one or more reports
// written by bench/run.sh.
//
//	go run ./bench/targets run1.md run2.md run3.md
//
// Each report's "## Targets" table gives, per goal, the figure measured
// and, where the workload ran a second identical inorder process (the
// twin), the twin's reading of the same figure in the same rounds. How far
// apart the two land is the A/A gap: the noise of that run. A goal is met
// when the median of the figure over the reports clears the goal by more
// than the median A/A gap, missed when it falls short by more than it, and
// otherwise not resolved: the difference from the goal is inside what two
// identical processes differ by.
//
// A goal whose row has no twin reading borrows the widest gap of the rows
// of its kind (throughput, CPU, latency, memory) in the same report. A
// goal's number may differ from report to report (p99 at half load is held
// to the twin's p99 spread in that run): what is judged is the median over
// the reports of how far each figure lies on its goal's side.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: targets report.md [report.md ...]")
		os.Exit(2)
	}
	var runs [][]row
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		rows, err := parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
		runs = append(runs, rows)
	}
	write(os.Stdout, judge(runs), len(runs))
}

// errNoTargets reports a file without a targets table.
var errNoTargets = errors.New("no \"## Targets\" table")

// row is one goal of one report.
type row struct {
	key     string  // the target's text with its run-dependent numbers masked
	text    string  // the target's text as written
	goal    string  // the goal as written, "≥ 0.95"
	atLeast bool    // the figure must be at least the goal (else at most)
	limit   float64 // the goal's number
	value   float64 // the figure measured
	twin    float64 // the twin's reading; NaN without one
	gap     float64 // the A/A gap for this row: |value - twin|, or borrowed
}

// margin is how far the figure lies on the goal's good side.
func (g row) margin() float64 {
	if g.atLeast {
		return g.value - g.limit
	}
	return g.limit - g.value
}

var (
	goalRE   = regexp.MustCompile(`^(≥|≤)\s*\+?(-?[0-9]+(?:\.[0-9]+)?)`)
	numberRE = regexp.MustCompile(`[-+]?[0-9]+(?:\.[0-9]+)?`)
	maskRE   = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)?`)
)

// parse reads the goals of one report: the rows of its targets table
// whose goal column starts with ≥ or ≤.
func parse(r io.Reader) ([]row, error) {
	var rows []row
	in := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == "## Targets"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := goalRE.FindStringSubmatch(cells[2])
		if m == nil {
			continue
		}
		g := row{
			key:     maskRE.ReplaceAllString(cells[0], "#"),
			text:    cells[0],
			goal:    cells[2],
			atLeast: m[1] == "≥",
			twin:    math.NaN(),
		}
		g.limit, _ = strconv.ParseFloat(m[2], 64)
		v, ok := figure(cells[1], g.atLeast)
		if !ok {
			continue
		}
		g.value = v
		if t, ok := figure(cells[len(cells)-1], g.atLeast); ok {
			g.twin = t
		}
		rows = append(rows, g)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !in {
		return nil, errNoTargets
	}
	borrowGaps(rows)
	return rows, nil
}

// figure reads a cell's figure: its numbers before any parenthesis, the
// worst of them where a cell gives several (one per ordering mode).
func figure(cell string, atLeast bool) (float64, bool) {
	if i := strings.Index(cell, "("); i >= 0 {
		cell = cell[:i]
	}
	var vs []float64
	for _, s := range numberRE.FindAllString(cell, -1) {
		v, err := strconv.ParseFloat(s, 64)
		if err == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	if atLeast {
		return slices.Min(vs), true
	}
	return slices.Max(vs), true
}

// kind sorts a goal into the class whose A/A gaps it may borrow.
func kind(g row) string {
	switch {
	case strings.Contains(g.goal, "ms"):
		return "latency"
	case strings.Contains(g.goal, "MiB"):
		return "memory"
	case strings.Contains(g.text, "CPU"):
		return "cpu"
	}
	return "throughput"
}

// borrowGaps sets every row's gap: its own where it has a twin, else the
// widest of its kind in the same report, else zero.
func borrowGaps(rows []row) {
	widest := map[string]float64{}
	for i := range rows {
		if !math.IsNaN(rows[i].twin) {
			rows[i].gap = math.Abs(rows[i].value - rows[i].twin)
			k := kind(rows[i])
			widest[k] = math.Max(widest[k], rows[i].gap)
		}
	}
	for i := range rows {
		if math.IsNaN(rows[i].twin) {
			rows[i].gap = widest[kind(rows[i])]
		}
	}
}

// verdict is one goal judged over every report.
type verdict struct {
	text    string
	goal    string
	values  []float64 // per report, NaN where that report lacks the row
	limits  []float64 // the goal's number per report, NaN likewise
	present []float64 // the figures of the reports that have the row
	margins []float64 // for each of them, how far on the goal's good side
	gaps    []float64 // for each of them, the A/A gap
	median  float64
	gap     float64
	result  string
}

func judge(runs [][]row) []verdict {
	var order []string
	byKey := map[string]*verdict{}
	for r, rows := range runs {
		for _, g := range rows {
			v := byKey[g.key]
			if v == nil {
				v = &verdict{text: g.text, goal: g.goal, values: nanSlice(len(runs)), limits: nanSlice(len(runs))}
				byKey[g.key] = v
				order = append(order, g.key)
			}
			v.values[r] = g.value
			v.limits[r] = g.limit
			v.present = append(v.present, g.value)
			v.margins = append(v.margins, g.margin())
			v.gaps = append(v.gaps, g.gap)
		}
	}
	out := make([]verdict, 0, len(order))
	for _, k := range order {
		v := byKey[k]
		v.median = median(v.present)
		v.gap = median(v.gaps)
		if differ(v.limits) {
			v.goal += "; per run: " + nums(v.limits)
		}
		margin := median(v.margins)
		switch {
		case margin > v.gap, margin == 0 && v.gap == 0:
			v.result = "met"
		case -margin > v.gap:
			v.result = "**missed**"
		default:
			v.result = "not resolved"
		}
		out = append(out, *v)
	}
	return out
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func write(w io.Writer, vs []verdict, runs int) {
	fmt.Fprintf(w, "| target | goal | per run | median of %d | A/A gap | verdict |\n", runs)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, v := range vs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n",
			v.text, v.goal, nums(v.values), num(v.median), num(v.gap), v.result)
	}
}

// differ reports whether the numbers present are not all the same.
func differ(xs []float64) bool {
	first := math.NaN()
	for _, x := range xs {
		switch {
		case math.IsNaN(x):
		case math.IsNaN(first):
			first = x
		case x != first:
			return true
		}
	}
	return false
}

func nums(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = num(x)
	}
	return strings.Join(s, ", ")
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	s := strconv.FormatFloat(x, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}
