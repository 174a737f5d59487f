package check

import (
	"strings"
	"testing"
)

func TestLogOrder(t *testing.T) {
	all := func(n int) []bool {
		b := make([]bool, n)
		for i := range b {
			b[i] = true
		}
		return b
	}
	for _, tc := range []struct {
		values   []string
		expected []bool
		counts   map[string]int
		note     string
	}{
		{[]string{"0", "1", "2"}, all(3), nil, ""},
		{[]string{"0", "4", "1", "2", "3", "5"}, all(6), map[string]int{CountLogOutOfOrder: 3}, "records 1..3 landed after record 4 (offset 12)"},
		{[]string{"1", "0"}, all(2), map[string]int{CountLogOutOfOrder: 1}, "record 0 landed after record 1 (offset 11)"},
		{[]string{"3", "2", "0", "1"}, all(4), map[string]int{CountLogOutOfOrder: 3}, "records 0..2 landed after record 3"},
		{[]string{"1", "5", "0", "3", "2", "4"}, all(6), map[string]int{CountLogOutOfOrder: 4}, "4 records between 0 and 4 landed after record 5"},
		{[]string{"0", "2"}, all(3), map[string]int{CountLogMissing: 1}, "1 records missing"},
		{[]string{"0", "2"}, []bool{true, false, true}, nil, ""},
		{[]string{"0", "1", "1"}, all(2), map[string]int{CountLogDuplicated: 1}, "1 records in the log twice"},
	} {
		var e evidence
		e.logOrder(tc.values, 10, tc.expected)
		var p Property
		e.finish(&p)
		if len(p.Counts) != len(tc.counts) {
			t.Errorf("%v: counts %v, want %v", tc.values, p.Counts, tc.counts)
		}
		for k, v := range tc.counts {
			if p.Counts[k] != v {
				t.Errorf("%v: counts %v, want %v", tc.values, p.Counts, tc.counts)
			}
		}
		if tc.note != "" && !strings.Contains(p.Evidence, tc.note) {
			t.Errorf("%v: evidence %q lacks %q", tc.values, p.Evidence, tc.note)
		}
		if p.Holds != (tc.counts == nil) {
			t.Errorf("%v: holds %v", tc.values, p.Holds)
		}
	}
}

func TestAppendOrder(t *testing.T) {
	var e evidence
	e.appendOrder([]int64{0, 1, -1, 5, 3, 4, 6})
	if e.counts[CountAppendsOutOfOrder] != 1 || !strings.Contains(e.notes[0], "write 4 appended at offset 3, before write 3 at offset 5") {
		t.Fatalf("counts %v, notes %q", e.counts, e.notes)
	}
	e = evidence{}
	e.appendOrder([]int64{0, -1, 2, 7})
	if len(e.counts) != 0 {
		t.Fatalf("increasing offsets with a failed write: %v", e.counts)
	}
}
