package check

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// evidence gathers one property's violations by kind and a note on the
// first of each.
type evidence struct {
	counts map[string]int
	notes  []string
	good   []string // what held, said when nothing broke
}

func (e *evidence) violation(kind string, n int, note string) {
	if n == 0 {
		return
	}
	e.count(kind, n)
	e.notes = append(e.notes, note)
}

func (e *evidence) count(kind string, n int) {
	if n == 0 {
		return
	}
	if e.counts == nil {
		e.counts = make(map[string]int)
	}
	e.counts[kind] += n
}

func (e *evidence) held(note string) { e.good = append(e.good, note) }

// finish fills in p's verdict.
func (e *evidence) finish(p *Property) {
	p.Holds = len(e.counts) == 0
	p.Counts = e.counts
	if p.Holds {
		p.Evidence = strings.Join(e.good, "; ")
	} else {
		p.Evidence = strings.Join(e.notes, "; ")
	}
}

// responseOrder notes the responses that came back before the answer to an
// earlier request on the same connection.
func (e *evidence) responseOrder(res pipeprobe.PipelineResult, label func(seq int) string) {
	over := res.Overtakers()
	n := len(res.Exchanges)
	if len(over) == 0 {
		e.held(fmt.Sprintf("%d responses in request order", n))
		return
	}
	o := over[0]
	e.violation(CountResponsesOutOfOrder, len(over), fmt.Sprintf("%d of %d responses out of order (first: %s answered while %s was not)",
		len(over), n, label(o.Seq), label(o.Pending)))
}

// errorCodes notes the partition error codes of the answered requests,
// keyed by send position.
func (e *evidence) errorCodes(codes map[int]int16, label func(seq int) string) {
	var ooo, dup, other, first int
	firstSeq := -1
	for seq, code := range codes {
		if code == 0 {
			continue
		}
		switch code {
		case kerr.OutOfOrderSequenceNumber.Code:
			ooo++
		case kerr.DuplicateSequenceNumber.Code:
			dup++
		default:
			other++
		}
		if firstSeq < 0 || seq < firstSeq {
			firstSeq, first = seq, int(code)
		}
	}
	if firstSeq < 0 {
		return
	}
	name := kerr.ErrorForCode(int16(first)).Error()
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(int16(first)), &ke) {
		name = ke.Message
	}
	e.count(CountOutOfOrderSequence, ooo)
	e.count(CountDuplicateSequence, dup)
	e.count(CountErrors, other)
	var kinds []string
	for _, k := range []struct {
		n    int
		what string
	}{{ooo, "OUT_OF_ORDER_SEQUENCE_NUMBER"}, {dup, "DUPLICATE_SEQUENCE_NUMBER"}, {other, "other"}} {
		if k.n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", k.n, k.what))
		}
	}
	e.notes = append(e.notes, fmt.Sprintf("%d error responses: %s (first: %s on %s)", ooo+dup+other, strings.Join(kinds, ", "), name, label(firstSeq)))
}

// appendOrder notes base offsets that, taken in send order, fail to
// increase: the backend appended a later write before an earlier one.
// offsets are in send order; -1 marks a write that failed.
func (e *evidence) appendOrder(offsets []int64) {
	var (
		inverted  int
		note      string
		prev, pos = int64(-1), -1
	)
	for i, off := range offsets {
		if off < 0 {
			continue
		}
		if pos >= 0 && off <= prev {
			inverted++
			if note == "" {
				note = fmt.Sprintf("write %d appended at offset %d, before write %d at offset %d", i, off, pos, prev)
			}
		}
		prev, pos = off, i
	}
	if inverted == 0 {
		e.held("base offsets increase in send order")
		return
	}
	e.violation(CountAppendsOutOfOrder, inverted, fmt.Sprintf("%d writes appended out of send order (first: %s)", inverted, note))
}

// logOrder compares what a partition holds, from the run's start offset,
// with the writes expected there: every expected write i once, in
// increasing i. values are record values in log order, each the decimal
// send index of its write; start is the offset of values[0].
func (e *evidence) logOrder(values []string, start int64, expected []bool) {
	seen := make(map[int]int, len(values))
	var (
		late, dups, foreign int
		note                string
		maxSeen             = -1
	)
	for j := 0; j < len(values); j++ {
		v, err := strconv.Atoi(values[j])
		if err != nil || v < 0 || v >= len(expected) {
			foreign++
			continue
		}
		seen[v]++
		if seen[v] > 1 {
			dups++
			continue
		}
		if v < maxSeen {
			// A run of records that all landed after the same later one.
			lo, hi, k := v, v, j
			for k+1 < len(values) {
				w, err := strconv.Atoi(values[k+1])
				if err != nil || w < 0 || w >= maxSeen || seen[w] > 0 {
					break
				}
				k++
				seen[w]++
				lo, hi = min(lo, w), max(hi, w)
			}
			late += k - j + 1
			if note == "" {
				note = fmt.Sprintf("%s landed after record %d (offset %d)", span(lo, hi, k-j+1), maxSeen, start+int64(j))
			}
			j = k
			continue
		}
		maxSeen = v
	}
	missing := 0
	for i, ok := range expected {
		if ok && seen[i] == 0 {
			missing++
		}
	}
	e.violation(CountLogOutOfOrder, late, fmt.Sprintf("%d records out of send order in the log (first: %s)", late, note))
	e.violation(CountLogMissing, missing, fmt.Sprintf("%d records missing from the log", missing))
	e.violation(CountLogDuplicated, dups, fmt.Sprintf("%d records in the log twice", dups))
	if late+missing+dups == 0 {
		msg := fmt.Sprintf("%d records in send order at offsets %d..%d", len(values)-foreign, start, start+int64(len(values))-1)
		if len(values) == 0 {
			msg = "no records acknowledged"
		}
		e.held(msg)
	}
	if foreign > 0 {
		e.notes = append(e.notes, fmt.Sprintf("%d records not written by the check ignored", foreign))
	}
}

// span names a run of n records whose values lie in lo..hi.
func span(lo, hi, n int) string {
	switch {
	case n == 1:
		return fmt.Sprintf("record %d", lo)
	case hi-lo+1 == n:
		return fmt.Sprintf("records %d..%d", lo, hi)
	}
	return fmt.Sprintf("%d records between %d and %d", n, lo, hi)
}
