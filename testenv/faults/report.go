package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// measured names the tree the run measured: the commit, and "+ changes"
// when the work tree differs from it.
func measured(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git tree)"
	}
	c := strings.TrimSpace(string(out))
	// the suite's own outputs do not count as changes to what it measured
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--",
		".", ":!RELIABILITY.md", ":!testenv/faults/soak.svg").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " + uncommitted changes"
	}
	return c
}

func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func (r *runner) writeReport() error {
	var b strings.Builder
	o := r.opts
	passed, failed := r.count()
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Reliability under faults\n\n")
	w("Written by `testenv/faults` (do not edit by hand). Measured on commit `%s`, %s, in %s,\n",
		measured(o.root), r.started.UTC().Format("2006-01-02 15:04 MST"), time.Since(r.started).Round(time.Second))
	w("on a %d-core machine shared with other work, against Apache Kafka %s (three KRaft nodes on loopback, replication factor 3).\n\n", runtime.NumCPU(), kafkaVersion())
	w("**%d checks passed, %d failed.**\n\n", passed, failed)
	w("## What runs\n\n")
	w("`inorder serve` stands in front of the cluster in each ordering mode (`--upstream-ordering none` and\n")
	w("`connection`). Its upstream is a fault-injecting TCP relay of the project's own (`internal/hostile.Relay`)\n")
	w("in front of each broker: the brokers have a second listener that advertises the relay's address, so\n")
	w("every byte between proxy and brokers crosses a relay, and the proxy's node listeners map to it.\n")
	w("Each round creates fresh topics and runs, through the proxy, at %d records/s each:\n\n", o.rate)
	w("- **idempotent (kgo)**: franz-go, idempotent (5 produce requests in flight per broker, its default), records round robin over 6 partitions;\n")
	w("- **idempotent (java)**: Kafka's own `VerifiableProducer` (kafka-clients %s: idempotent, `acks=all`, 5 in flight), 6 partitions;\n", kafkaVersion())
	w("- **transactional (kgo)**: franz-go transactions of %d records over 3 partitions, every fifth aborted on purpose, with two `read_committed` consumers reading through the proxy meanwhile;\n", txnSize)
	w("- **consumer group (kgo, 3 members)**: a group reading 6 partitions fed by a franz-go idempotent producer; members commit after every poll and on revocation.\n\n")
	w("The clients' request timeout is %v. Each round: the workloads start, and once each has made progress, %v more of load,\n", requestTimeout, o.warm)
	w("the fault, %v more load, then the\n", o.after)
	w("producers stop and flush and the consumers catch up. The faults, one per round:\n\n")
	w("| fault | what happens |\n|---|---|\n")
	listed := map[string]bool{}
	for _, name := range append(slices.Clone(o.faults), o.single...) {
		if f, _ := faultByName(name); !listed[name] {
			listed[name] = true
			w("| `%s` | %s |\n", f.name, f.desc)
		}
	}
	if len(o.single) > 0 {
		w("\n%s ran once more in each mode with `inorder serve --topology single` (rows \"<mode>, single endpoint\"):\n", codeList(o.single))
		w("the proxy is the cluster's only broker at its one address, splits each request by leader or coordinator\n")
		w("over its own connections to the relays, and the franz-go clients' dialer refuses every address but that one.\n")
	}
	w("\n## Checks, from the data\n\n")
	w("After the load stops the suite reads every topic back **directly from the brokers** (not through the proxy):\n\n")
	w("- *lost*: records acknowledged to the producer and not in the log (for the group: offsets of the log never consumed by any member);\n")
	w("- *duplicated*: copies beyond the first of one sent record (for the group: records consumed again after a rebalance, which at-least-once delivery allows and which is not a failure);\n")
	w("- *reordered*: records behind a later-sent record of the same producer in their partition (for the group: offsets going back within one member's assignment of a partition);\n")
	w("- transactions: records of committed transactions exactly once, of aborted ones never, a transaction whose end failed all or nothing; the `read_committed` consumers saw every committed record once, in order, and nothing aborted;\n")
	w("- the group: each member's first record after an assignment is at the committed offset read at that moment (consumers resume from their commits); the group's commits, in the order the coordinator appended them to `__consumer_offsets` (read back directly), never move an offset back. The suite also reads the committed offsets from the brokers every 300 ms during the round; a read below an earlier read is reported in the details, not counted as a failure: the commit log is what was committed, and the consumers' resumes are checked separately;\n")
	w("- every client connected only through the proxy: the franz-go clients dial through a dialer that refuses any other address; the Java producer's connections are sampled with `ss` every 300 ms;\n")
	w("- *recovery*: the longest time without an acknowledgement (committed transaction, consumed record) from the fault's start to the end of the load;\n")
	w("- proxy resources: within 20 s of the clients closing, the proxy's open descriptors%s are back to its idle baseline.\n\n", goroutineClause(r))
	w("## Results\n\n")
	w("| fault | mode | workload | sent | acked | found | lost | duplicated | reordered | recovery | result |\n")
	w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	rows := r.rows
	if r.soak != nil {
		rows = append(rows, r.soak.rows...)
	}
	for _, row := range rows {
		if row.Workload == "proxy resources" || row.Workload == "round" || row.Workload == "soak" {
			continue
		}
		res := "pass"
		if row.Failed() {
			res = "**FAIL**"
		}
		dup := fmt.Sprint(row.Duplicated)
		if row.DupAllowed {
			dup += " (redelivered)"
		}
		w("| %s | %s | %s | %d | %d | %d | %d | %s | %d | %s | %s |\n", row.Fault, row.Mode, row.Workload,
			row.Sent, row.Acked, row.Found, row.Lost, dup, row.Reordered, dur(row.Recovery), res)
	}
	w("\n### Proxy resources after each round\n\n| fault | mode | result | figures |\n|---|---|---|---|\n")
	for _, row := range rows {
		if row.Workload != "proxy resources" {
			continue
		}
		res := "pass"
		if row.Failed() {
			res = "**FAIL**: " + strings.Join(row.Violations, "; ")
		}
		w("| %s | %s | %s | %s |\n", row.Fault, row.Mode, res, strings.Join(row.Notes, "; "))
	}
	w("\n### Details\n\n")
	for _, row := range rows {
		if len(row.Violations) == 0 && len(row.Notes) == 0 || row.Workload == "proxy resources" {
			continue
		}
		w("- %s / %s / %s:", row.Fault, row.Mode, row.Workload)
		for _, v := range row.Violations {
			w(" **%s**;", v)
		}
		w(" %s\n", strings.Join(row.Notes, "; "))
	}
	if s := r.soak; s != nil {
		w("\n## Soak\n\n")
		w("The same workloads for %v at the same rate through `--upstream-ordering none`, with a fault every %v\n", s.duration, o.soakEvery)
		w("(%s), sampling the proxy's resident memory, threads and open descriptors%s every 2 s.\n", strings.Join(s.faults, ", "), goroutineClause(r))
		w("The soak rows in the table above check the data of the whole stretch (their recovery is the longest stall).\n\n")
		if s.svg != "" {
			w("![proxy resources during the soak](%s)\n\n", s.svg)
		}
		if n := len(s.samples); n > 0 {
			first, last := s.samples[0], s.samples[n-1]
			var peak Usage
			for _, u := range s.samples {
				peak.RSSKiB = max(peak.RSSKiB, u.RSSKiB)
				peak.FDs = max(peak.FDs, u.FDs)
				peak.Threads = max(peak.Threads, u.Threads)
				peak.Goroutines = max(peak.Goroutines, u.Goroutines)
			}
			w("First sample: %s. Peak: %s. Last (idle, after the load): %s.\n\n", first, peak, last)
		}
	}
	w("## How to run it\n\n")
	w("Needs Java 17 and Maven (testenv/kafka installs Kafka); uses ports 29092-29094, 29192-29194, 29292-29294,\n")
	w("29392-29394 and %d-%d on loopback, and stops everything it started, also when a check fails.\n\n", proxyPort, proxyPort+90)
	w("    bash testenv/faults/run.sh                                   # every fault in both modes and a 2 min soak; rewrites this page\n")
	w("    FAULTS_TIMEOUT=4500 bash testenv/faults/run.sh -soak 1h -faults none -modes none   # the hour-long soak\n")
	w("    bash testenv/faults/run.sh -faults broker-kill,proxy-kill -modes connection -soak 0\n")
	w("    bash testenv/faults/run.sh -faults none -single broker-kill -soak 0   # a broker killed behind the single endpoint\n\n")
	w("Flags: `-faults`, `-single` (faults run again with `--topology single`), `-modes`, `-rate` (records/s per producer), `-warm`, `-after`, `-soak`, `-soak-fault-every`,\n")
	w("`-kafka-run-dir`, `-out` and `-plot` (where the report and the soak plot go; CI writes both to the untracked\n")
	w("`testenv/faults/results/`, so only a deliberate run changes this page). Logs (proxy, Java producer) land in\n")
	w("`testenv/faults/results/`.\n")
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(o.root, out)
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// codeList writes names as `a`, `b` and `c`.
func codeList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func goroutineClause(r *runner) string {
	switch {
	case r.proxy == nil || r.proxy.admin == "":
		return ""
	case r.proxy.pprof:
		return " and goroutines (from the admin endpoint's goroutine profile, `--admin-pprof`)"
	default:
		return " and goroutines (from the admin endpoint's `/metrics`)"
	}
}

func kafkaVersion() string {
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		return v
	}
	return "4.1.1"
}

// plotSVG draws the soak's samples: resident memory, descriptors and,
// when known, goroutines over time, each scaled to its own maximum, with
// the end of the load marked.
func plotSVG(samples []Usage, start, loadEnd time.Time) string {
	const W, H, L, R, T, B = 720, 300, 60, 20, 30, 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	if len(samples) < 2 {
		b.WriteString(`<text x="20" y="40">too few samples</text></svg>`)
		return b.String()
	}
	span := samples[len(samples)-1].At.Sub(start).Seconds()
	x := func(t time.Time) float64 { return L + (W-L-R)*t.Sub(start).Seconds()/span }
	type series struct {
		name, color string
		v           func(Usage) float64
		unit        string
	}
	all := []series{
		{"RSS", "#1f77b4", func(u Usage) float64 { return float64(u.RSSKiB) / 1024 }, "MiB"},
		{"open fds", "#d62728", func(u Usage) float64 { return float64(u.FDs) }, ""},
		{"threads", "#7f7f7f", func(u Usage) float64 { return float64(u.Threads) }, ""},
	}
	if samples[0].Goroutines >= 0 {
		all = append(all, series{"goroutines", "#2ca02c", func(u Usage) float64 { return float64(u.Goroutines) }, ""})
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", L, T, L, H-B)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds since the soak started (each line scaled to its own peak)</text>`+"\n", (W+L)/2, H-8)
	for _, s := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%.0f</text>`+"\n", L+(W-L-R)*s, H-B+15, span*s)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">peak</text><text x="%d" y="%d" text-anchor="end">0</text>`+"\n", L-5, T+4, L-5, H-B)
	le := x(loadEnd)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/><text x="%.1f" y="%d">load stops</text>`+"\n", le, T, le, H-B, le+3, T+12)
	for i, s := range all {
		peak := 0.0
		for _, u := range samples {
			peak = max(peak, s.v(u))
		}
		if peak == 0 {
			peak = 1
		}
		var pts []string
		for _, u := range samples {
			y := float64(H-B) - float64(H-B-T)*s.v(u)/peak
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(u.At), y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		label := fmt.Sprintf("%s (peak %.0f%s)", s.name, peak, map[bool]string{true: " " + s.unit, false: ""}[s.unit != ""])
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", L+10+i*165, 18, s.color, label)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
