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

// Request describes one request to Push.
type Request struct {
	Kind Kind
	// Keys is what a Write touches; copied by Push. A Write with no keys
	// touches nothing and never waits for another write.
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

type slot[T any] struct {
	val    T
	keys   []Key
	kind   Kind
	state  state
	noResp bool
}

// Sequencer orders one connection's requests and responses. It is not safe
// for concurrent use; the zero value is not usable, use New.
type Sequencer[T any] struct {
	mode Mode

	ring       []slot[T] // power-of-two length, grows up to fit maxInFlight
	head, tail uint64    // head: oldest unreleased seq; tail: next seq

	maxInFlight int
	maxBytes    int64
	bytes       int64

	// None mode state.
	pending  []uint64      // pushed, not yet forwarded, in seq order
	inflight int           // forwarded, not completed
	barrier  bool          // a barrier is forwarded and not completed
	keys     map[Key]int32 // forwarded, uncompleted writes per key
	blocked  map[Key]struct{}
}

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

// Full reports whether the connection must stop reading: too many live
// requests, or more bytes held than allowed while anything is live.
func (s *Sequencer[T]) Full() bool {
	live := s.Len()
	return live >= s.maxInFlight || (live > 0 && s.bytes >= s.maxBytes)
}

// Head returns the oldest sequence number not yet released by Ready.
func (s *Sequencer[T]) Head() uint64 { return s.head }

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
	sl.keys = append(sl.keys[:0], r.Keys...)
	sl.noResp = r.NoResponse
	sl.state = statePending
	s.pending = append(s.pending, seq)
	return seq
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
// in the order they must be written upstream, and marks them forwarded.
func (s *Sequencer[T]) Dispatch(dst []T) []T {
	if len(s.pending) == 0 {
		return dst
	}
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
	if s.barrier {
		return dst
	}
	if s.blocked == nil {
		s.blocked = make(map[Key]struct{})
	}
	clear(s.blocked)
	kept := s.pending[:0]
	for i, seq := range s.pending {
		sl := s.slot(seq)
		if sl.kind == Barrier {
			if len(kept) == 0 && s.inflight == 0 {
				s.forward(sl)
				s.barrier = true
				dst = append(dst, sl.val)
				kept = append(kept, s.pending[i+1:]...)
			} else {
				kept = append(kept, s.pending[i:]...)
			}
			break
		}
		if s.conflicts(sl.keys) {
			for _, k := range sl.keys {
				s.blocked[k] = struct{}{}
			}
			kept = append(kept, seq)
			continue
		}
		s.forward(sl)
		dst = append(dst, sl.val)
	}
	s.pending = kept
	return dst
}

func (s *Sequencer[T]) conflicts(keys []Key) bool {
	for _, k := range keys {
		if _, ok := s.blocked[k]; ok {
			return true
		}
		if s.keys[k] > 0 {
			return true
		}
	}
	return false
}

func (s *Sequencer[T]) forward(sl *slot[T]) {
	sl.state = stateForwarded
	s.inflight++
	if sl.kind == Write && len(sl.keys) > 0 {
		if s.keys == nil {
			s.keys = make(map[Key]int32)
		}
		for _, k := range sl.keys {
			s.keys[k]++
		}
	}
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
	if s.mode == None {
		if sl.kind == Barrier {
			s.barrier = false
		} else {
			for _, k := range sl.keys {
				if n := s.keys[k] - 1; n > 0 {
					s.keys[k] = n
				} else {
					delete(s.keys, k)
				}
			}
		}
	}
	return nil
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
	}
	s.pending = s.pending[:0]
	s.inflight = 0
	s.barrier = false
	clear(s.keys)
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
	if len(s.pending) != 0 || s.inflight != 0 || s.barrier || len(s.keys) != 0 || s.bytes != 0 {
		return fmt.Errorf("ordering: leftover state: pending=%d inflight=%d barrier=%v keys=%d bytes=%d",
			len(s.pending), s.inflight, s.barrier, len(s.keys), s.bytes)
	}
	return nil
}
