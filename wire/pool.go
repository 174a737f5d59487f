package wire

import (
	"math/bits"
	"sync"
)

// Buf is a pooled byte buffer. B is the bytes in use; Put returns it.
type Buf struct {
	B []byte
}

const (
	minClassShift = 9  // 512 B
	maxClassShift = 31 // 2 GiB
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
