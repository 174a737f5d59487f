package main

import (
	"fmt"
	"sort"
	"time"
)

// Ack is a record its producer saw acknowledged: the sequence number the
// producer gave it (its send order) and the partition it went to.
type Ack struct {
	Partition int32
	Seq       int64
	At        time.Time
}

// Found is a record of one producer read back from the log.
type Found struct {
	Partition int32
	Offset    int64
	Seq       int64
}

// Tally is what one workload's checks found in one round: a row of the
// table in RELIABILITY.md.
type Tally struct {
	Sent       int64
	Acked      int64
	Found      int64 // distinct records of the workload in the log (or, for a group, consumed)
	Lost       int64 // acknowledged, not found
	Duplicated int64 // copies beyond the first
	Reordered  int64 // records behind a later-sent record of the same producer in their partition
	// DupAllowed says duplicates are not a failure: a consumer group
	// delivers at least once, so records consumed after the last commit
	// are consumed again.
	DupAllowed bool
	Recovery   time.Duration
	// LastProgress is the last acknowledgement (committed transaction,
	// consumed record): a workload that made none after the fault ended
	// never recovered, whatever else its log shows.
	LastProgress time.Time
	Violations   []string // any other broken invariant, one line each
	Notes        []string // facts that are not failures
}

// Failed says whether the tally breaks a guarantee.
func (t Tally) Failed() bool {
	return t.Lost > 0 || t.Reordered > 0 || (!t.DupAllowed && t.Duplicated > 0) || len(t.Violations) > 0
}

// violate records a broken invariant; more than a few of one kind are
// summarised by the caller.
func (t *Tally) violate(format string, args ...any) {
	t.Violations = append(t.Violations, fmt.Sprintf(format, args...))
}

// CheckProducer compares what a producer sent and saw acknowledged with
// the producer's records in the log, read in offset order per partition:
// every acknowledged record must be there exactly once, in its partition,
// and within a partition the sequence numbers must increase with the
// offset (send order is log order).
func CheckProducer(sent int64, acks []Ack, log []Found) Tally {
	t := Tally{Sent: sent, Acked: int64(len(acks))}
	count := make(map[int64]int, len(log))
	where := make(map[int64]int32, len(log))
	byPart := make(map[int32][]Found)
	for _, f := range log {
		count[f.Seq]++
		where[f.Seq] = f.Partition
		byPart[f.Partition] = append(byPart[f.Partition], f)
	}
	t.Found = int64(len(count))
	for _, n := range count {
		t.Duplicated += int64(n - 1)
	}
	misplaced := 0
	for _, a := range acks {
		p, ok := where[a.Seq]
		if !ok {
			t.Lost++
			continue
		}
		if p != a.Partition {
			misplaced++
		}
	}
	if misplaced > 0 {
		t.violate("%d acknowledged records are in another partition than their acknowledgement said", misplaced)
	}
	t.Reordered = countReordered(byPart)
	return t
}

// countReordered counts, per partition in offset order, the records whose
// sequence number is below one already seen there.
func countReordered(byPart map[int32][]Found) int64 {
	var n int64
	for _, recs := range byPart {
		sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		maxSeq := int64(-1)
		for _, r := range recs {
			if r.Seq < maxSeq {
				n++
				continue
			}
			maxSeq = r.Seq
		}
	}
	return n
}

// TxnOutcome is what the producer learned of a transaction's end.
type TxnOutcome int

const (
	// TxnCommitted: EndTransaction(commit) succeeded.
	TxnCommitted TxnOutcome = iota + 1
	// TxnAborted: aborted on purpose or after a failed send, and the abort succeeded.
	TxnAborted
	// TxnUnknown: the end failed; Kafka either committed all of it or none.
	TxnUnknown
)

// Txn is one transaction: the sequence numbers it wrote and its outcome.
type Txn struct {
	Recs    []Ack
	Outcome TxnOutcome
	EndedAt time.Time
}

// CheckTxn compares the transactions with the topic read with
// read_committed: committed records exactly once and in order, aborted
// records never, a transaction of unknown outcome all or nothing.
// Sent counts every record of every transaction, Acked those of the
// committed ones.
func CheckTxn(txns []Txn, log []Found) Tally {
	var t Tally
	count := make(map[int64]int, len(log))
	byPart := make(map[int32][]Found)
	for _, f := range log {
		count[f.Seq]++
		byPart[f.Partition] = append(byPart[f.Partition], f)
	}
	t.Found = int64(len(count))
	for _, n := range count {
		t.Duplicated += int64(n - 1)
	}
	var abortedSeen, partial, unknown int
	for _, x := range txns {
		t.Sent += int64(len(x.Recs))
		seen := 0
		for _, r := range x.Recs {
			if count[r.Seq] > 0 {
				seen++
			}
		}
		switch x.Outcome {
		case TxnCommitted:
			t.Acked += int64(len(x.Recs))
			t.Lost += int64(len(x.Recs) - seen)
		case TxnAborted:
			abortedSeen += seen
		case TxnUnknown:
			unknown++
			if seen != 0 && seen != len(x.Recs) {
				partial++
			}
		}
	}
	if abortedSeen > 0 {
		t.violate("%d records of aborted transactions visible to read_committed", abortedSeen)
	}
	if partial > 0 {
		t.violate("%d transactions of unknown outcome are partly visible", partial)
	}
	if unknown > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d transactions ended with an error; each is all or nothing", unknown))
	}
	t.Reordered = countReordered(byPart)
	return t
}

// CheckView checks what a read_committed consumer saw through the proxy
// against the committed records: each exactly once and, per partition, in
// send order; nothing of an aborted transaction.
func CheckView(name string, txns []Txn, view []Found, t *Tally) {
	count := make(map[int64]int, len(view))
	byPart := make(map[int32][]Found)
	for _, f := range view {
		count[f.Seq]++
		byPart[f.Partition] = append(byPart[f.Partition], f)
	}
	var missing, aborted, dups int
	for _, x := range txns {
		for _, r := range x.Recs {
			switch {
			case x.Outcome == TxnCommitted && count[r.Seq] == 0:
				missing++
			case x.Outcome == TxnAborted && count[r.Seq] > 0:
				aborted++
			}
		}
	}
	for _, n := range count {
		dups += n - 1
	}
	if missing > 0 {
		t.violate("%s: %d committed records never delivered", name, missing)
	}
	if aborted > 0 {
		t.violate("%s: %d aborted records delivered", name, aborted)
	}
	if dups > 0 {
		t.violate("%s: %d records delivered twice", name, dups)
	}
	if r := countReordered(byPart); r > 0 {
		t.violate("%s: %d records delivered out of order", name, r)
	}
}

// Consumed is one record a group member got from a poll.
type Consumed struct {
	Member    int
	Epoch     int // the member's assignment of the partition it came in
	Partition int32
	Offset    int64
	At        time.Time
}

// Resume is the first record a member consumed from a partition after it
// was assigned, against the group's committed offset read at assignment.
type Resume struct {
	Member    int
	Partition int32
	Committed int64 // -1: nothing committed, the member starts at the log start
	First     int64
}

// CommitSample is the group's committed offset of a partition at a moment.
type CommitSample struct {
	Partition int32
	Offset    int64
	At        time.Time
}

// CheckGroup checks a consumer group against the log of its topic (every
// offset of every partition, from its start): every record consumed at
// least once (lost otherwise), each member's records of one assignment in
// offset order, every assignment resumed exactly at the committed offset,
// and the committed offsets, in the order the coordinator logged them,
// never moving backwards. Records consumed more than once are counted as
// duplicated but allowed.
func CheckGroup(ends map[int32]int64, consumed []Consumed, resumes []Resume, commits []CommitSample) Tally {
	t := Tally{DupAllowed: true}
	type po struct {
		p int32
		o int64
	}
	seen := make(map[po]int, len(consumed))
	type me struct {
		m, e int
		p    int32
	}
	last := make(map[me]int64)
	for _, c := range consumed {
		seen[po{c.Partition, c.Offset}]++
		k := me{c.Member, c.Epoch, c.Partition}
		if prev, ok := last[k]; ok && c.Offset <= prev {
			t.Reordered++
		}
		last[k] = c.Offset
	}
	for _, n := range seen {
		t.Duplicated += int64(n - 1)
	}
	t.Found = int64(len(seen))
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			if seen[po{p, o}] == 0 {
				t.Lost++
			}
		}
	}
	bad := 0
	for _, r := range resumes {
		want := max(r.Committed, 0)
		if r.First != want {
			bad++
			if bad <= 3 {
				t.violate("member %d resumed partition %d at offset %d, committed %d", r.Member, r.Partition, r.First, r.Committed)
			}
		}
	}
	if bad > 3 {
		t.violate("%d resumes in all away from the committed offset", bad)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d resumes checked against commits", len(resumes)))
	high := make(map[int32]int64)
	back := 0
	for _, s := range commits {
		if h, ok := high[s.Partition]; ok && s.Offset < h {
			back++
			if back <= 3 {
				t.violate("committed offset of partition %d moved back from %d to %d at %s", s.Partition, h, s.Offset, s.At.Format("15:04:05.000"))
			}
			continue
		}
		high[s.Partition] = s.Offset
	}
	if back > 3 {
		t.violate("committed offsets moved back %d times in all", back)
	}
	return t
}

// CheckProgress fails t if the workload made no progress after the fault
// ended.
func CheckProgress(t *Tally, faultEnd time.Time) {
	if t.LastProgress.Before(faultEnd) {
		t.violate("no progress after the fault ended (last at %s)", stamp(t.LastProgress))
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.000")
}

// Latest is the latest of events.
func Latest(events []time.Time) time.Time {
	var l time.Time
	for _, e := range events {
		if e.After(l) {
			l = e
		}
	}
	return l
}

// Backwards counts the samples below an earlier sample of their partition.
func Backwards(samples []CommitSample) int {
	high := make(map[int32]int64)
	n := 0
	for _, s := range samples {
		if h, ok := high[s.Partition]; ok && s.Offset < h {
			n++
			continue
		}
		high[s.Partition] = s.Offset
	}
	return n
}

// Recovery is the longest stretch without progress (an acknowledgement, a
// committed transaction, a consumed record) from the fault's start to the
// end of the round: how long the clients needed to get going again.
func Recovery(events []time.Time, from, to time.Time) time.Duration {
	ts := make([]time.Time, 0, len(events))
	for _, e := range events {
		if !e.Before(from) && !e.After(to) {
			ts = append(ts, e)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	prev, worst := from, time.Duration(0)
	for _, e := range ts {
		worst = max(worst, e.Sub(prev))
		prev = e
	}
	return max(worst, to.Sub(prev))
}
