// Package budget bounds the memory a process holds across all its
// connections: every byte is reserved before it is allocated, a reservation
// that does not fit waits until memory is released, and the bound is never
// exceeded.
//
// So that clients holding large frames they never finish cannot starve the
// rest, reservations come in two classes. Small ones (the frames of
// ordinary requests and responses, per-request state) may use the whole
// limit. Bulk ones (frames above a size threshold chosen by the caller) may
// together use only the limit minus a reserve: however many large frames
// are stalled, the reserve stays open to small requests.
package budget

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Reserve.
var (
	// ErrStopped: the caller's stop channel closed while it waited.
	ErrStopped = errors.New("budget: stopped while waiting for memory")
	// ErrDeadline: the caller's deadline passed while it waited.
	ErrDeadline = errors.New("budget: deadline passed while waiting for memory")
)

// ReserveShare is the fraction of the limit kept from bulk reservations:
// limit/ReserveShare.
const ReserveShare = 4

// Budget is a process-wide memory bound. The zero value is not usable; use
// New. A nil *Budget bounds nothing.
type Budget struct {
	limit, bulkLimit int64

	mu      sync.Mutex
	used    int64 // small and bulk
	bulk    int64
	wake    chan struct{} // closed and replaced when memory is released to waiters
	waiters int

	waitNanos atomic.Int64 // total time reservations waited
	waits     atomic.Int64 // reservations that had to wait
}

// New returns a budget of limit bytes, of which limit/ReserveShare is kept
// for small reservations.
func New(limit int64) *Budget {
	return &Budget{limit: limit, bulkLimit: limit - limit/ReserveShare, wake: make(chan struct{})}
}

// Limit returns the bound.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waited returns how many reservations had to wait and for how long in
// total: the time connections spent not being read for lack of memory.
func (b *Budget) Waited() (int64, time.Duration) {
	if b == nil {
		return 0, 0
	}
	return b.waits.Load(), time.Duration(b.waitNanos.Load())
}

func (b *Budget) fits(n int64, bulk bool) bool {
	if b.used+n > b.limit {
		return false
	}
	return !bulk || b.bulk+n <= b.bulkLimit
}

func (b *Budget) take(n int64, bulk bool) {
	b.used += n
	if bulk {
		b.bulk += n
	}
}

// TryReserve reserves n bytes if they fit now.
func (b *Budget) TryReserve(n int64, bulk bool) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(n, bulk) {
		return false
	}
	b.take(n, bulk)
	return true
}

// Reserve reserves n bytes, waiting until they fit, stop closes or the
// deadline (if not zero) passes. A reservation larger than its class can
// ever hold fails at once.
func (b *Budget) Reserve(n int64, bulk bool, stop <-chan struct{}, deadline time.Time) error {
	if b == nil {
		return nil
	}
	if max := b.limit; n > max || (bulk && n > b.bulkLimit) {
		return errTooLarge
	}
	var (
		start time.Time
		timer *time.Timer
		late  <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.fits(n, bulk) {
			b.take(n, bulk)
			b.mu.Unlock()
			if !start.IsZero() {
				b.waitNanos.Add(int64(time.Since(start)))
			}
			return nil
		}
		wake := b.wake
		b.waiters++
		b.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			b.waits.Add(1)
			if !deadline.IsZero() {
				timer = time.NewTimer(time.Until(deadline))
				late = timer.C
			}
		}
		var err error
		select {
		case <-wake:
		case <-stop:
			err = ErrStopped
		case <-late:
			err = ErrDeadline
		}
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
		if err != nil {
			b.waitNanos.Add(int64(time.Since(start)))
			return err
		}
	}
}

var errTooLarge = errors.New("budget: reservation larger than the bound")

// Release returns n bytes reserved in the same class, and wakes the
// reservations waiting.
func (b *Budget) Release(n int64, bulk bool) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if bulk {
		b.bulk -= n
	}
	if b.used < 0 || b.bulk < 0 {
		b.mu.Unlock()
		panic("budget: released more than reserved")
	}
	if b.waiters > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}
