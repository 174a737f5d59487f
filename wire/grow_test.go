package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"
)

// countingAccount records what is reserved, its peak, and can refuse.
type countingAccount struct {
	held, peak int
	limit      int // 0: no limit
}

var errNoMemory = errors.New("no memory")

func (a *countingAccount) Reserve(n int) error {
	if a.limit > 0 && a.held+n > a.limit {
		return errNoMemory
	}
	a.held += n
	a.peak = max(a.peak, a.held)
	return nil
}

func (a *countingAccount) Release(n int) { a.held -= n }

func frameOf(n int) []byte {
	f := make([]byte, 4+n)
	binary.BigEndian.PutUint32(f, uint32(n))
	for i := range n {
		f[4+i] = byte(i * 7)
	}
	return f
}

// chunkReader returns at most a random number of bytes per Read.
type chunkReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if n := 1 + c.rng.IntN(9000); n < len(p) {
		p = p[:n]
	}
	return c.r.Read(p)
}

func TestReadFrameGrows(t *testing.T) {
	var lb [4]byte
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{MinRequestFrame, 4091, 4092, 4093, 40000, 1<<20 + 3} {
		f := frameOf(n)
		for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(f)), &chunkReader{bytes.NewReader(f), rng}, bytes.NewReader(f)} {
			var acct countingAccount
			b, err := ReadFrameAccount(r, &lb, MinRequestFrame, 2<<20, &acct)
			if err != nil || !bytes.Equal(b.B, f) {
				t.Fatalf("frame of %d: %v (equal %v)", n, err, err == nil && bytes.Equal(b.B, f))
			}
			if acct.held != cap(b.B) {
				t.Fatalf("frame of %d: %d reserved for a buffer of capacity %d", n, acct.held, cap(b.B))
			}
			// The peak is the final buffer and the smaller one it grew from.
			if limit := 2 * Cap(4+n); acct.peak > limit {
				t.Fatalf("frame of %d: peak reservation %d above %d", n, acct.peak, limit)
			}
			acct.Release(cap(b.B))
			Put(b)
		}
	}
}

// TestLengthPrefixAllocatesNothingLarge sends 100 MiB prefixes followed by
// a trickle: what is reserved and what is allocated follow the bytes that
// arrived, not the declared size.
func TestLengthPrefixAllocatesNothingLarge(t *testing.T) {
	for _, factor := range []int{GrowFactor, TrustedGrowFactor} {
		t.Run(fmt.Sprintf("factor%d", factor), func(t *testing.T) { testLengthPrefix(t, factor) })
	}
}

// readGrowing is ReadFrameAccount with the growth factor given.
func readGrowing(r io.Reader, max int32, acct Account, factor int) (*Buf, error) {
	var lb [4]byte
	size, err := ReadLength(r, &lb, MinRequestFrame, max)
	if err != nil {
		return nil, err
	}
	b, err := Start(lb[:], 4+int(size), acct)
	if err != nil {
		return nil, err
	}
	return Grow(r, b, 4+int(size), acct, factor)
}

func testLengthPrefix(t *testing.T, factor int) {
	const declared = 100 << 20
	for _, sent := range []int{0, 10, FirstChunk + 1, 100 << 10} {
		stream := frameOf(declared)[:4+sent]
		var acct countingAccount
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := readGrowing(bytes.NewReader(stream), 128<<20, &acct, factor)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes of a 100 MiB frame: %v, want ErrTruncated", sent, err)
		}
		bound := FirstChunk + 2*factor*sent
		if acct.peak > bound {
			t.Fatalf("%d bytes of a 100 MiB frame reserved %d bytes at peak, above %d", sent, acct.peak, bound)
		}
		if acct.held != 0 {
			t.Fatalf("%d bytes still reserved after the read failed", acct.held)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > uint64(bound)+64<<10 {
			t.Fatalf("%d bytes of a 100 MiB frame allocated %d bytes", sent, n)
		}
	}
}

func TestReadFrameAccountRefuses(t *testing.T) {
	var lb [4]byte
	f := frameOf(100 << 10)
	acct := countingAccount{limit: 64 << 10}
	if _, err := ReadFrameAccount(bytes.NewReader(f), &lb, MinRequestFrame, 1<<20, &acct); !errors.Is(err, errNoMemory) {
		t.Fatalf("got %v, want the account's refusal", err)
	}
	if acct.held != 0 {
		t.Fatalf("%d bytes still reserved after a refusal", acct.held)
	}
}

// BenchmarkReadFrameGrowing prints what growing costs against reading into a
// buffer of the declared size at once, for frames already in memory (the
// worst case for growing: every chunk fills at once and is copied).
func BenchmarkReadFrameGrowing(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		f := frameOf(n)
		var lb [4]byte
		b.Run(sizeName(n)+"/whole", func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				r := bytes.NewReader(f)
				size, _ := ReadLength(r, &lb, MinRequestFrame, 2<<20)
				buf := Get(4 + int(size))
				copy(buf.B, lb[:])
				if err := ReadBody(r, buf.B[4:]); err != nil {
					b.Fatal(err)
				}
				Put(buf)
			}
		})
		for _, g := range []struct {
			name   string
			factor int
		}{{"growing", GrowFactor}, {"growing-trusted", TrustedGrowFactor}} {
			b.Run(sizeName(n)+"/"+g.name, func(b *testing.B) {
				b.SetBytes(int64(len(f)))
				b.ReportAllocs()
				for b.Loop() {
					buf, err := readGrowing(bytes.NewReader(f), 2<<20, nil, g.factor)
					if err != nil {
						b.Fatal(err)
					}
					Put(buf)
				}
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// queuedReader is a reader whose bytes have all arrived: it says so
// (Queued), and counts its reads.
type queuedReader struct {
	r     *bytes.Reader
	reads int
}

func (q *queuedReader) Read(p []byte) (int, error) {
	q.reads++
	return q.r.Read(p)
}

func (q *queuedReader) Queued() int { return q.r.Len() }

// TestGrowTakesWhatArrived: a frame that has arrived whole is read in two
// calls (the first chunk, then the rest into a buffer of the whole frame)
// and copied once, however large; a peer that has sent part of a large
// frame gets a buffer for what it sent, within the bound on what it sent.
func TestGrowTakesWhatArrived(t *testing.T) {
	for _, n := range []int{40000, 1 << 20, 8<<20 + 3} {
		f := frameOf(n)
		q := &queuedReader{r: bytes.NewReader(f)}
		var acct countingAccount
		b, err := readGrowing(q, 16<<20, &acct, GrowFactor)
		if err != nil || !bytes.Equal(b.B, f) {
			t.Fatalf("frame of %d: %v", n, err)
		}
		// The prefix, the first chunk, the rest.
		if q.reads != 3 {
			t.Fatalf("frame of %d read in %d calls, want 3", n, q.reads)
		}
		if limit := Cap(FirstChunk) + Cap(4+n); acct.peak > limit {
			t.Fatalf("frame of %d: peak reservation %d above %d", n, acct.peak, limit)
		}
		acct.Release(cap(b.B))
		Put(b)
	}
	const declared = 100 << 20
	for _, sent := range []int{FirstChunk + 1, 100 << 10, 1 << 20} {
		q := &queuedReader{r: bytes.NewReader(frameOf(declared)[:4+sent])}
		var acct countingAccount
		if _, err := readGrowing(q, 128<<20, &acct, GrowFactor); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes of a 100 MiB frame: %v, want ErrTruncated", sent, err)
		}
		if bound := FirstChunk + 2*GrowFactor*sent; acct.peak > bound {
			t.Fatalf("%d bytes of a 100 MiB frame reserved %d bytes at peak, above %d", sent, acct.peak, bound)
		}
		// Each growth takes everything queued: a read for the first
		// chunk, one for the rest, and the one that finds the end.
		if q.reads > 4 {
			t.Fatalf("%d bytes of a 100 MiB frame read in %d calls", sent, q.reads)
		}
	}
}
