package wire

import (
	"math/rand/v2"
	"testing"
)

// TestFineClasses: above FineFrom a buffer's class exceeds it by less than
// an eighth, GetFine's buffer has the length asked and the capacity
// FineCap says, and what Put takes back comes out of GetFine only for
// sizes of its class.
func TestFineClasses(t *testing.T) {
	sizes := []int{0, 1, FineFrom - 1, FineFrom, FineFrom + 1, 1 << 17, 1<<17 + 1, 3 << 19, 4103095, 1<<22 - 1, 1 << 22, 50 << 20}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		sizes = append(sizes, FineFrom+1+rng.IntN(64<<20))
	}
	for _, n := range sizes {
		c := FineCap(n)
		if n <= FineFrom && c != Cap(n) {
			t.Fatalf("FineCap(%d) = %d, want Cap's %d at or below FineFrom", n, c, Cap(n))
		}
		if n > FineFrom && (c < n || c-n >= n/8 || c > Cap(n)) {
			t.Fatalf("FineCap(%d) = %d: not within an eighth above it and at most Cap's %d", n, c, Cap(n))
		}
		for range 3 {
			b := GetFine(n)
			if len(b.B) != n || cap(b.B) != c {
				t.Fatalf("GetFine(%d): len %d cap %d, want len %d cap %d", n, len(b.B), cap(b.B), n, c)
			}
			Put(b)
		}
	}
}

// TestFineClassesAreDistinct: every fine capacity is its own class's
// largest size, and one more byte takes the next class.
func TestFineClassesAreDistinct(t *testing.T) {
	seen := map[int]bool{}
	for k := minFineShift; k <= 24; k++ {
		step := 1 << (k - 1) / fineSteps
		for s := fineSteps + 1; s <= 2*fineSteps; s++ {
			c := s * step
			if FineCap(c) != c {
				t.Fatalf("FineCap(%d) = %d, want the class itself", c, FineCap(c))
			}
			if next := FineCap(c + 1); s < 2*fineSteps && next != c+step {
				t.Fatalf("FineCap(%d) = %d, want %d", c+1, next, c+step)
			}
			if c&(c-1) != 0 {
				if _, idx := fineClass(c); idx < 0 || seen[idx] {
					t.Fatalf("class %d: index %d taken or missing", c, idx)
				} else {
					seen[idx] = true
				}
			}
		}
	}
}

// TestPutIgnoresOtherCapacities: a buffer of a capacity no class has is
// dropped rather than handed out as another size.
func TestPutIgnoresOtherCapacities(t *testing.T) {
	n := 3<<19 + 1 // in the fine class 3<<19 + 1<<17, not its size
	for range 10 {
		Put(&Buf{B: make([]byte, 0, n)})
	}
	for range 10 {
		if b := GetFine(n); cap(b.B) != FineCap(n) {
			t.Fatalf("GetFine(%d) has capacity %d, want %d", n, cap(b.B), FineCap(n))
		}
	}
}
