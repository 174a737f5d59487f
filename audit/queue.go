package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/inorder-proxy/inorder/internal/budget"
)

// Errors of the queue. Match them with errors.Is.
var (
	// ErrDropped: the event was not queued and is counted in
	// inorder_audit_dropped_total (a full queue in drop mode, or an event
	// larger than the queue can ever hold).
	ErrDropped = errors.New("audit: event dropped")
	// ErrClosed: the queue is closed; the event is counted as dropped.
	ErrClosed = errors.New("audit: trail closed")
	// ErrUnflushed: Close's deadline passed before every sink had written
	// every queued event; the error says how many were not.
	ErrUnflushed = errors.New("audit: events not written before the deadline")
	// ErrStalled: a sink has been writing one batch for longer than the
	// queue's StallAfter, as a Kafka sink does while its cluster is away.
	ErrStalled = errors.New("audit: sink stalled")
)

// OnFull is what Enqueue does when the queue is full.
type OnFull string

const (
	// Block waits for room: the caller, a connection's reader, stops
	// reading its client, so the client is held back rather than its
	// events lost.
	Block OnFull = "block"
	// Drop drops the event and counts it.
	Drop OnFull = "drop"
)

// Record is one encoded event as the sinks take it.
type Record struct {
	// Value is the event's JSON object, ending in a newline.
	Value []byte
	// Key is the event's principal: a Kafka sink keys records by it, so
	// that one principal's events stay in order in one partition.
	Key string

	// lazy, when not nil, is the event Value is to hold, encoded by the
	// queue before any sink is given the record.
	lazy *lazyEvent
	// charge is what the queue charges the record, set as it is queued.
	charge int64
}

// size is what a record is charged as it is queued: its bytes (for an
// event not yet encoded, the bound of its encoding) and the slot.
func (r *Record) size() int64 {
	n := len(r.Value)
	if r.lazy != nil {
		n = r.lazy.bound
	}
	return recordSize(n, r.Key)
}

// recordSize is what a record of n value bytes and key is charged.
func recordSize(n int, key string) int64 { return int64(n+len(key)) + recordOverhead }

// recordOverhead is what a queued record costs beyond its bytes: the
// slice and string headers of its slot.
const recordOverhead = 48

// Sink writes records somewhere. A queue calls one sink's Write from one
// goroutine at a time, never concurrently with its Close.
type Sink interface {
	// Name is the sink's name in metrics and logs.
	Name() SinkName
	// Write writes recs in order. On an error it returns how many leading
	// records were written and need not be written again; the queue
	// retries the others after a backoff. A sink that cannot tell may
	// return 0, which writes some records twice: the trail is at least
	// once.
	Write(ctx context.Context, recs []Record) (int, error)
	// Close flushes what Write accepted (a file is synced) and releases
	// the sink; the queue calls it once every record is written or Close's
	// deadline passed.
	Close() error
}

// QueueOptions configure a Queue. The zero value of each field is
// described beside it.
type QueueOptions struct {
	// MaxBytes bounds the bytes of the queued events (see Record's size).
	// Zero means 16MiB.
	MaxBytes int64
	// OnFull is Block or Drop. Empty means Block.
	OnFull OnFull
	// Budget is the process's memory budget: queued bytes are also
	// reserved from it, as small requests, so that the queue lives inside
	// --max-memory. Nil reserves nothing beyond MaxBytes.
	Budget *budget.Budget
	// Metrics records the queue's collectors; nil records nothing.
	Metrics *Metrics
	// Logger logs a sink's failures and recoveries; nil discards them.
	Logger *slog.Logger
	// Batch is the most records one Write gets. Zero means 512.
	Batch int
	// Linger is how long a sink waits for more records before it writes
	// fewer than Batch, so that a trail of an event per request costs a
	// write per many events rather than one each. A sink does not wait
	// while an Enqueue waits for room, nor once the queue closes. Zero
	// means 100ms: each write is a blocking system call on a thread of
	// its own and a wake of the sink's goroutine, which at 5ms cost a
	// per-request trail of a saturating producer several percent of the
	// proxy's CPU. An event waits in memory that much longer, within the
	// queue's bound as before. Negative writes at once.
	Linger time.Duration
	// RetryMin and RetryMax bound the backoff between retries of a
	// failed write, doubling from RetryMin. Zero means 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// StallAfter is how long one Write may take before Err reports the
	// sink stalled. Zero means 10s.
	StallAfter time.Duration
}

func (o *QueueOptions) defaults() {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 16 << 20
	}
	if o.OnFull == "" {
		o.OnFull = Block
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Linger == 0 {
		o.Linger = 100 * time.Millisecond
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 100 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 10 * time.Second
	}
	if o.StallAfter <= 0 {
		o.StallAfter = 10 * time.Second
	}
}

// Queue holds events until every sink has written them. Each sink
// has a goroutine of its own reading the queue at its own pace, so a
// failing sink does not hold the others back until the queue is full; an
// event leaves the queue, and its memory is released, once the slowest
// sink has written it.
type Queue struct {
	o QueueOptions

	mu      sync.Mutex
	more    *sync.Cond    // signalled when records arrive or the queue closes
	room    chan struct{} // closed and replaced when memory is released to waiters
	waiters int
	recs    []Record // recs[0] is record number head
	head    uint64
	bytes   int64
	closed  bool
	// encoded is the record number below which every record is encoded;
	// encMu is held by the one sink encoding the records after it, outside
	// mu (see encode).
	encoded uint64
	encMu   sync.Mutex
	encBuf  []byte       // guarded by encMu
	encEnds []int        // guarded by encMu
	encWork []*lazyEvent // guarded by encMu
	// lazyEncoded counts the events encode encoded, once each whatever
	// the sinks.
	lazyEncoded uint64
	// hurry is closed and replaced when the sinks lingering (see Linger)
	// are to write at once: an Enqueue waits for room, or the queue
	// closes.
	hurry     chan struct{}
	lingering int
	sinks     []*sinkState

	// ctx ends when Close's deadline passes: the writes in progress are
	// cancelled and no write is retried.
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// sinkState is one sink's progress through the queue.
type sinkState struct {
	sink  Sink
	next  uint64 // the next record number to write
	batch []Record
	timer *time.Timer // Linger's, stopped between uses
	woken uint64      // times drain waited for a record; guarded by Queue.mu

	// guarded by Queue.mu
	err          error     // the last write's error; nil once one succeeds
	writingSince time.Time // when the write in progress started; zero when none
}

// NewQueue starts a queue writing to sinks, a goroutine per sink; Close
// stops them.
func NewQueue(o QueueOptions, sinks ...Sink) *Queue {
	o.defaults()
	q := &Queue{o: o, room: make(chan struct{}), hurry: make(chan struct{})}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.more = sync.NewCond(&q.mu)
	for _, s := range sinks {
		st := &sinkState{sink: s}
		q.sinks = append(q.sinks, st)
		o.Metrics.up(s.Name(), true)
		q.done.Add(1)
		go q.drain(st)
	}
	return q
}

// Enqueue queues rec, whose bytes become the queue's. With Block it waits
// for room while ctx lasts (the caller is held back, which is the point)
// and returns ctx's error if it ends first; with Drop a full queue drops
// rec and returns ErrDropped. An event larger than the queue can ever hold
// is dropped in both modes. Every event not queued is counted in
// inorder_audit_dropped_total.
func (q *Queue) Enqueue(ctx context.Context, rec Record) error {
	n := rec.size()
	rec.charge = n
	if !q.holds(n) {
		q.o.Metrics.drop(DropTooLarge, 1)
		return fmt.Errorf("%w: an event of %d bytes is larger than the audit queue (%d bytes)", ErrDropped, n, q.o.MaxBytes)
	}
	var start time.Time
	q.mu.Lock()
	// Room in the queue and in the budget now: one section under the lock
	// (the budget's is taken inside q.mu, as advance releases it).
	if !q.closed && q.bytes+n <= q.o.MaxBytes && q.o.Budget.TryReserve(n, false) {
		q.bytes += n
		q.push(rec)
		q.mu.Unlock()
		return nil
	}
	for {
		if q.closed {
			q.mu.Unlock()
			q.o.Metrics.drop(DropClosed, 1)
			return ErrClosed
		}
		if q.bytes+n <= q.o.MaxBytes {
			break
		}
		if q.o.OnFull == Drop {
			q.mu.Unlock()
			q.o.Metrics.drop(DropFull, 1)
			return fmt.Errorf("%w: audit queue full", ErrDropped)
		}
		if start.IsZero() {
			start = time.Now()
		}
		room := q.room
		q.waiters++
		q.hurryLingering()
		q.mu.Unlock()
		var err error
		select {
		case <-room:
		case <-ctx.Done():
			err = ctx.Err()
		}
		q.mu.Lock()
		q.waiters--
		if err != nil {
			q.mu.Unlock()
			q.o.Metrics.waited(time.Since(start).Seconds())
			q.o.Metrics.drop(DropCancelled, 1)
			return err
		}
	}
	// The queue's own bound is taken first, so that no more than MaxBytes
	// ever waits on the budget.
	q.bytes += n
	q.mu.Unlock()
	var err error
	if q.o.OnFull == Drop {
		if !q.o.Budget.TryReserve(n, false) {
			err = fmt.Errorf("%w: no memory for the audit queue", ErrDropped)
			q.o.Metrics.drop(DropFull, 1)
		}
	} else if err = q.o.Budget.Reserve(n, false, ctx.Done(), time.Time{}); err != nil {
		q.o.Metrics.drop(DropCancelled, 1)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	if !start.IsZero() {
		q.o.Metrics.waited(time.Since(start).Seconds())
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err == nil && q.closed {
		err = ErrClosed
		q.o.Metrics.drop(DropClosed, 1)
		q.o.Budget.Release(n, false)
	}
	if err != nil {
		q.bytes -= n
		q.wake()
		return err
	}
	q.push(rec)
	return nil
}

// push appends rec, its charge already in q.bytes and the budget, and
// wakes the sinks. q.mu is held.
func (q *Queue) push(rec Record) {
	q.recs = append(q.recs, rec)
	q.o.Metrics.queued(len(q.recs), q.bytes)
	q.more.Broadcast()
}

// holds reports whether a record charged n can ever be queued: within
// MaxBytes and what the budget can ever grant.
func (q *Queue) holds(n int64) bool { return n <= q.o.MaxBytes && n <= q.o.Budget.Max(false) }

// encode encodes the records before record number end that are not yet,
// together: a sink's goroutine calls it for the records it is about to
// write. One sink encodes at a time, outside q.mu, so that Enqueue is not
// held up meanwhile; the others find the records encoded. The records
// cannot leave the queue meanwhile, as no sink has written them. A
// record's charge falls from its bound to its encoded size, and the
// difference is released to Enqueues waiting for room.
func (q *Queue) encode(end uint64) {
	q.encMu.Lock()
	defer q.encMu.Unlock()
	q.mu.Lock()
	start := q.encoded
	if end <= start {
		q.mu.Unlock()
		return
	}
	work := q.encWork[:0]
	for i := start; i < end; i++ {
		work = append(work, q.recs[i-q.head].lazy)
	}
	q.mu.Unlock()
	buf, ends := q.encBuf[:0], q.encEnds[:0]
	for _, l := range work {
		if l != nil {
			buf = l.encode(buf)
		}
		ends = append(ends, len(buf))
	}
	// One allocation for the run's values: they leave the queue together,
	// within a batch or two of each other.
	vals := make([]byte, len(buf))
	copy(vals, buf)
	q.mu.Lock()
	var freed int64
	at := 0
	for i, l := range work {
		if l == nil {
			continue
		}
		r := &q.recs[start+uint64(i)-q.head]
		r.Value, r.lazy = vals[at:ends[i]:ends[i]], nil
		at = ends[i]
		q.lazyEncoded++
		if c := r.size(); c < r.charge {
			freed += r.charge - c
			r.charge = c
		}
	}
	q.encoded = end
	if freed > 0 {
		q.bytes -= freed
		q.o.Budget.Release(freed, false)
		q.o.Metrics.queued(len(q.recs), q.bytes)
		q.wake()
	}
	q.mu.Unlock()
	clear(work)
	if cap(buf) > 1<<20 { // one huge run does not pin its buffer
		buf = nil
	}
	q.encBuf, q.encEnds, q.encWork = buf, ends, work
}

// wake lets the Enqueues waiting for room look again. q.mu is held.
func (q *Queue) wake() {
	if q.waiters > 0 {
		close(q.room)
		q.room = make(chan struct{})
	}
}

// Len returns the events queued and their bytes.
func (q *Queue) Len() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.recs), q.bytes
}

// Err returns why the trail is not healthy, or nil: a sink whose last
// write failed (the error is retried meanwhile), or one whose write has
// taken longer than StallAfter. /readyz reports it.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.sinks {
		if s.err != nil {
			return fmt.Errorf("audit sink %s: %w", s.sink.Name(), s.err)
		}
		if !s.writingSince.IsZero() && time.Since(s.writingSince) > q.o.StallAfter {
			return fmt.Errorf("audit sink %s: %w: one write has taken %s", s.sink.Name(), ErrStalled, time.Since(s.writingSince).Round(time.Second))
		}
	}
	return nil
}

// drain is a sink's goroutine: it writes the queue's records in order,
// a batch at a time, retrying a failed write until it succeeds or Close's
// deadline passes.
//
// While records keep coming it waits out a Linger on its timer and never
// waits on more, so that a steady trail wakes it once per Linger rather
// than twice (an Enqueue's signal, then the timer); only a Linger that
// brought nothing sends it back to wait for the next record.
func (q *Queue) drain(s *sinkState) {
	defer q.done.Done()
	flowing := false
	for {
		q.mu.Lock()
		if !flowing && s.next == q.head+uint64(len(q.recs)) && !q.closed {
			for s.next == q.head+uint64(len(q.recs)) && !q.closed {
				q.more.Wait()
			}
			s.woken++
		}
		if q.lingers(s) {
			hurry := q.hurry
			q.lingering++
			q.mu.Unlock()
			q.linger(s, hurry)
			q.mu.Lock()
			q.lingering--
		}
		avail := q.recs[s.next-q.head:]
		if len(avail) == 0 {
			closed := q.closed
			q.mu.Unlock()
			if closed { // and everything written
				return
			}
			flowing = false // a Linger went by without a record
			continue
		}
		flowing = true
		end := s.next + uint64(min(len(avail), q.o.Batch))
		if q.encoded < end {
			q.mu.Unlock()
			q.encode(end)
			q.mu.Lock()
		}
		s.batch = append(s.batch[:0], q.recs[s.next-q.head:end-q.head]...)
		q.mu.Unlock()
		if !q.write(s) {
			return
		}
	}
}

// lingers reports whether s waits for more records before it writes what
// is queued for it. q.mu is held.
func (q *Queue) lingers(s *sinkState) bool {
	return q.o.Linger > 0 && !q.closed && q.waiters == 0 && int(q.head+uint64(len(q.recs))-s.next) < q.o.Batch
}

// linger waits Linger, or until hurried.
func (q *Queue) linger(s *sinkState, hurry <-chan struct{}) {
	if s.timer == nil {
		s.timer = time.NewTimer(q.o.Linger)
	} else {
		s.timer.Reset(q.o.Linger)
	}
	select {
	case <-s.timer.C:
	case <-hurry:
		s.timer.Stop()
	}
}

// hurryLingering makes the sinks lingering write at once. q.mu is held.
func (q *Queue) hurryLingering() {
	if q.lingering > 0 {
		close(q.hurry)
		q.hurry = make(chan struct{})
	}
}

// write writes s.batch, retrying with backoff; false when Close's deadline
// ended the retries.
func (q *Queue) write(s *sinkState) bool {
	name := s.sink.Name()
	backoff := q.o.RetryMin
	batch := s.batch
	for {
		q.mu.Lock()
		s.writingSince = time.Now()
		q.mu.Unlock()
		n, err := s.sink.Write(q.ctx, batch)
		n = min(max(n, 0), len(batch))
		if err == nil {
			n = len(batch)
		}
		q.o.Metrics.wrote(name, n)
		q.advance(s, n, err)
		batch = batch[n:]
		if err == nil {
			return true
		}
		q.o.Metrics.sinkError(name)
		t := time.NewTimer(backoff)
		select {
		case <-q.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, q.o.RetryMax)
	}
}

// advance records that s wrote n more records and the write's outcome,
// and drops the records every sink has written.
func (q *Queue) advance(s *sinkState, n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s.writingSince = time.Time{}
	switch {
	case err != nil && s.err == nil:
		q.o.Logger.Warn("audit sink failing; its events wait in the queue and the write is retried", "sink", string(s.sink.Name()), "err", err)
		q.o.Metrics.up(s.sink.Name(), false)
	case err == nil && s.err != nil:
		q.o.Logger.Info("audit sink writing again", "sink", string(s.sink.Name()))
		q.o.Metrics.up(s.sink.Name(), true)
	}
	s.err = err
	s.next += uint64(n)
	low := s.next
	for _, o := range q.sinks {
		low = min(low, o.next)
	}
	drop := int(low - q.head)
	if drop == 0 {
		return
	}
	var freed int64
	for i := range q.recs[:drop] {
		freed += q.recs[i].charge
		q.recs[i] = Record{}
	}
	q.recs = q.recs[drop:]
	if len(q.recs) == 0 {
		q.recs = q.recs[:0:0] // let a burst's backing array go
	}
	q.head = low
	q.bytes -= freed
	q.o.Budget.Release(freed, false)
	q.o.Metrics.queued(len(q.recs), q.bytes)
	q.wake()
}

// Close stops taking events, waits until every sink has written every
// queued event or ctx ends, then closes the sinks. Events not written by
// then are counted as dropped (DropUnflushed) and reported by an error
// wrapping ErrUnflushed.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.hurryLingering()
	q.more.Broadcast()
	q.wake()
	q.mu.Unlock()
	finished := make(chan struct{})
	go func() { q.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		q.cancel()
		<-finished
	}
	q.cancel()
	var errs []error
	q.mu.Lock()
	lost := uint64(0)
	for _, s := range q.sinks {
		lost = max(lost, q.head+uint64(len(q.recs))-s.next)
	}
	if lost > 0 {
		q.o.Logger.Error("audit events not written before the stop's deadline", "events", lost)
		q.o.Metrics.drop(DropUnflushed, int(lost))
		errs = append(errs, fmt.Errorf("%w: %d of them", ErrUnflushed, lost))
	}
	var freed int64
	for i := range q.recs {
		freed += q.recs[i].charge
	}
	q.recs, q.bytes = nil, 0
	q.o.Budget.Release(freed, false)
	q.o.Metrics.queued(0, 0)
	q.mu.Unlock()
	for _, s := range q.sinks {
		if err := s.sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("audit sink %s: %w", s.sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}
