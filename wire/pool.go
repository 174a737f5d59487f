package wire

import (
	"math/bits"
	"sync"
)

// Buf is a pooled byte buffer. B is the bytes in use; Put returns it.
type Buf struct {
	B []byte
}

// Buffers of up to 1<<maxClassShift bytes come from per-class pools and
// cost their class's power of two. Larger ones are made to measure and
// dropped when put back: they are the rare frames a client or an upstream
// makes the proxy read whole, and a pool would keep them alive outside the
// memory budget (a buffer put back is no longer charged, but a pool keeps
// it for two garbage collections), so that budget plus pools could exceed
// --max-memory by as much as the largest frames that were just released.
const (
	minClassShift = 9  // 512 B
	maxClassShift = 20 // 1 MiB
)

var pools [maxClassShift - minClassShift + 1]sync.Pool

func class(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// Cap returns the capacity of the buffer Get(n) returns, which is what a
// buffer of n bytes costs.
func Cap(n int) int {
	c := class(n)
	if c >= len(pools) {
		return n
	}
	return 1 << (c + minClassShift)
}

// Get returns a buffer whose B has length n and capacity Cap(n).
func Get(n int) *Buf {
	c := class(n)
	if c >= len(pools) {
		return &Buf{B: make([]byte, n)}
	}
	if v := pools[c].Get(); v != nil {
		b := v.(*Buf)
		b.B = b.B[:n]
		return b
	}
	return &Buf{B: make([]byte, n, 1<<(c+minClassShift))}
}

// Put returns b for reuse; b must not be used afterwards. Nil is ignored.
func Put(b *Buf) {
	if b == nil {
		return
	}
	c := cap(b.B)
	if c < 1<<minClassShift || c&(c-1) != 0 {
		return
	}
	idx := bits.Len(uint(c)) - 1 - minClassShift
	if idx >= len(pools) {
		return
	}
	b.B = b.B[:0]
	pools[idx].Put(b)
}
