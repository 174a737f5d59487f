// Package budget bounds the memory a process holds across all its
// connections: every byte is reserved before it is allocated, a reservation
// that does not fit waits until memory is released, and the bound is never
// exceeded.
//
// Reservations come in four classes, so that no one kind of memory can
// keep another from being released:
//
//   - Responses (what the proxy reads from its upstream) owed next on
//     their connection, or whose place the caller does not know
//     (ReserveResponse), may use the whole limit. Requests of every size together may use only the limit minus
//     a response reserve (limit/ResponseShare): requests that wait for an
//     earlier one to be answered hold their memory until it is, so if they
//     could take it all, the response that releases them could never be
//     read and the process would stop.
//   - Bulk requests (frames above a size threshold chosen by the caller)
//     may together use only the request share minus limit/ReserveShare:
//     however many large frames clients stall, that much stays open to
//     small requests.
//   - Small requests (the frames of ordinary requests, per-request state)
//     use the request share.
//   - Responses that arrive ahead of one owed before them on their
//     connection (ReserveAhead) are held until it arrives. They may use
//     only what requests may (the limit minus limit/ResponseShare), and
//     they and requests together only the limit minus limit/NextShare:
//     the rest is kept for responses owed next, which are written to
//     their client at once, and beside responses ahead requests always
//     keep limit/NextShare. Without these bounds, responses held behind a
//     late one on a few connections could fill the limit, and then no
//     other connection could read a request, nor the small answer it
//     owes next, until those few were shed for lack of memory.
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

// ReserveShare is the fraction of the limit that bulk requests may not
// take from small ones: bulk requests hold at most the request share minus
// limit/ReserveShare.
const ReserveShare = 8

// NextShare is the fraction of the limit that only responses owed next on
// their connection may take (ReserveResponse): requests and responses
// that arrive ahead of their turn (ReserveAhead) together cannot hold it.
const NextShare = 16

// ResponseShare is the fraction of the limit kept for responses: requests
// together hold at most limit - limit/ResponseShare.
const ResponseShare = 8

// ErrTooLarge: the reservation is larger than its class can ever hold (see
// Max); waiting would never end.
var ErrTooLarge = errors.New("budget: reservation larger than its class can ever hold")

// Budget is a process-wide memory bound. The zero value is not usable; use
// New. A nil *Budget bounds nothing.
type Budget struct {
	limit, requestLimit, bulkLimit int64
	// sharedLimit is what requests and responses ahead may hold
	// together: the limit minus limit/NextShare.
	sharedLimit int64

	mu       sync.Mutex
	used     int64         // every class
	requests int64         // small and bulk requests
	ahead    int64         // responses ahead
	bulk     int64         // bulk requests
	wake     chan struct{} // closed and replaced when memory is released to waiters
	waiters  int

	waitNanos atomic.Int64 // total time reservations waited
	waits     atomic.Int64 // reservations that had to wait
}

// class is what a reservation is for; see the package comment.
type class uint8

const (
	small class = iota
	bulk
	response // owed next, or taken by a caller that does not know
	ahead    // a response read ahead of one owed before it
)

func requestClass(isBulk bool) class {
	if isBulk {
		return bulk
	}
	return small
}

// New returns a budget of limit bytes, of which limit/ResponseShare is kept
// for responses and limit/ReserveShare from bulk requests.
func New(limit int64) *Budget {
	requests := limit - limit/ResponseShare
	return &Budget{limit: limit, requestLimit: requests, bulkLimit: requests - limit/ReserveShare,
		sharedLimit: limit - limit/NextShare, wake: make(chan struct{})}
}

// Max returns the largest reservation a request of the class (bulk or
// small) can ever get: what larger cannot be held whatever is released.
func (b *Budget) Max(bulk bool) int64 {
	if b == nil {
		return 1<<63 - 1
	}
	return b.max(requestClass(bulk))
}

// MaxResponse returns the largest response reservation there can be: the
// limit.
func (b *Budget) MaxResponse() int64 {
	if b == nil {
		return 1<<63 - 1
	}
	return b.limit
}

// MaxAhead returns the largest reservation a response read ahead of its
// turn can ever get (ReserveAhead): what requests can, the limit minus
// limit/ResponseShare.
func (b *Budget) MaxAhead() int64 {
	if b == nil {
		return 1<<63 - 1
	}
	return b.requestLimit
}

func (b *Budget) max(c class) int64 {
	switch c {
	case bulk:
		return b.bulkLimit
	case small:
		return b.requestLimit
	case ahead:
		return b.requestLimit
	}
	return b.limit
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

func (b *Budget) fits(n int64, c class) bool {
	switch {
	case b.used+n > b.limit:
		return false
	case c == response:
		return true
	case b.requests+b.ahead+n > b.sharedLimit:
		return false
	case c == ahead:
		return b.ahead+n <= b.requestLimit
	case b.requests+n > b.requestLimit:
		return false
	}
	return c != bulk || b.bulk+n <= b.bulkLimit
}

func (b *Budget) take(n int64, c class) {
	b.used += n
	switch c {
	case bulk:
		b.bulk += n
		fallthrough
	case small:
		b.requests += n
	case ahead:
		b.ahead += n
	}
}

// TryReserve reserves n bytes for a request (bulk or small) if they fit
// now.
func (b *Budget) TryReserve(n int64, bulk bool) bool {
	return b.tryReserve(n, requestClass(bulk))
}

// TryReserveResponse reserves n bytes for a response if they fit now.
func (b *Budget) TryReserveResponse(n int64) bool {
	return b.tryReserve(n, response)
}

// TryReserveAhead reserves n bytes for a response read ahead of one owed
// before it on its connection, if they fit now.
func (b *Budget) TryReserveAhead(n int64) bool {
	return b.tryReserve(n, ahead)
}

func (b *Budget) tryReserve(n int64, c class) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(n, c) {
		return false
	}
	b.take(n, c)
	return true
}

// Reserve reserves n bytes for a request (bulk or small), waiting until
// they fit, stop closes or the deadline (if not zero) passes. A
// reservation larger than its class can ever hold fails at once with
// ErrTooLarge.
func (b *Budget) Reserve(n int64, bulk bool, stop <-chan struct{}, deadline time.Time) error {
	return b.reserve(n, requestClass(bulk), stop, deadline)
}

// ReserveResponse reserves n bytes for a response, as Reserve does for a
// request. The response should be the next its connection owes, or its
// place unknown: it may take the reserve kept for those (NextShare).
func (b *Budget) ReserveResponse(n int64, stop <-chan struct{}, deadline time.Time) error {
	return b.reserve(n, response, stop, deadline)
}

// ReserveAhead reserves n bytes for a response read ahead of one owed
// before it on its connection, which is held until that one arrives: as
// ReserveResponse, without the reserve kept for responses owed next.
func (b *Budget) ReserveAhead(n int64, stop <-chan struct{}, deadline time.Time) error {
	return b.reserve(n, ahead, stop, deadline)
}

func (b *Budget) reserve(n int64, c class, stop <-chan struct{}, deadline time.Time) error {
	if b == nil {
		return nil
	}
	if n > b.max(c) {
		return ErrTooLarge
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
		if b.fits(n, c) {
			b.take(n, c)
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
		took := false
		if err == ErrDeadline && b.fits(n, c) {
			// Memory released as the deadline passed: the wake and
			// the timer were both ready, and select took the timer.
			b.take(n, c)
			took, err = true, nil
		}
		b.mu.Unlock()
		if err != nil || took {
			b.waitNanos.Add(int64(time.Since(start)))
			return err
		}
	}
}

// Release returns n bytes reserved for a request of the same class, and
// wakes the reservations waiting.
func (b *Budget) Release(n int64, bulk bool) {
	b.release(n, requestClass(bulk))
}

// ReleaseResponse returns n bytes reserved for a response (by
// ReserveResponse or TryReserveResponse), and wakes the reservations
// waiting.
func (b *Budget) ReleaseResponse(n int64) {
	b.release(n, response)
}

// ReleaseAhead returns n bytes reserved for a response ahead (by
// ReserveAhead or TryReserveAhead), and wakes the reservations waiting.
func (b *Budget) ReleaseAhead(n int64) {
	b.release(n, ahead)
}

func (b *Budget) release(n int64, c class) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	switch c {
	case bulk:
		b.bulk -= n
		fallthrough
	case small:
		b.requests -= n
	case ahead:
		b.ahead -= n
	}
	if b.used < 0 || b.requests < 0 || b.bulk < 0 || b.ahead < 0 {
		b.mu.Unlock()
		panic("budget: released more than reserved")
	}
	if b.waiters > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}

// Charge is memory reserved in a budget for one buffer or state: n bytes
// in a response class (Resp, Ahead with it for a response ahead) or a
// request class (Bulk or small).
type Charge struct {
	N                 int64
	Bulk, Resp, Ahead bool
}

// Release gives the charge back to b and clears it.
func (ch *Charge) Release(b *Budget) {
	switch {
	case ch.Resp && ch.Ahead:
		b.ReleaseAhead(ch.N)
	case ch.Resp:
		b.ReleaseResponse(ch.N)
	default:
		b.Release(ch.N, ch.Bulk)
	}
	*ch = Charge{}
}
