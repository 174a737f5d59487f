package ordering

import (
	"errors"
	"fmt"
)

// Mode selects what the sequencer assumes about the upstream.
type Mode uint8

const (
	// None assumes nothing: writes to disjoint keys overlap, any other
	// request is a barrier.
	None Mode = iota
	// Connection trusts the upstream to keep per-connection order:
	// everything is forwarded at once.
	Connection
)

// Kind classifies a request for the None mode.
type Kind uint8

const (
	// Barrier waits for every earlier request and completes before any
	// later request is forwarded.
	Barrier Kind = iota
	// Write waits only for earlier writes sharing one of its keys.
	Write
)

// Key identifies what a write touches; see the package comment.
type Key uint64

// MaxWriteKeys is the most keys a Write may hold in None mode. A Write
// with more is sequenced as a Barrier: it waits for everything before it
// and nothing overlaps it, which keeps the same order with no per-key
// state. Callers computing keys may stop at MaxWriteKeys+1.
const MaxWriteKeys = 1000

// KeyStateBytes is what one key of a None-mode Write costs the sequencer
// while the write is live (its copy of the key, its place in the key's wait
// queue and its share of the key map), counted in the bytes that Full
// compares with the bound.
const KeyStateBytes = 64

// Request describes one request to Push.
type Request struct {
	Kind Kind
	// Keys is what a Write touches (partitions written or committed);
	// copied by Push, duplicates allowed. A Write with no keys touches
	// nothing and never waits for another write. Ignored for a Barrier
	// and in Connection mode.
	Keys []Key
	// NoResponse marks a request whose client expects no response.
	NoResponse bool
}

// Errors returned for calls that do not match the sequencer's state; each
// is a bug in the caller or a response the upstream should not have sent.
var (
	// ErrUnknownSeq is returned for a sequence number that is not live.
	ErrUnknownSeq = errors.New("ordering: sequence number not in flight")
	// ErrNotForwarded is returned when completing a request that was
	// never dispatched.
	ErrNotForwarded = errors.New("ordering: request completed before it was forwarded")
	// ErrCompleted is returned when completing a request twice.
	ErrCompleted = errors.New("ordering: request already completed")
)

type state uint8

const (
	statePending state = iota
	stateForwarded
	stateCompleted
)

// noSeq ends a key's wait queue.
const noSeq = ^uint64(0)

// link is a write's place in the wait queue of one of its keys: the next
// write waiting on the same key, and that key's index in the next write's
// keys.
type link struct {
	next    uint64
	nextIdx uint32
}

// keyTail is the last write queued on a key, and the key's index in it.
type keyTail struct {
	seq uint64
	idx uint32
}

type slot[T any] struct {
	val    T
	keys   []Key  // distinct once registered
	links  []link // parallel to keys once registered
	waits  int    // keys on which an earlier write is still queued
	kind   Kind
	state  state
	noResp bool
}

// keepKeys is the key capacity a ring slot keeps for reuse; a slot that
// held a larger write gives its slices back, so a burst of wide writes does
// not pin memory the byte count no longer shows. The key map is dropped in
// the same way once it is empty after holding more than keepKeys keys: a
// map never shrinks as its entries are deleted.
const keepKeys = 64

// Sequencer orders one connection's requests and responses. It is not safe
// for concurrent use; the zero value is not usable, use New.
//
// In None mode the cost of every call is proportional to the requests and
// keys it touches: each key has a FIFO of the live writes that share it
// (linked through the writes' slots), a write counts the queues it is not
// yet at the head of, and completing a write hands each of its keys to the
// next waiter, which is ready when its count reaches zero. Requests behind
// an unfinished barrier are not queued on keys at all until it completes.
type Sequencer[T any] struct {
	mode Mode

	ring       []slot[T] // power-of-two length, grows up to fit maxInFlight
	head, tail uint64    // head: oldest unreleased seq; tail: next seq
	// open is the oldest seq not completed, tail when every live one
	// is: head <= open <= tail.
	open uint64

	maxInFlight int
	maxBytes    int64
	bytes       int64 // held by Hold, released by Free
	keyBytes    int64 // KeyStateBytes per key of the live writes

	inflight int // forwarded, not completed

	// Connection mode: pushed, not yet forwarded, in seq order.
	pending []uint64

	// None mode state. The active epoch is every request before the
	// first barrier that has not completed; later holds that barrier and
	// everything pushed after it, in seq order.
	ready        fifo            // active writes that may be forwarded
	later        fifo            // not yet active
	active       int             // active writes not yet completed
	barrier      bool            // a barrier is forwarded and not completed
	keyQueues    map[Key]keyTail // live writes per key: the last one queued
	keyPeak      int             // the most keys keyQueues held since it was made
	undispatched int             // pushed, not yet returned by Dispatch
}

// fifo is a queue of sequence numbers that reuses its array.
type fifo struct {
	s   []uint64
	off int
}

func (q *fifo) push(seq uint64) { q.s = append(q.s, seq) }
func (q *fifo) len() int        { return len(q.s) - q.off }
func (q *fifo) front() uint64   { return q.s[q.off] }
func (q *fifo) pop() uint64 {
	seq := q.s[q.off]
	q.off++
	if q.off == len(q.s) {
		q.s, q.off = q.s[:0], 0
	}
	return seq
}
func (q *fifo) reset() { q.s, q.off = q.s[:0], 0 }

// New returns a sequencer in mode that reports Full once maxInFlight
// requests are live or maxBytes are held.
func New[T any](mode Mode, maxInFlight int, maxBytes int64) *Sequencer[T] {
	if maxInFlight < 1 {
		maxInFlight = 1
	}
	return &Sequencer[T]{mode: mode, maxInFlight: maxInFlight, maxBytes: maxBytes}
}

// Len returns how many requests are live: pushed and not yet released.
func (s *Sequencer[T]) Len() int { return int(s.tail - s.head) }

// InFlight returns how many requests are forwarded and not completed; in
// Connection mode, forwarded means pushed.
func (s *Sequencer[T]) InFlight() int { return s.inflight }

// Hold records n more bytes held by the connection; Free releases them.
func (s *Sequencer[T]) Hold(n int) { s.bytes += int64(n) }

// Free releases n bytes recorded by Hold.
func (s *Sequencer[T]) Free(n int) { s.bytes -= int64(n) }

// Bytes returns what the connection holds: the bytes recorded by Hold and
// the state of the keys of live writes.
func (s *Sequencer[T]) Bytes() int64 { return s.bytes + s.keyBytes }

// StateBytes returns the key state Push would hold for r, so that a caller
// keeping a wider account can charge it too. It is released when the write
// completes.
func (s *Sequencer[T]) StateBytes(r Request) int {
	if s.mode != None || r.Kind != Write || len(r.Keys) > MaxWriteKeys {
		return 0
	}
	return len(r.Keys) * KeyStateBytes
}

// Full reports whether the connection must stop reading: too many live
// requests, or more bytes held than allowed while anything is live.
func (s *Sequencer[T]) Full() bool {
	live := s.Len()
	return live >= s.maxInFlight || (live > 0 && s.Bytes() >= s.maxBytes)
}

// Head returns the oldest sequence number not yet released by Ready.
func (s *Sequencer[T]) Head() uint64 { return s.head }

// NextOwed reports whether seq is live and every request before it has
// completed: seq's response, once complete, is the next the client is
// owed, and is released by the next Ready.
func (s *Sequencer[T]) NextOwed(seq uint64) bool {
	return s.slot(seq) != nil && seq <= s.open
}

// Next returns the sequence number the next Push will return: every
// request pushed so far is below it.
func (s *Sequencer[T]) Next() uint64 { return s.tail }

// Push adds the next request in arrival order and returns its sequence
// number. The caller must not push while Full.
func (s *Sequencer[T]) Push(r Request, v T) uint64 {
	if s.Len() == len(s.ring) {
		s.grow()
	}
	seq := s.tail
	s.tail++
	sl := &s.ring[seq&uint64(len(s.ring)-1)]
	sl.val = v
	sl.kind = r.Kind
	sl.noResp = r.NoResponse
	sl.state = statePending
	sl.waits = 0
	sl.keys = sl.keys[:0]
	if s.mode == Connection {
		s.pending = append(s.pending, seq)
		return seq
	}
	s.undispatched++
	if sl.kind == Write && len(r.Keys) > MaxWriteKeys {
		sl.kind = Barrier
	}
	if sl.kind == Write {
		sl.keys = append(sl.keys, r.Keys...)
		s.keyBytes += int64(len(sl.keys)) * KeyStateBytes
	}
	if sl.kind == Write && s.later.len() == 0 && !s.barrier {
		s.activate(seq, sl)
	} else {
		s.later.push(seq)
	}
	return seq
}

// activate queues a write on each of its keys, dropping duplicate keys,
// and makes it ready if it is at the head of every queue.
func (s *Sequencer[T]) activate(seq uint64, sl *slot[T]) {
	s.active++
	if s.keyQueues == nil && len(sl.keys) > 0 {
		s.keyQueues = make(map[Key]keyTail)
	}
	if cap(sl.links) < len(sl.keys) {
		sl.links = make([]link, len(sl.keys))
	}
	sl.links = sl.links[:len(sl.keys)]
	kept := 0
	for _, k := range sl.keys {
		last, queued := s.keyQueues[k]
		if queued && last.seq == seq {
			continue // a duplicate within this write
		}
		i := uint32(kept)
		sl.keys[kept] = k
		sl.links[kept] = link{next: noSeq}
		kept++
		if queued {
			prev := s.slot(last.seq)
			prev.links[last.idx] = link{next: seq, nextIdx: i}
			sl.waits++
		}
		s.keyQueues[k] = keyTail{seq: seq, idx: i}
	}
	s.keyBytes -= int64(len(sl.keys)-kept) * KeyStateBytes
	s.keyPeak = max(s.keyPeak, len(s.keyQueues))
	sl.keys = sl.keys[:kept]
	sl.links = sl.links[:kept]
	if sl.waits == 0 {
		s.ready.push(seq)
	}
}

func (s *Sequencer[T]) grow() {
	n := 2 * len(s.ring)
	if n == 0 {
		n = 4
	}
	ring := make([]slot[T], n)
	for seq := s.head; seq < s.tail; seq++ {
		ring[seq&uint64(n-1)] = s.ring[seq&uint64(len(s.ring)-1)]
	}
	s.ring = ring
}

func (s *Sequencer[T]) slot(seq uint64) *slot[T] {
	if seq < s.head || seq >= s.tail {
		return nil
	}
	return &s.ring[seq&uint64(len(s.ring)-1)]
}

// Get returns the value pushed with seq, if seq is live.
func (s *Sequencer[T]) Get(seq uint64) (T, bool) {
	if sl := s.slot(seq); sl != nil {
		return sl.val, true
	}
	var zero T
	return zero, false
}

// Lookup finds the live sequence number whose low 31 bits are low31, which
// lets the proxy use those bits as upstream correlation ids: fewer than 2^31
// requests are ever live, so the match is unique.
func (s *Sequencer[T]) Lookup(low31 int32) (uint64, bool) {
	if low31 < 0 || s.head == s.tail {
		return 0, false
	}
	const mask = 1<<31 - 1
	seq := s.head + (uint64(uint32(low31)-uint32(s.head)) & mask)
	if seq >= s.tail {
		return 0, false
	}
	return seq, true
}

// Dispatch appends to dst every pending request that may now be forwarded,
// and marks them forwarded. In Connection mode they come in sequence order;
// in None mode writes come in the order they became free to go (writes
// returned by one call share no key), and a barrier comes alone.
func (s *Sequencer[T]) Dispatch(dst []T) []T {
	if s.mode == Connection {
		for _, seq := range s.pending {
			sl := s.slot(seq)
			sl.state = stateForwarded
			s.inflight++
			dst = append(dst, sl.val)
		}
		s.pending = s.pending[:0]
		return dst
	}
	for s.ready.len() > 0 {
		sl := s.slot(s.ready.pop())
		sl.state = stateForwarded
		s.inflight++
		s.undispatched--
		dst = append(dst, sl.val)
	}
	if s.active == 0 && !s.barrier && s.later.len() > 0 {
		// Only a barrier can head later while nothing is active.
		sl := s.slot(s.later.pop())
		sl.state = stateForwarded
		s.inflight++
		s.undispatched--
		s.barrier = true
		dst = append(dst, sl.val)
	}
	return dst
}

// Open reports whether a write pushed now with no keys would be returned
// by the next Dispatch while nothing pushed before it waits to be
// forwarded: no request is undispatched and no barrier is in flight. Only
// Push closes it, so a caller that alone pushes may act on it first. A
// write pushed while Open may learn its keys as it is forwarded (Extend)
// without the risk of waiting for a request that itself waits behind it.
// In Connection mode it is always true.
func (s *Sequencer[T]) Open() bool {
	if s.mode == Connection {
		return true
	}
	return s.undispatched == 0 && !s.barrier
}

// Extended says what Extend did.
type Extended uint8

const (
	// ExtendWait: an earlier live write holds the key, or the write is
	// too large to take it while others are live; nothing changed.
	ExtendWait Extended = iota
	// ExtendAdded: the write holds the key now, KeyStateBytes more.
	ExtendAdded
	// ExtendHeld: nothing to add; the write holds the key already, or is
	// a barrier.
	ExtendHeld
	// ExtendBarrier: the write grew past MaxWriteKeys and is a barrier
	// now; the keys it held are dropped, and their state with them.
	ExtendBarrier
)

// Extend adds key k to the write seq, the last one pushed, which Dispatch
// has returned: a request whose keys are learned while it is forwarded,
// before its last byte is sent. While an earlier live write holds k it
// reports ExtendWait, changing nothing; the caller waits for a Complete
// and tries again, and must not send the request's last byte before every
// key is added. A write that would hold more than MaxWriteKeys keys becomes
// a barrier once it is the only live write (ExtendWait until then), and
// every later Extend of it reports ExtendHeld. Pushed while Open, seq can
// only wait for writes already forwarded, so the wait ends. In Connection
// mode it reports ExtendHeld. An error says seq is not the last request
// pushed or is not in flight (answered before it was whole, by a faulty
// upstream).
func (s *Sequencer[T]) Extend(seq uint64, k Key) (Extended, error) {
	if s.mode == Connection {
		return ExtendHeld, nil
	}
	sl := s.slot(seq)
	switch {
	case sl == nil || seq != s.tail-1:
		return ExtendWait, fmt.Errorf("%w: %d is not the last request pushed", ErrUnknownSeq, seq)
	case sl.state == statePending:
		return ExtendWait, fmt.Errorf("%w: %d", ErrNotForwarded, seq)
	case sl.state == stateCompleted:
		return ExtendWait, fmt.Errorf("%w: %d", ErrCompleted, seq)
	case sl.kind == Barrier:
		return ExtendHeld, nil
	}
	last, queued := s.keyQueues[k]
	switch {
	case queued && last.seq == seq:
		return ExtendHeld, nil
	case queued:
		return ExtendWait, nil
	case len(sl.keys) >= MaxWriteKeys:
		if s.active != 1 {
			return ExtendWait, nil
		}
		for _, held := range sl.keys {
			delete(s.keyQueues, held)
		}
		s.dropEmptyKeyMap()
		s.keyBytes -= int64(len(sl.keys)) * KeyStateBytes
		s.shrink(sl)
		sl.kind = Barrier
		s.active--
		s.barrier = true
		return ExtendBarrier, nil
	}
	if s.keyQueues == nil {
		s.keyQueues = make(map[Key]keyTail)
	}
	s.keyQueues[k] = keyTail{seq: seq, idx: uint32(len(sl.keys))}
	sl.keys = append(sl.keys, k)
	sl.links = append(sl.links, link{next: noSeq})
	s.keyBytes += KeyStateBytes
	s.keyPeak = max(s.keyPeak, len(s.keyQueues))
	return ExtendAdded, nil
}

// Complete records that the upstream answered seq. In None mode this may
// let pending requests go; call Dispatch afterwards.
func (s *Sequencer[T]) Complete(seq uint64) error {
	sl := s.slot(seq)
	switch {
	case sl == nil:
		return fmt.Errorf("%w: %d", ErrUnknownSeq, seq)
	case sl.state == statePending:
		return fmt.Errorf("%w: %d", ErrNotForwarded, seq)
	case sl.state == stateCompleted:
		return fmt.Errorf("%w: %d", ErrCompleted, seq)
	}
	sl.state = stateCompleted
	s.inflight--
	for s.open < s.tail && s.ring[s.open&uint64(len(s.ring)-1)].state == stateCompleted {
		s.open++
	}
	if s.mode == Connection {
		return nil
	}
	if sl.kind == Barrier {
		s.barrier = false
		s.activateLater()
		return nil
	}
	s.active--
	for i, k := range sl.keys {
		next := sl.links[i]
		if next.next == noSeq {
			delete(s.keyQueues, k)
			continue
		}
		w := s.slot(next.next)
		if w.waits--; w.waits == 0 {
			s.ready.push(next.next)
		}
	}
	s.keyBytes -= int64(len(sl.keys)) * KeyStateBytes
	s.shrink(sl)
	s.dropEmptyKeyMap()
	if s.active == 0 {
		s.activateLater()
	}
	return nil
}

// activateLater makes active the writes that follow a completed barrier,
// up to the next barrier, which then waits for them.
func (s *Sequencer[T]) activateLater() {
	if s.barrier || s.active > 0 {
		return
	}
	for s.later.len() > 0 {
		seq := s.later.front()
		sl := s.slot(seq)
		if sl.kind == Barrier {
			return
		}
		s.later.pop()
		s.activate(seq, sl)
	}
}

// dropEmptyKeyMap lets an empty key map that grew past keepKeys go, so
// that the memory of its largest moment is not kept by an idle connection.
func (s *Sequencer[T]) dropEmptyKeyMap() {
	if len(s.keyQueues) == 0 && s.keyPeak > keepKeys {
		s.keyQueues, s.keyPeak = nil, 0
	}
}

// shrink drops the key state of a completed write.
func (s *Sequencer[T]) shrink(sl *slot[T]) {
	if cap(sl.keys) > keepKeys {
		sl.keys, sl.links = nil, nil
		return
	}
	sl.keys, sl.links = sl.keys[:0], sl.links[:0]
}

// Ready appends to dst, in sequence order, the values of every completed
// request at the head of the sequence whose client expects a response, and
// releases them (and any completed NoResponse requests among them).
func (s *Sequencer[T]) Ready(dst []T) []T {
	var zero T
	for s.head < s.tail {
		sl := &s.ring[s.head&uint64(len(s.ring)-1)]
		if sl.state != stateCompleted {
			break
		}
		if !sl.noResp {
			dst = append(dst, sl.val)
		}
		sl.val = zero
		s.head++
	}
	return dst
}

// Drain releases and returns, in sequence order, the values of every live
// request, whatever its state, leaving the sequencer empty. The proxy calls
// it when the connection dies to return buffers.
func (s *Sequencer[T]) Drain(dst []T) []T {
	var zero T
	for ; s.head < s.tail; s.head++ {
		sl := &s.ring[s.head&uint64(len(s.ring)-1)]
		dst = append(dst, sl.val)
		sl.val = zero
		s.shrink(sl)
	}
	s.open = s.tail
	s.pending = s.pending[:0]
	s.ready.reset()
	s.later.reset()
	s.inflight, s.active, s.keyBytes, s.undispatched = 0, 0, 0, 0
	s.barrier = false
	clear(s.keyQueues)
	s.dropEmptyKeyMap()
	return dst
}

// Idle reports whether nothing is live: every pushed request has completed
// and been released.
func (s *Sequencer[T]) Idle() bool { return s.head == s.tail }

// Leaks reports state that should be empty when Idle: for tests and
// assertions, a non-nil error describes what is left.
func (s *Sequencer[T]) Leaks() error {
	if !s.Idle() {
		return fmt.Errorf("ordering: %d requests live", s.Len())
	}
	if len(s.pending) != 0 || s.ready.len() != 0 || s.later.len() != 0 || s.inflight != 0 || s.active != 0 ||
		s.barrier || len(s.keyQueues) != 0 || s.bytes != 0 || s.keyBytes != 0 || s.undispatched != 0 {
		return fmt.Errorf("ordering: leftover state: pending=%d ready=%d later=%d inflight=%d active=%d barrier=%v keys=%d bytes=%d keybytes=%d undispatched=%d",
			len(s.pending), s.ready.len(), s.later.len(), s.inflight, s.active, s.barrier, len(s.keyQueues), s.bytes, s.keyBytes, s.undispatched)
	}
	return nil
}
