package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// report builds a report whose targets table holds the given rows.
func report(rows ...string) string {
	return "# Benchmarks\n\n## Targets\n\n| target | measured | goal | the twin, same rounds |\n| --- | --- | --- | --- |\n" +
		strings.Join(rows, "\n") + "\n\n## Produce\n\n| path | x |\n| --- | --- |\n| a | ≥ 1 | 1 | 1 |\n"
}

func mustParse(t *testing.T, s string) []row {
	t.Helper()
	rows, err := parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func verdicts(t *testing.T, reports ...string) map[string]verdict {
	t.Helper()
	var runs [][]row
	for _, r := range reports {
		runs = append(runs, mustParse(t, r))
	}
	out := map[string]verdict{}
	for _, v := range judge(runs) {
		out[v.text] = v
	}
	return out
}

func TestVerdictAgainstTheTwinsGap(t *testing.T) {
	vs := verdicts(t, report(
		"| clear, ×relay | 1.02 | ≥ 0.95 | 1.00 |",
		"| short, ×relay | 0.85 | ≥ 0.95 | 0.87 |",
		"| inside the gap, ×relay | 0.93 | ≥ 0.95 | 0.99 |",
		"| cpu, CPU per GB ×relay | 1.30 (per round: median 1.2, IQR 1.1–1.4) | ≤ 1.20 | 1.25 (per round: median 1.2, IQR 1.0–1.3) |",
		"| cpu near, CPU per GB ×relay | 1.22 | ≤ 1.20 | 1.10 |",
		"| beside, CPU per GB ×relay | 1.5 | (beside the goal above) | 1.1 |",
	))
	want := map[string]string{
		"clear, ×relay":               "met",
		"short, ×relay":               "**missed**",
		"inside the gap, ×relay":      "not resolved",
		"cpu, CPU per GB ×relay":      "**missed**",
		"cpu near, CPU per GB ×relay": "not resolved",
	}
	if len(vs) != len(want) {
		t.Fatalf("judged %d goals, want %d: %v", len(vs), len(want), vs)
	}
	for text, w := range want {
		if got := vs[text].result; got != w {
			t.Errorf("%s: %s, want %s (median %v, gap %v)", text, got, w, vs[text].median, vs[text].gap)
		}
	}
}

func TestRowsWithoutTwinBorrowTheirKindsWidestGap(t *testing.T) {
	rows := mustParse(t, report(
		"| a, ×relay | 1.00 | ≥ 0.95 | 0.96 |",
		"| b, ×relay | 1.00 | ≥ 0.95 | 0.90 |",
		"| c, CPU per GB ×relay | 1.00 | ≤ 1.20 | 1.02 |",
		"| no twin, ×relay | 0.93 | ≥ 0.90 | |",
		"| no twin, CPU per GB ×relay | 1.15 | ≤ 1.20 | |",
		"| memory, two modes | 18.2 MiB, 40.5 MiB | ≤ 96 MiB | ? MiB |",
	))
	gaps := map[string]float64{}
	for _, r := range rows {
		gaps[r.text] = r.gap
	}
	for text, want := range map[string]float64{
		"no twin, ×relay":            0.10,
		"no twin, CPU per GB ×relay": 0.02,
		"memory, two modes":          0,
	} {
		if math.Abs(gaps[text]-want) > 1e-9 {
			t.Errorf("%s: gap %v, want %v", text, gaps[text], want)
		}
	}
	for _, r := range rows {
		if r.text == "memory, two modes" && r.value != 40.5 {
			t.Errorf("a cell with a figure per mode is judged by its worst, got %v", r.value)
		}
	}
}

func TestMedianOverRuns(t *testing.T) {
	row := func(v string) string { return report("| t, ×relay | " + v + " | ≥ 0.95 | 0.97 |") }
	// Medians: figure 0.99 (of 0.80, 0.99, 1.00), gap 0.03 (of 0.17, 0.02, 0.03), margin 0.04.
	vs := verdicts(t, row("0.80"), row("0.99"), row("1.00"))
	v := vs["t, ×relay"]
	if v.median != 0.99 || math.Abs(v.gap-0.03) > 1e-9 || v.result != "met" {
		t.Errorf("median %v gap %v %s, want 0.99, 0.03, met", v.median, v.gap, v.result)
	}
}

func TestGoalsThatDifferByRun(t *testing.T) {
	p99 := func(conn, spread, twin string) string {
		return report("| p99, vs relay (spread: 1.9ms) | " + conn + " | ≤ +" + spread + " (the twin's p99 spread) | " + twin + " |")
	}
	// Margins 1.8, -0.2 and 0.6 ms: median 0.6, beyond the median gap of
	// 0.3 (of 0.3, 0.1 and 0.7).
	met := verdicts(t, p99("+0.2ms", "2.0ms", "+0.5ms"), p99("+0.4ms", "0.2ms", "+0.3ms"), p99("+0.9ms", "1.5ms", "+0.2ms"))
	if v := met["p99, vs relay (spread: 1.9ms)"]; len(met) != 1 || v.result != "met" {
		t.Errorf("got %v, want one goal, met", met)
	} else if !strings.HasSuffix(v.goal, "; per run: 2, 0.2, 1.5") {
		t.Errorf("goal %q does not give each run's number", v.goal)
	}
	missed := verdicts(t, p99("+3.0ms", "2.0ms", "+2.9ms"), p99("+0.4ms", "0.2ms", "+0.3ms"), p99("+0.9ms", "1.5ms", "+1.0ms"))
	if v := missed["p99, vs relay (spread: 1.9ms)"]; v.result != "**missed**" {
		t.Errorf("got %s, want missed (median margin -0.2, gap 0.1)", v.result)
	}
}

func TestNoTargetsTable(t *testing.T) {
	if _, err := parse(strings.NewReader("# Benchmarks\n\nnothing\n")); !errors.Is(err, errNoTargets) {
		t.Fatalf("got %v, want errNoTargets", err)
	}
}
