package bench

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histSubBits sets the precision of Hist: 2^histSubBits buckets per power of
// two keep every recorded value within 1/128 (0.8%) of its bucket's floor.
const (
	histSubBits  = 7
	histSub      = 1 << histSubBits
	histMaxShift = 40 // 2^47 ns is about 39 hours, far beyond any latency
	histBuckets  = (histMaxShift + 2) * histSub
)

// Hist is a log-linear latency histogram that many goroutines may record
// into at once without a lock: produce promises complete on kgo's goroutines
// and a mutex there would sit on the path being measured.
type Hist struct {
	counts [histBuckets]atomic.Uint64
	total  atomic.Uint64
	max    atomic.Int64
}

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	if shift > histMaxShift {
		return histBuckets - 1
	}
	return (shift+1)*histSub + int(v>>uint(shift)) - histSub
}

func histFloor(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	shift := i/histSub - 1
	return uint64(histSub+i%histSub) << uint(shift)
}

// Record adds one observation; negative durations count as zero.
func (h *Hist) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Count is the number of observations.
func (h *Hist) Count() uint64 { return h.total.Load() }

// Max is the largest observation.
func (h *Hist) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the floor of the bucket holding the q-quantile, q in
// [0, 1]; zero when nothing was recorded.
func (h *Hist) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if rank >= n {
		rank = n - 1
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen > rank {
			return time.Duration(histFloor(i))
		}
	}
	return h.Max()
}

// Reset forgets every observation. It must not run concurrently with Record.
func (h *Hist) Reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.total.Store(0)
	h.max.Store(0)
}
