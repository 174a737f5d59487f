package ordering

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExtendProperty drives a None-mode sequencer through random writes and
// barriers, some of which learn their keys while forwarded (a streamed
// request): pushed with no keys while the sequencer is Open, then extended
// key by key, completing other requests while Extend refuses. A model of the live writes checks that no
// two forwarded writes ever share a key, that no barrier overlaps anything,
// that Extend refuses only while another live write holds the key (or a
// write too wide waits to become a barrier), and that the wait always ends.
func TestExtendProperty(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		extendRun(t, seed)
	}
}

type liveReq struct {
	seq     uint64
	kind    Kind
	keys    []Key
	out     bool // forwarded
	streams bool // keys still being added
}

func extendRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	s := New[*liveReq](None, 64, 1<<40)
	live := map[uint64]*liveReq{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	check := func(r *liveReq) {
		for _, o := range live {
			if o == r || !o.out {
				continue
			}
			if r.kind == Barrier || o.kind == Barrier {
				fail("request %d (kind %d) forwarded while %d (kind %d) is in flight", r.seq, r.kind, o.seq, o.kind)
			}
			for _, k := range r.keys {
				if slices.Contains(o.keys, k) {
					fail("write %d holds key %d with write %d", r.seq, k, o.seq)
				}
			}
		}
	}
	var batch []*liveReq
	dispatch := func() {
		batch = s.Dispatch(batch[:0])
		for _, r := range batch {
			check(r)
			r.out = true
		}
	}
	completeOne := func(except uint64) bool {
		var outs []*liveReq
		for _, r := range live {
			if r.out && r.seq != except {
				outs = append(outs, r)
			}
		}
		if len(outs) == 0 {
			return false
		}
		slices.SortFunc(outs, func(a, b *liveReq) int { return int(a.seq) - int(b.seq) })
		r := outs[rng.IntN(len(outs))]
		if err := s.Complete(r.seq); err != nil {
			fail("complete %d: %v", r.seq, err)
		}
		delete(live, r.seq)
		var zero []*liveReq
		s.Ready(zero)
		dispatch()
		return true
	}
	randKeys := func(n int) []Key {
		var ks []Key
		for range n {
			ks = append(ks, Key(rng.IntN(6)))
		}
		return ks
	}
	for step := 0; step < 400; step++ {
		switch {
		case rng.IntN(3) == 0 && len(live) > 0:
			completeOne(^uint64(0))
		case s.Full():
			completeOne(^uint64(0))
		default:
			r := &liveReq{kind: Write, keys: randKeys(1 + rng.IntN(2))}
			if rng.IntN(10) == 0 {
				r.kind, r.keys = Barrier, nil
			}
			streamed := r.kind == Write && rng.IntN(2) == 0 && s.Open()
			var more []Key
			if streamed {
				more, r.keys = r.keys, nil
			}
			req := Request{Kind: r.kind, Keys: r.keys}
			r.seq = s.Push(req, r)
			slices.Sort(r.keys)
			r.keys = slices.Compact(r.keys) // as the sequencer keeps them
			live[r.seq] = r
			dispatch()
			if !streamed {
				continue
			}
			if !r.out {
				fail("write %d: pushed while Open, but not dispatched", r.seq)
			}
			more = append(more, randKeys(rng.IntN(4))...)
			if rng.IntN(20) == 0 {
				for i := range MaxWriteKeys + 5 {
					more = append(more, Key(100+i))
				}
			}
			for _, k := range more {
				for {
					before := s.Bytes()
					did, err := s.Extend(r.seq, k)
					if err != nil {
						fail("Extend(%d, %d): %v", r.seq, k, err)
					}
					delta := s.Bytes() - before
					switch did {
					case ExtendAdded:
						if delta != KeyStateBytes {
							fail("Extend(%d, %d) added a key, state grew by %d", r.seq, k, delta)
						}
					case ExtendHeld:
						if delta != 0 || (r.kind != Barrier && !slices.Contains(r.keys, k)) {
							fail("Extend(%d, %d) reported the key held (state grew by %d)", r.seq, k, delta)
						}
					case ExtendBarrier:
						if delta != -int64(len(r.keys))*KeyStateBytes {
							fail("Extend(%d, %d) made a barrier of a write with %d keys, state changed by %d", r.seq, k, len(r.keys), delta)
						}
					case ExtendWait:
						if delta != 0 {
							fail("Extend(%d, %d) refused, state changed by %d", r.seq, k, delta)
						}
					}
					if did != ExtendWait {
						break
					}
					held := false
					for _, o := range live {
						if o != r && slices.Contains(o.keys, k) {
							held = true
						}
					}
					if !held && len(r.keys) < MaxWriteKeys {
						fail("Extend(%d, %d) refused with no other write holding the key", r.seq, k)
					}
					if !completeOne(r.seq) {
						fail("Extend(%d, %d) refused with nothing else in flight", r.seq, k)
					}
				}
				if r.kind == Barrier {
					continue
				}
				if len(r.keys) >= MaxWriteKeys && !slices.Contains(r.keys, k) {
					r.kind, r.keys = Barrier, nil
				} else if !slices.Contains(r.keys, k) {
					r.keys = append(r.keys, k)
				}
				check(r)
			}
		}
	}
	for len(live) > 0 {
		if !completeOne(^uint64(0)) {
			dispatch()
			if !completeOne(^uint64(0)) {
				fail("%d live, none in flight", len(live))
			}
		}
	}
	s.Ready(nil)
	if err := s.Leaks(); err != nil {
		fail("%v", err)
	}
}

func TestExtendRefusesWhatIsNotInFlight(t *testing.T) {
	s := New[int](None, 8, 1<<20)
	a := s.Push(Request{Kind: Write, Keys: []Key{1}}, 0)
	if _, err := s.Extend(a, 2); !errors.Is(err, ErrNotForwarded) {
		t.Fatalf("Extend before Dispatch: %v, want ErrNotForwarded", err)
	}
	s.Dispatch(nil)
	b := s.Push(Request{Kind: Write, Keys: []Key{3}}, 1)
	s.Dispatch(nil)
	if _, err := s.Extend(a, 2); !errors.Is(err, ErrUnknownSeq) {
		t.Fatalf("Extend of a request pushed before the last: %v, want ErrUnknownSeq", err)
	}
	if did, err := s.Extend(b, 1); did != ExtendWait || err != nil {
		t.Fatalf("Extend onto a key an earlier write holds: %v %v, want a refusal", did, err)
	}
	if err := s.Complete(a); err != nil {
		t.Fatal(err)
	}
	if did, err := s.Extend(b, 1); did != ExtendAdded || err != nil {
		t.Fatalf("Extend once the key is free: %v %v", did, err)
	}
	if did, err := s.Extend(b, 1); did != ExtendHeld || err != nil {
		t.Fatalf("Extend of a key the write holds: %v %v", did, err)
	}
	c := s.Push(Request{Kind: Write, Keys: []Key{1}}, 2)
	if len(s.Dispatch(nil)) != 0 {
		t.Fatal("a write on a key added by Extend went ahead of it")
	}
	if err := s.Complete(b); err != nil {
		t.Fatal(err)
	}
	if got := s.Dispatch(nil); len(got) != 1 {
		t.Fatalf("write %d not released after the extended write completed", c)
	}
	if _, err := s.Extend(b, 9); !errors.Is(err, ErrUnknownSeq) {
		t.Fatalf("Extend after completion: %v", err)
	}
}
