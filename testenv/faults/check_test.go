package main

import (
	"testing"
	"time"
)

func acks(part int32, seqs ...int64) []Ack {
	out := make([]Ack, len(seqs))
	for i, s := range seqs {
		out[i] = Ack{Partition: part, Seq: s}
	}
	return out
}

func logOf(part int32, seqs ...int64) []Found {
	out := make([]Found, len(seqs))
	for i, s := range seqs {
		out[i] = Found{Partition: part, Offset: int64(i), Seq: s}
	}
	return out
}

func TestCheckProducer(t *testing.T) {
	for _, tc := range []struct {
		name               string
		acked              []Ack
		log                []Found
		lost, dup, reorder int64
		violations         int
	}{
		{"clean", acks(0, 0, 1, 2), logOf(0, 0, 1, 2), 0, 0, 0, 0},
		{"unacked extra is fine", acks(0, 0, 1), logOf(0, 0, 1, 2), 0, 0, 0, 0},
		{"lost", acks(0, 0, 1, 2), logOf(0, 0, 2), 1, 0, 0, 0},
		{"duplicated", acks(0, 0, 1, 2), logOf(0, 0, 1, 1, 2), 0, 1, 0, 0},
		{"reordered", acks(0, 0, 1, 2, 3), logOf(0, 0, 2, 1, 3), 0, 0, 1, 0},
		{"misplaced", acks(1, 0), logOf(0, 0), 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckProducer(int64(len(tc.acked)), tc.acked, tc.log)
			if got.Lost != tc.lost || got.Duplicated != tc.dup || got.Reordered != tc.reorder || len(got.Violations) != tc.violations {
				t.Fatalf("got lost %d dup %d reordered %d violations %v; want %d %d %d and %d violations",
					got.Lost, got.Duplicated, got.Reordered, got.Violations, tc.lost, tc.dup, tc.reorder, tc.violations)
			}
			if got.Failed() != (tc.lost+tc.dup+tc.reorder+int64(tc.violations) > 0) {
				t.Fatalf("Failed() = %v for %+v", got.Failed(), got)
			}
		})
	}
}

func TestCheckTxn(t *testing.T) {
	txns := []Txn{
		{Recs: acks(0, 0, 1), Outcome: TxnCommitted},
		{Recs: acks(0, 2, 3), Outcome: TxnAborted},
		{Recs: acks(0, 4, 5), Outcome: TxnUnknown},
	}
	if got := CheckTxn(txns, logOf(0, 0, 1, 4, 5)); got.Failed() || got.Acked != 2 || got.Sent != 6 {
		t.Fatalf("clean log: %+v", got)
	}
	if got := CheckTxn(txns, logOf(0, 0, 1)); got.Failed() {
		t.Fatalf("an unknown transaction that is absent failed: %+v", got)
	}
	if got := CheckTxn(txns, logOf(0, 0, 1, 2)); len(got.Violations) != 1 {
		t.Fatalf("an aborted record visible: %+v", got)
	}
	if got := CheckTxn(txns, logOf(0, 0, 1, 4)); len(got.Violations) != 1 {
		t.Fatalf("half an unknown transaction visible: %+v", got)
	}
	if got := CheckTxn(txns, logOf(0, 1)); got.Lost != 1 {
		t.Fatalf("a committed record missing: %+v", got)
	}
	var tl Tally
	CheckView("c", txns, logOf(0, 1, 0, 0, 2), &tl)
	if len(tl.Violations) != 3 {
		t.Fatalf("a view with an aborted record, a duplicate and a reorder: %v", tl.Violations)
	}
	tl = Tally{}
	CheckView("c", txns, logOf(0, 0, 1), &tl)
	if len(tl.Violations) != 0 {
		t.Fatalf("a clean view: %v", tl.Violations)
	}
}

func TestCheckGroup(t *testing.T) {
	ends := map[int32]int64{0: 3}
	clean := []Consumed{{0, 1, 0, 0, time.Time{}}, {0, 1, 0, 1, time.Time{}}, {1, 1, 0, 1, time.Time{}}, {1, 1, 0, 2, time.Time{}}}
	res := []Resume{{0, 0, -1, 0}, {1, 0, 1, 1}}
	commits := []CommitSample{{0, 1, time.Time{}}, {0, 3, time.Time{}}}
	got := CheckGroup(ends, clean, res, commits)
	if got.Failed() || got.Duplicated != 1 || got.Found != 3 {
		t.Fatalf("clean group with one redelivery: %+v", got)
	}
	if got := CheckGroup(map[int32]int64{0: 4}, clean, res, commits); got.Lost != 1 {
		t.Fatalf("an offset never consumed: %+v", got)
	}
	if got := CheckGroup(ends, clean, []Resume{{1, 0, 2, 1}}, commits); len(got.Violations) != 1 {
		t.Fatalf("a resume behind the commit: %+v", got)
	}
	back := append(commits, CommitSample{0, 2, time.Time{}})
	if got := CheckGroup(ends, clean, res, back); len(got.Violations) != 1 {
		t.Fatalf("a commit moving back: %+v", got)
	}
	if n := Backwards(back); n != 1 {
		t.Fatalf("Backwards = %d, want 1", n)
	}
	rev := []Consumed{{0, 1, 0, 1, time.Time{}}, {0, 1, 0, 0, time.Time{}}, {0, 1, 0, 2, time.Time{}}}
	if got := CheckGroup(ends, rev, nil, nil); got.Reordered != 1 {
		t.Fatalf("offsets backwards within one assignment: %+v", got)
	}
}

func TestRecovery(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ev := []time.Time{at(-5), at(0.5), at(1), at(7), at(8), at(20)}
	if got := Recovery(ev, t0, at(9)); got != 6*time.Second {
		t.Fatalf("Recovery = %v, want the 6 s gap", got)
	}
	if got := Recovery(nil, t0, at(3)); got != 3*time.Second {
		t.Fatalf("no progress at all: %v, want the whole 3 s", got)
	}
}

func TestCheckProgress(t *testing.T) {
	end := time.Unix(100, 0)
	var tl Tally
	tl.LastProgress = Latest([]time.Time{end.Add(-time.Second), end.Add(time.Second)})
	CheckProgress(&tl, end)
	if tl.Failed() {
		t.Fatalf("progress after the fault failed: %v", tl.Violations)
	}
	tl = Tally{LastProgress: Latest([]time.Time{end.Add(-time.Second)})}
	CheckProgress(&tl, end)
	if !tl.Failed() {
		t.Fatal("no progress after the fault passed")
	}
	tl = Tally{}
	CheckProgress(&tl, end)
	if !tl.Failed() {
		t.Fatal("no progress at all passed")
	}
}
