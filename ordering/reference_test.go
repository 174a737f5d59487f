package ordering

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// reference is the None-mode dispatch rule in its most direct form, as the
// sequencer computed it before it kept per-key wait queues: on every event
// it rescans every pending request. It is the model the differential test
// compares the sequencer with, and the "before" of the benchmarks.
type reference struct {
	capKeys  bool // apply MaxWriteKeys as the sequencer does
	kinds    map[uint64]Kind
	keys     map[uint64][]Key
	pending  []uint64
	inflight int
	barrier  bool
	busy     map[Key]int
	blocked  map[Key]struct{}
	next     uint64
}

func newReference(capKeys bool) *reference {
	return &reference{capKeys: capKeys, kinds: map[uint64]Kind{}, keys: map[uint64][]Key{}, busy: map[Key]int{}, blocked: map[Key]struct{}{}}
}

func (r *reference) push(req Request) uint64 {
	seq := r.next
	r.next++
	kind := req.Kind
	if r.capKeys && kind == Write && len(req.Keys) > MaxWriteKeys {
		kind = Barrier
	}
	r.kinds[seq] = kind
	if kind == Write {
		r.keys[seq] = req.Keys
	}
	r.pending = append(r.pending, seq)
	return seq
}

func (r *reference) dispatch(dst []uint64) []uint64 {
	if r.barrier || len(r.pending) == 0 {
		return dst
	}
	clear(r.blocked)
	kept := r.pending[:0]
	for i, seq := range r.pending {
		if r.kinds[seq] == Barrier {
			if len(kept) == 0 && r.inflight == 0 {
				r.inflight++
				r.barrier = true
				dst = append(dst, seq)
				kept = append(kept, r.pending[i+1:]...)
			} else {
				kept = append(kept, r.pending[i:]...)
			}
			break
		}
		conflict := false
		for _, k := range r.keys[seq] {
			if _, ok := r.blocked[k]; ok || r.busy[k] > 0 {
				conflict = true
				break
			}
		}
		if conflict {
			for _, k := range r.keys[seq] {
				r.blocked[k] = struct{}{}
			}
			kept = append(kept, seq)
			continue
		}
		r.inflight++
		for _, k := range r.keys[seq] {
			r.busy[k]++
		}
		dst = append(dst, seq)
	}
	r.pending = kept
	return dst
}

func (r *reference) complete(seq uint64) {
	r.inflight--
	if r.kinds[seq] == Barrier {
		r.barrier = false
	}
	for _, k := range r.keys[seq] {
		if r.busy[k]--; r.busy[k] == 0 {
			delete(r.busy, k)
		}
	}
	delete(r.kinds, seq)
	delete(r.keys, seq)
}

// TestMatchesReference drives the sequencer and the reference with the same
// random requests and completions: after every event both must forward the
// same set of requests. Wide writes (over MaxWriteKeys keys) are mixed in.
func TestMatchesReference(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New[uint64](None, 64, 1<<40)
		ref := newReference(true)
		var inflight []uint64
		var got, want []uint64
		check := func(event string) {
			got = s.Dispatch(got[:0])
			want = ref.dispatch(want[:0])
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d after %s: sequencer forwarded %v, reference %v", seed, event, got, want)
			}
			inflight = append(inflight, got...)
		}
		for step := 0; step < 400; step++ {
			if !s.Full() && (len(inflight) == 0 || rng.IntN(2) == 0) {
				req := Request{}
				switch rng.IntN(10) {
				case 0:
				case 1:
					req.Kind = Write
					for range MaxWriteKeys + 1 + rng.IntN(3) {
						req.Keys = append(req.Keys, Key(rng.IntN(2000)))
					}
				default:
					req.Kind = Write
					for range rng.IntN(4) {
						req.Keys = append(req.Keys, Key(rng.IntN(8)))
					}
				}
				seq := s.Push(req, s.tail)
				if rseq := ref.push(req); rseq != seq {
					t.Fatalf("seq %d vs %d", seq, rseq)
				}
				check("push")
				continue
			}
			if len(inflight) == 0 {
				t.Fatalf("seed %d: nothing in flight and nothing pushable", seed)
			}
			i := rng.IntN(len(inflight))
			seq := inflight[i]
			inflight = slices.Delete(inflight, i, i+1)
			if err := s.Complete(seq); err != nil {
				t.Fatal(err)
			}
			ref.complete(seq)
			s.Ready(nil)
			check("complete")
		}
	}
}
