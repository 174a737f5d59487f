package wire

import (
	"io"
	"math/bits"
	"sync"
)

// Buf is a pooled byte buffer. B is the bytes in use; Put returns it.
type Buf struct {
	B []byte
	// Out, when set, holds bytes of B that a reader left outside it
	// (single's Fetch answers, their record sets parked in pipes): B
	// lacks them until Out gives them, and Put closes it. Nil for a
	// buffer whose bytes are all in B.
	Out io.Closer
	// Free, when set, gives B's memory back: B was not made by Get
	// (single's mapped frames, internal/pages), and Put calls Free
	// instead of pooling it. Nil for a pooled buffer.
	Free func()
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

// Frames larger than FineFrom are also pooled in finer classes: eight to
// each power of two, so that a frame's class exceeds it by at most an
// eighth where the next power of two could nearly double it. A part's
// Fetch answer is sized by the bytes its broker was asked for, often just
// above a power of two; made at its own size it was never reused, and
// the proxy then spent a fifth of its CPU zeroing new frames and
// collecting the old ones (BENCHMARKS.md).
const FineFrom = 64 << 10

// fineSteps is the number of classes from one power of two (exclusive) to
// the next (inclusive); the last is the power of two, pooled in pools.
const fineSteps = 8

var finePools [(maxClassShift - minFineShift + 1) * (fineSteps - 1)]sync.Pool

// minFineShift is the power of two at the top of the first fine range:
// FineFrom < n <= 1<<minFineShift.
const minFineShift = 17

// fineClass returns n's fine capacity and its index in finePools, or -1
// when that capacity is a power of two (pools) or out of range. n must be
// above FineFrom.
func fineClass(n int) (int, int) {
	k := bits.Len(uint(n - 1)) // 1<<(k-1) < n <= 1<<k
	if k > maxClassShift {
		return n, -1
	}
	step := 1 << (k - 1) / fineSteps
	steps := (n + step - 1) / step // fineSteps+1 .. 2*fineSteps
	if steps == 2*fineSteps {
		return 1 << k, -1
	}
	return steps * step, (k-minFineShift)*(fineSteps-1) + steps - fineSteps - 1
}

// FineCap returns the capacity of the buffer GetFine(n) returns, which is
// what it costs: Cap(n) up to FineFrom, above it n rounded up to the next
// eighth of the power of two below it.
func FineCap(n int) int {
	if n <= FineFrom {
		return Cap(n)
	}
	c, _ := fineClass(n)
	return c
}

// GetFine is Get with the finer classes above FineFrom: a buffer whose B
// has length n and capacity FineCap(n). Put takes it back.
func GetFine(n int) *Buf {
	if n <= FineFrom {
		return Get(n)
	}
	c, idx := fineClass(n)
	if idx < 0 {
		return Get(n)
	}
	if v := finePools[idx].Get(); v != nil {
		b := v.(*Buf)
		b.B = b.B[:n]
		return b
	}
	return &Buf{B: make([]byte, n, c)}
}

// Put returns b for reuse, or its memory to whoever made it (Free); b
// must not be used afterwards. Nil is ignored, and so is a buffer whose
// capacity is no class's.
func Put(b *Buf) {
	if b == nil {
		return
	}
	if b.Out != nil {
		b.Out.Close()
		b.Out = nil
	}
	if b.Free != nil {
		free := b.Free
		b.B, b.Free = nil, nil
		free()
		return
	}
	c := cap(b.B)
	if c > FineFrom && c&(c-1) != 0 {
		if fc, idx := fineClass(c); idx >= 0 && fc == c {
			b.B = b.B[:0]
			finePools[idx].Put(b)
		}
		return
	}
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
