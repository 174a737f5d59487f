package ordering

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

type req struct {
	seq    uint64
	kind   Kind
	keys   []Key
	noResp bool
}

// simulate drives a sequencer through n random requests, completing
// forwarded requests in a random order, and checks every invariant of the
// package comment after every step.
func simulate(t *testing.T, mode Mode, seed uint64, n, maxInFlight int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := New[*req](mode, maxInFlight, 1<<40)
	var (
		pushed      int
		nextOut     uint64 // next seq expected out of Ready
		forwarded   []*req // in flight, in no particular order
		keyInFlight = map[Key]int{}
		lastFwd     = map[Key]uint64{}
		barrierOut  bool
		batch       []*req
		noResp      = map[uint64]bool{}
		done        = map[uint64]bool{}
		barriers    = map[uint64]bool{} // pushed, not yet forwarded
	)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d mode %d: "+format, append([]any{seed, mode}, args...)...)
	}
	dispatch := func() {
		batch = s.Dispatch(batch[:0])
		for _, r := range batch {
			if mode == None {
				if barrierOut {
					fail("request %d forwarded while a barrier is in flight", r.seq)
				}
				for b := range barriers {
					if b < r.seq {
						fail("request %d forwarded before earlier barrier %d", r.seq, b)
					}
				}
				if r.kind == Barrier {
					if len(forwarded) > 0 {
						fail("barrier %d forwarded with %d in flight", r.seq, len(forwarded))
					}
					for e := uint64(0); e < r.seq; e++ {
						if !done[e] {
							fail("barrier %d forwarded before %d completed", r.seq, e)
						}
					}
					delete(barriers, r.seq)
					barrierOut = true
				}
				for _, k := range r.keys {
					if keyInFlight[k] > 0 {
						fail("write %d forwarded while key %d in flight", r.seq, k)
					}
					if last, ok := lastFwd[k]; ok && last > r.seq {
						fail("write %d forwarded after later write %d on key %d", r.seq, last, k)
					}
					keyInFlight[k]++
					lastFwd[k] = r.seq
				}
			}
			forwarded = append(forwarded, r)
		}
	}
	release := func() {
		batch = s.Ready(batch[:0])
		for _, r := range batch {
			if r.noResp {
				fail("NoResponse request %d yielded a response", r.seq)
			}
			for nextOut < r.seq {
				if !noResp[nextOut] {
					fail("response %d skipped; got %d", nextOut, r.seq)
				}
				nextOut++
			}
			if r.seq != nextOut {
				fail("response %d out of order; want %d", r.seq, nextOut)
			}
			nextOut++
		}
	}
	for pushed < n || s.Len() > 0 {
		canPush := pushed < n && !s.Full()
		if canPush && (len(forwarded) == 0 || rng.IntN(3) > 0) {
			r := &req{}
			if rng.IntN(4) > 0 {
				r.kind = Write
				for _, k := range rng.Perm(5)[:rng.IntN(3)+1] {
					r.keys = append(r.keys, Key(k))
				}
				r.noResp = rng.IntN(8) == 0
			}
			r.seq = s.Push(Request{Kind: r.kind, Keys: r.keys, NoResponse: r.noResp}, r)
			if r.seq != uint64(pushed) {
				fail("push %d got seq %d", pushed, r.seq)
			}
			noResp[r.seq] = r.noResp
			if r.kind == Barrier && mode == None {
				barriers[r.seq] = true
			}
			pushed++
			dispatch()
			continue
		}
		if len(forwarded) == 0 {
			dispatch()
			if len(forwarded) == 0 {
				fail("no progress: %d live, %d pushed, nothing in flight", s.Len(), pushed)
			}
			continue
		}
		i := rng.IntN(len(forwarded))
		r := forwarded[i]
		forwarded[i] = forwarded[len(forwarded)-1]
		forwarded = forwarded[:len(forwarded)-1]
		owed := true
		for q := s.Head(); q < r.seq; q++ {
			owed = owed && done[q]
		}
		if got := s.NextOwed(r.seq); got != owed {
			fail("NextOwed(%d) = %v, want %v", r.seq, got, owed)
		}
		if err := s.Complete(r.seq); err != nil {
			fail("complete %d: %v", r.seq, err)
		}
		done[r.seq] = true
		if r.kind == Barrier {
			barrierOut = false
		}
		for _, k := range r.keys {
			if mode == None {
				keyInFlight[k]--
			}
		}
		release()
		dispatch()
	}
	release()
	for nextOut < uint64(n) && noResp[nextOut] {
		nextOut++
	}
	if nextOut != uint64(n) {
		fail("released %d of %d", nextOut, n)
	}
	if err := s.Leaks(); err != nil {
		fail("%v", err)
	}
}

func TestPropertyOrder(t *testing.T) {
	for _, mode := range []Mode{None, Connection} {
		for seed := uint64(0); seed < 300; seed++ {
			simulate(t, mode, seed, 200, 1+int(seed%17))
		}
	}
}

func TestNoneModeOverlapsDisjointWrites(t *testing.T) {
	s := New[int](None, 16, 1<<20)
	s.Push(Request{Kind: Write, Keys: []Key{1}}, 0)
	s.Push(Request{Kind: Write, Keys: []Key{2}}, 1)
	s.Push(Request{Kind: Write, Keys: []Key{1}}, 2)
	s.Push(Request{Kind: Write, Keys: []Key{3}}, 3)
	got := s.Dispatch(nil)
	if want := []int{0, 1, 3}; !equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	if err := s.Complete(0); err != nil {
		t.Fatal(err)
	}
	if got := s.Dispatch(nil); !equal(got, []int{2}) {
		t.Fatalf("after completing 0 dispatched %v, want [2]", got)
	}
}

func TestDuplicateKeysInOneWrite(t *testing.T) {
	s := New[int](None, 16, 1<<20)
	s.Push(Request{Kind: Write, Keys: []Key{1, 1}}, 0)
	s.Push(Request{Kind: Write, Keys: []Key{1}}, 1)
	if got := s.Dispatch(nil); !equal(got, []int{0}) {
		t.Fatalf("dispatched %v, want [0]", got)
	}
	mustComplete(t, s, 0)
	if got := s.Dispatch(nil); !equal(got, []int{1}) {
		t.Fatalf("dispatched %v, want [1]", got)
	}
	mustComplete(t, s, 1)
	s.Ready(nil)
	if err := s.Leaks(); err != nil {
		t.Fatal(err)
	}
}

func TestNoneModeBarrier(t *testing.T) {
	s := New[int](None, 16, 1<<20)
	s.Push(Request{Kind: Write, Keys: []Key{1}}, 0)
	s.Push(Request{Kind: Barrier}, 1)
	s.Push(Request{Kind: Write, Keys: []Key{2}}, 2)
	if got := s.Dispatch(nil); !equal(got, []int{0}) {
		t.Fatalf("dispatched %v, want [0]", got)
	}
	mustComplete(t, s, 0)
	if got := s.Dispatch(nil); !equal(got, []int{1}) {
		t.Fatalf("dispatched %v, want the barrier alone", got)
	}
	if got := s.Dispatch(nil); len(got) != 0 {
		t.Fatalf("dispatched %v while the barrier is in flight", got)
	}
	mustComplete(t, s, 1)
	if got := s.Dispatch(nil); !equal(got, []int{2}) {
		t.Fatalf("dispatched %v, want [2]", got)
	}
}

func TestReadyWaitsForHead(t *testing.T) {
	s := New[int](Connection, 16, 1<<20)
	for i := range 3 {
		s.Push(Request{}, i)
	}
	s.Dispatch(nil)
	mustComplete(t, s, 2)
	mustComplete(t, s, 1)
	if got := s.Ready(nil); len(got) != 0 {
		t.Fatalf("released %v before the head completed", got)
	}
	mustComplete(t, s, 0)
	if got := s.Ready(nil); !equal(got, []int{0, 1, 2}) {
		t.Fatalf("released %v", got)
	}
	if err := s.Leaks(); err != nil {
		t.Fatal(err)
	}
}

// TestNextOwed: a request is owed next once every request before it has
// completed, released or not; one behind an incomplete request is not.
func TestNextOwed(t *testing.T) {
	s := New[int](Connection, 16, 1<<20)
	for i := range 4 {
		s.Push(Request{}, i)
	}
	s.Dispatch(nil)
	owed := func() (got []uint64) {
		for q := range uint64(5) {
			if s.NextOwed(q) {
				got = append(got, q)
			}
		}
		return got
	}
	if got := owed(); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("owed next %v, want [0]", got)
	}
	mustComplete(t, s, 2)
	if got := owed(); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("owed next %v after 2 completed, want [0]", got)
	}
	mustComplete(t, s, 0)
	if got := owed(); !slices.Equal(got, []uint64{0, 1}) {
		t.Fatalf("owed next %v after 0 and 2 completed, want [0 1]", got)
	}
	s.Ready(nil)
	mustComplete(t, s, 1)
	if got := owed(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("owed next %v after 0 released and 1 completed, want [1 2 3]", got)
	}
}

func TestCompleteErrors(t *testing.T) {
	s := New[int](None, 16, 1<<20)
	s.Push(Request{Kind: Barrier}, 0)
	s.Push(Request{Kind: Barrier}, 1)
	if err := s.Complete(7); !errors.Is(err, ErrUnknownSeq) {
		t.Fatalf("unknown seq: %v", err)
	}
	s.Dispatch(nil)
	if err := s.Complete(1); !errors.Is(err, ErrNotForwarded) {
		t.Fatalf("pending seq: %v", err)
	}
	mustComplete(t, s, 0)
	if err := s.Complete(0); !errors.Is(err, ErrCompleted) {
		t.Fatalf("twice: %v", err)
	}
}

func TestFullBounds(t *testing.T) {
	s := New[int](Connection, 2, 100)
	if s.Full() {
		t.Fatal("empty sequencer is full")
	}
	s.Hold(500)
	if s.Full() {
		t.Fatal("a lone oversized request must be admitted when nothing is live")
	}
	s.Push(Request{}, 0)
	if !s.Full() {
		t.Fatal("bytes over the bound with a live request must be full")
	}
	s.Free(500)
	s.Push(Request{}, 1)
	if !s.Full() {
		t.Fatal("max in flight reached must be full")
	}
}

func TestLookupWraps(t *testing.T) {
	s := New[int](Connection, 8, 1<<20)
	s.head, s.tail = 1<<31-2, 1<<31-2
	for i := range 5 {
		s.Push(Request{}, i)
	}
	for seq := s.head; seq < s.tail; seq++ {
		got, ok := s.Lookup(int32(seq & (1<<31 - 1)))
		if !ok || got != seq {
			t.Fatalf("lookup of %d: %d %v", seq, got, ok)
		}
	}
	if _, ok := s.Lookup(int32(s.tail & (1<<31 - 1))); ok {
		t.Fatal("lookup of a seq not yet pushed succeeded")
	}
}

func mustComplete[T any](t *testing.T, s *Sequencer[T], seq uint64) {
	t.Helper()
	if err := s.Complete(seq); err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkConnectionMode(b *testing.B) {
	s := New[int](Connection, 64, 1<<30)
	var batch []int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seq := s.Push(Request{Kind: Write, Keys: []Key{Key(i % 12)}}, i)
		batch = s.Dispatch(batch[:0])
		_ = s.Complete(seq)
		batch = s.Ready(batch[:0])
	}
}

func BenchmarkNoneMode12Partitions(b *testing.B) {
	s := New[int](None, 64, 1<<30)
	keys := make([]Key, 12)
	for i := range keys {
		keys[i] = Key(i)
	}
	var batch []int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seq := s.Push(Request{Kind: Write, Keys: keys[i%12 : i%12+1]}, i)
		batch = s.Dispatch(batch[:0])
		_ = s.Complete(seq)
		batch = s.Ready(batch[:0])
	}
}

func TestWideWriteIsABarrier(t *testing.T) {
	s := New[int](None, 16, 1<<30)
	wide := make([]Key, MaxWriteKeys+1)
	for i := range wide {
		wide[i] = Key(i + 100)
	}
	if n := s.StateBytes(Request{Kind: Write, Keys: wide}); n != 0 {
		t.Fatalf("a write over the key limit would hold %d bytes of key state", n)
	}
	s.Push(Request{Kind: Write, Keys: []Key{1}}, 0)
	s.Push(Request{Kind: Write, Keys: wide}, 1)
	s.Push(Request{Kind: Write, Keys: []Key{2}}, 2)
	if got := s.Dispatch(nil); !equal(got, []int{0}) {
		t.Fatalf("dispatched %v, want [0]: the wide write waits for every earlier request", got)
	}
	if s.Bytes() != 2*KeyStateBytes {
		t.Fatalf("holds %d bytes, want the key state of the two narrow writes only", s.Bytes())
	}
	mustComplete(t, s, 0)
	if got := s.Dispatch(nil); !equal(got, []int{1}) {
		t.Fatalf("dispatched %v, want the wide write alone", got)
	}
	if got := s.Dispatch(nil); len(got) != 0 {
		t.Fatalf("dispatched %v while the wide write is in flight", got)
	}
	mustComplete(t, s, 1)
	if got := s.Dispatch(nil); !equal(got, []int{2}) {
		t.Fatalf("dispatched %v, want [2]", got)
	}
	mustComplete(t, s, 2)
	s.Ready(nil)
	if err := s.Leaks(); err != nil {
		t.Fatal(err)
	}
}

func TestKeyStateCountsTowardsFull(t *testing.T) {
	keys := make([]Key, 100)
	for i := range keys {
		keys[i] = Key(i)
	}
	bound := int64(150 * KeyStateBytes)
	s := New[int](None, 16, bound)
	r := Request{Kind: Write, Keys: keys}
	if got := s.StateBytes(r); got != 100*KeyStateBytes {
		t.Fatalf("StateBytes = %d, want %d", got, 100*KeyStateBytes)
	}
	s.Push(r, 0)
	if s.Full() {
		t.Fatal("full after one write of 100 keys under a bound of 150")
	}
	s.Push(r, 1)
	if !s.Full() {
		t.Fatalf("not full holding %d bytes of key state under a bound of %d", s.Bytes(), bound)
	}
	s.Dispatch(nil)
	mustComplete(t, s, 0)
	if s.Full() {
		t.Fatal("still full after the first write completed")
	}
	if New[int](Connection, 16, 1).StateBytes(r) != 0 {
		t.Fatal("connection mode holds no key state")
	}
}

// TestIdleKeepsNoWideKeyState: once wide writes have completed, the
// sequencer lets go of the key map they grew and of their slots' key
// slices, so that an idle connection does not hold what its widest moment
// needed; a narrow write's map is kept for reuse.
func TestIdleKeepsNoWideKeyState(t *testing.T) {
	s := New[int](None, 16, 1<<30)
	for w := range 4 {
		keys := make([]Key, MaxWriteKeys)
		for i := range keys {
			keys[i] = Key(w*MaxWriteKeys + i)
		}
		s.Push(Request{Kind: Write, Keys: keys}, w)
	}
	if got := s.Dispatch(nil); len(got) != 4 {
		t.Fatalf("dispatched %v, want the four disjoint writes", got)
	}
	for seq := range uint64(4) {
		if s.keyQueues == nil {
			t.Fatalf("key map dropped while %d writes are live", 4-seq)
		}
		mustComplete(t, s, seq)
	}
	s.Ready(nil)
	if err := s.Leaks(); err != nil {
		t.Fatal(err)
	}
	if s.keyQueues != nil {
		t.Fatalf("an idle sequencer keeps a key map grown to %d keys", 4*MaxWriteKeys)
	}
	for i := range s.ring {
		if cap(s.ring[i].keys) > keepKeys || cap(s.ring[i].links) > keepKeys {
			t.Fatalf("slot %d keeps room for %d keys", i, cap(s.ring[i].keys))
		}
	}
	s.Push(Request{Kind: Write, Keys: []Key{1, 2}}, 4)
	s.Dispatch(nil)
	mustComplete(t, s, 4)
	if s.keyQueues == nil {
		t.Fatal("the map of a narrow write was dropped; it is kept for reuse")
	}
}

// pipelineDriver is what benchPipelined drives: the sequencer or the
// reference.
type pipelineDriver interface {
	push(Request) uint64
	dispatch([]uint64) []uint64
	complete(uint64)
}

type seqDriver struct{ s *Sequencer[uint64] }

func (d seqDriver) push(r Request) uint64 { return d.s.Push(r, d.s.tail) }
func (d seqDriver) dispatch(dst []uint64) []uint64 {
	dst = d.s.Dispatch(dst)
	return dst
}
func (d seqDriver) complete(seq uint64) {
	if err := d.s.Complete(seq); err != nil {
		panic(err)
	}
	d.s.Ready(nil)
}

// benchPipelined measures the cost per request for one client keeping
// depth writes live, each touching width of partitions partitions (request
// i starts where i-1 ended, wrapping): each iteration completes the oldest
// in-flight write and pushes the next. Filling the pipeline is not timed.
func benchPipelined(b *testing.B, d pipelineDriver, depth, width, partitions int) {
	var keys [][]Key
	for i := range partitions / width {
		ks := make([]Key, width)
		for j := range ks {
			ks[j] = Key(i*width + j)
		}
		keys = append(keys, ks)
	}
	var inflight, batch []uint64
	next := 0
	push := func() {
		d.push(Request{Kind: Write, Keys: keys[next%len(keys)]})
		next++
		batch = d.dispatch(batch[:0])
		inflight = append(inflight, batch...)
	}
	for range depth {
		push()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		slices.Sort(inflight)
		d.complete(inflight[0])
		inflight = inflight[1:]
		batch = d.dispatch(batch[:0])
		inflight = append(inflight, batch...)
		push()
	}
}

// BenchmarkPipelinedWide prints, side by side, what the per-key wait
// queues cost per request against the rescanning reference: 512 pipelined
// writes of 1,000 partitions each over 100,000 partitions, and 64
// pipelined writes of all 100,000 partitions (which the sequencer turns
// into barriers).
func BenchmarkPipelinedWide(b *testing.B) {
	for _, c := range []struct {
		name                     string
		depth, width, partitions int
	}{
		{"depth512-width1000-of100k", 512, 1000, 100_000},
		{"depth64-width100k-of100k", 64, 100_000, 100_000},
	} {
		b.Run(c.name+"/reference", func(b *testing.B) {
			benchPipelined(b, newReference(false), c.depth, c.width, c.partitions)
		})
		b.Run(c.name+"/sequencer", func(b *testing.B) {
			benchPipelined(b, seqDriver{New[uint64](None, c.depth, 1<<40)}, c.depth, c.width, c.partitions)
		})
	}
}
