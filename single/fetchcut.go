package single

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/wire"
)

// A Fetch part's answer larger than the memory it can have now. A broker
// answers a part at most its max_bytes but for its first record batch
// (KIP-74), and the part's room holds that; one that answers more (a
// broker that is buggy or hostile) would need memory that may never
// come, and waiting for it stalls the consumer while the part fails and
// is asked again, forever. Such an answer is read as it streams and cut
// at a partition boundary, as a broker that reached max_bytes answers:
// partitions are kept whole while they fit in what can be reserved
// without waiting, and every later partition keeps its fields (error,
// watermarks, aborted transactions, preferred replica, tagged fields)
// but its record bytes are read and dropped, in bounded chunks, and it
// is answered with an empty record set. The client sees those
// partitions with no records and asks again from the same offsets; the
// result is a valid Fetch answer of the part's version, merged as any.

// cutRoom is the memory a cut answer's frame is reserved from, without
// waiting.
type cutRoom interface {
	TryReserve(n int) bool
	Release(n int)
}

// fetchCut says what cutFetchAnswer left out.
type fetchCut struct {
	dropped int   // partitions whose records were dropped
	bytes   int64 // record bytes dropped
}

// errCutRoom: not even a cut answer's fields found memory.
var errCutRoom = errors.New("no memory for the fields of a Fetch answer cut short")

// errCutMalformed wraps what does not parse in an answer being cut.
var errCutMalformed = errors.New("malformed Fetch answer")

// cutFetchAnswer reads a Fetch answer of version and total bytes (its
// length prefix included), whose first bytes, head, are read already (the
// length prefix and correlation id), from rd, and returns it cut as the
// comment above says: records are kept while the frame stays within most
// bytes. Its frame's capacity is reserved from room, which the caller
// charges; nothing is reserved when it fails. A frame that does not parse
// fails with errCutMalformed, rd then out of step. Bytes dropped are
// taken with drop when it is not nil, and otherwise read through a small
// buffer.
func cutFetchAnswer(rd io.Reader, drop dropper, park *cutPark, head []byte, total int, version int16, most int, room cutRoom) (*wire.Buf, fetchCut, error) {
	c := cutter{rd: rd, drop: drop, left: total - len(head), total: total, most: most, room: room}
	if c.left < 0 {
		return nil, fetchCut{}, errCutRoom
	}
	c.mapFrame(park)
	if !c.grow(len(head)) {
		c.putOut()
		return nil, fetchCut{}, errCutRoom
	}
	c.out = append(c.out, head...)
	c.body(version)
	if c.err == nil && c.left > 0 {
		// Bytes past the fields kmsg reads: dropped, as kmsg ignores
		// them.
		c.discard(c.left)
	}
	if c.err != nil {
		c.putOut()
		return nil, fetchCut{}, c.err
	}
	binary.BigEndian.PutUint32(c.out, uint32(len(c.out)-4))
	c.shrink()
	c.buf.B = c.out[:len(c.out):c.held]
	if len(c.parked.pipes) > 0 {
		c.buf.Out = &c.parked
	}
	return c.buf, c.cut, nil
}

// shrink moves a frame that kept much less than it was made for (its
// record sets larger than what it could keep) to a buffer of its own
// size, so that the answer holds no more memory than it has bytes while
// it waits to be merged and written.
func (c *cutter) shrink() {
	n := len(c.out)
	if wire.FineCap(n) > c.held/2 {
		return
	}
	if c.park != nil {
		// A mapped frame: the pages past n were never written, and
		// what is reserved for them is given back where they lie.
		c.room.Release(c.held - wire.FineCap(n))
		c.held = wire.FineCap(n)
		return
	}
	if !c.room.TryReserve(wire.FineCap(n)) {
		return
	}
	c.moveTo(n)
}

// moveTo moves out to a pooled buffer of size bytes, whose capacity the
// caller reserved in room, and gives the old one back.
func (c *cutter) moveTo(size int) {
	b := wire.GetFine(size)
	out := append(b.B[:0], c.out...)
	c.putOut()
	c.buf, c.out, c.held = b, out, cap(b.B)
}

// cutter is the state of one answer being cut: the frame made so far,
// whose capacity is reserved, and the bytes of the answer left to read.
type cutter struct {
	rd      io.Reader
	drop    dropper
	left    int
	total   int
	most    int
	room    cutRoom
	buf     *wire.Buf // out's buffer, pooled or mapped
	out     []byte
	held    int      // what is reserved in room for buf: its capacity, or a mapped one's part written to
	park    *cutPark // record sets kept are parked, out mapped (fetchcutpark.go)
	parked  parked   // the spans of out in pipes
	cutting bool     // a partition's records were dropped: every later one's are
	cut     fetchCut
	err     error
	scratch [5]byte
}

func (c *cutter) body(v int16) {
	flex := v >= 12
	if flex {
		c.tags() // the response header's
	}
	if v >= 1 {
		c.copyN(4) // throttle
	}
	if v >= 7 {
		c.copyN(2 + 4) // error code, session id
	}
	for range c.array(flex) {
		if v <= 12 {
			c.str(flex)
		} else {
			c.copyN(16) // topic id
		}
		for range c.array(flex) {
			c.copyN(4 + 2 + 8) // partition, error code, high watermark
			if v >= 4 {
				c.copyN(8) // last stable offset
			}
			if v >= 5 {
				c.copyN(8) // log start offset
			}
			if v >= 4 {
				for range c.array(flex) {
					c.copyN(8 + 8) // producer id, first offset
					if flex {
						c.tags()
					}
				}
			}
			if v >= 11 {
				c.copyN(4) // preferred read replica
			}
			c.records(flex)
			if flex {
				c.tags()
			}
		}
		if flex {
			c.tags()
		}
	}
	if flex {
		c.tags()
	}
}

// grow makes room in out for n more bytes, reserving it without waiting,
// and reports whether it could. out never outgrows the answer: a cut
// answer is no longer than the answer. The first size tried is the
// frame's last: an answer is cut only when it holds more than most, and
// the frame then keeps partitions up to most, short of one record set,
// so growing to it by doubling would make and zero twice its bytes for
// nothing; one that kept much less (record sets larger than it could
// keep) is moved to a frame of its size at the end (shrink). Frames come
// from wire's fine pools, so that a steady stream of cut answers reuses
// them.
func (c *cutter) grow(n int) bool {
	need := len(c.out) + n
	if need <= c.held {
		return true
	}
	if need > c.total {
		return false
	}
	last := min(max(c.most, need), c.total)
	for _, size := range []int{last, min(max(2*c.held, need, 4<<10), last), need} {
		if size < need || size <= c.held {
			continue
		}
		if c.park != nil {
			// Mapped at the answer's size: only the reservation
			// grows, the frame never moves (its holes would).
			if more := wire.FineCap(size) - c.held; c.room.TryReserve(more) {
				c.held += more
				return true
			}
			continue
		}
		if !c.room.TryReserve(wire.FineCap(size)) {
			continue
		}
		c.moveTo(size)
		return true
	}
	return false
}

// putOut gives out's memory back, to the room and to the pool.
func (c *cutter) putOut() {
	if c.buf == nil {
		return
	}
	c.room.Release(c.held)
	if len(c.parked.pipes) > 0 {
		c.buf.Out = &c.parked
	}
	wire.Put(c.buf)
	c.buf, c.out, c.held = nil, nil, 0
}

func (c *cutter) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", errCutMalformed, fmt.Sprintf(format, args...))
	}
}

// read reads n bytes of the answer into p.
func (c *cutter) read(p []byte) bool {
	if c.err != nil {
		return false
	}
	if len(p) > c.left {
		c.fail("a field of %d bytes runs past the frame's end", len(p))
		return false
	}
	if _, err := io.ReadFull(c.rd, p); err != nil {
		c.failRead(err)
		return false
	}
	c.left -= len(p)
	return true
}

// copyN copies the next n bytes of the answer to out and returns them.
func (c *cutter) copyN(n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > c.left {
		c.fail("a field of %d bytes runs past the frame's end", n)
		return nil
	}
	if !c.grow(n) {
		c.err = errCutRoom
		return nil
	}
	at := len(c.out)
	c.out = c.out[:at+n]
	if !c.read(c.out[at:]) {
		c.out = c.out[:at]
		return nil
	}
	return c.out[at:]
}

// uvarint reads an unsigned varint of at most 32 bits, as Kafka's
// flexible versions write them, into scratch, and returns it and its
// bytes, which are not copied to out.
func (c *cutter) uvarint() (uint32, []byte) {
	var v uint32
	for i := range 5 {
		if !c.read(c.scratch[i : i+1]) {
			return 0, nil
		}
		b := c.scratch[i]
		if i == 4 && b > 0x0f {
			break
		}
		v |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, c.scratch[:i+1]
		}
	}
	c.fail("a varint overflows 32 bits")
	return 0, nil
}

// length reads a length or an array's count (an int16 or int32, or in a
// flexible version an unsigned varint of it plus one), copies it to out
// when keep, and returns it, negative for null (and for an array, any
// count that is negative as an int32 is none, as kmsg reads it). One
// larger than what is left of the answer fails: whatever it counts takes
// at least a byte each.
func (c *cutter) length(flex, array bool, width int, keep bool) int {
	var n int
	var raw []byte
	if flex {
		v, b := c.uvarint()
		if b == nil {
			return 0
		}
		n, raw = int(v)-1, b
		if array {
			n = int(int32(v)) - 1
		}
	} else {
		if !c.read(c.scratch[:width]) {
			return 0
		}
		raw = c.scratch[:width]
		if width == 2 {
			n = int(int16(binary.BigEndian.Uint16(raw)))
		} else {
			n = int(int32(binary.BigEndian.Uint32(raw)))
		}
	}
	if n > c.left {
		c.fail("a length of %d runs past the frame's end", n)
		return 0
	}
	if keep {
		c.put(raw)
	}
	return n
}

// put appends b to out.
func (c *cutter) put(b []byte) {
	if c.err != nil {
		return
	}
	if !c.grow(len(b)) {
		c.err = errCutRoom
		return
	}
	c.out = append(c.out, b...)
}

// array reads an array's count, copied to out, and returns it (null and
// empty both as 0).
func (c *cutter) array(flex bool) int {
	return max(c.length(flex, true, 4, true), 0)
}

// str copies a (nullable) string.
func (c *cutter) str(flex bool) {
	if n := c.length(flex, false, 2, true); n > 0 {
		c.copyN(n)
	}
}

// tags copies a flexible version's tagged fields.
func (c *cutter) tags() {
	n, raw := c.uvarint()
	if raw == nil {
		return
	}
	if int64(n) > int64(c.left) {
		c.fail("%d tagged fields run past the frame's end", n)
		return
	}
	c.put(raw)
	for i := 0; i < int(n) && c.err == nil; i++ {
		_, tag := c.uvarint()
		c.put(tag)
		size, raw := c.uvarint()
		c.put(raw)
		c.copyN(int(size))
	}
}

// records copies a partition's record set when it fits and no partition
// before it was cut, and otherwise drops its bytes and writes it empty.
func (c *cutter) records(flex bool) {
	n := c.length(flex, false, 4, false)
	if c.err != nil {
		return
	}
	prefix := 4
	if flex {
		prefix = uvarintLen(uint64(n + 1))
	}
	if n <= 0 || (!c.cutting && len(c.out)+prefix+n <= c.most && c.grow(prefix+n)) {
		if n < 0 {
			c.putLength(flex, -1)
			return
		}
		c.putLength(flex, n)
		if c.park != nil && n >= c.park.from {
			c.parkN(n)
		} else {
			c.copyN(n)
		}
		return
	}
	c.cutting = true
	c.cut.dropped++
	c.cut.bytes += int64(n)
	c.putLength(flex, 0)
	c.discard(n)
}

// putLength writes a record set's length (-1: null) to out.
func (c *cutter) putLength(flex bool, n int) {
	need := 4
	if flex {
		need = uvarintLen(uint64(n + 1))
	}
	if !c.grow(need) {
		if c.err == nil {
			c.err = errCutRoom
		}
		return
	}
	if flex {
		c.out = binary.AppendUvarint(c.out, uint64(n+1))
	} else {
		c.out = binary.BigEndian.AppendUint32(c.out, uint32(int32(n)))
	}
}

// discard takes n bytes of the answer and drops them: with drop, or read
// in bounded chunks (io.Discard reads through a small pooled buffer).
func (c *cutter) discard(n int) {
	if c.err != nil {
		return
	}
	if n > c.left {
		c.fail("a field of %d bytes runs past the frame's end", n)
		return
	}
	var got int
	var err error
	if c.drop != nil {
		got, err = c.drop.Discard(n)
	} else {
		var k int64
		k, err = io.CopyN(io.Discard, c.rd, int64(n))
		got = int(k)
	}
	c.left -= got
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = wire.ErrTruncated
		}
		c.err = err
	}
}

// dropper takes a stream's next n bytes and drops them, returning how
// many it took; io.EOF: the stream ended first.
type dropper interface {
	Discard(n int) (int, error)
}

// socketDropper drops what br holds first and the rest in the kernel,
// never copied out of it: the record sets of a cut answer, most of its
// bytes when a broker answers far beyond max_bytes.
type socketDropper struct {
	br *bufio.Reader // reads the socket p drops from
	p  *sockio.Peeker
}

func (d socketDropper) Discard(n int) (int, error) {
	got, err := d.br.Discard(min(n, d.br.Buffered()))
	if err != nil || got == n {
		return got, err
	}
	more, err := d.p.Discard(n - got)
	return got + more, err
}

// answerDropper returns the dropper for an answer read by rd from nc: the
// kernel's where nc is a plaintext TCP socket on a system that can, nil
// otherwise.
func answerDropper(rd *bufio.Reader, nc net.Conn) dropper {
	tc, ok := nc.(*net.TCPConn)
	if !ok || !sockio.CanDiscard {
		return nil
	}
	p := sockio.NewPeeker(tc)
	if p == nil {
		return nil
	}
	return socketDropper{br: rd, p: p}
}

// cutAnswer reads ref's answer from u, of total bytes, cut to most
// bytes and reserved in rm, logs it (once every ratelog.Every) and counts
// it. The Fetch it answers ends its wait: its broker has more than the
// proxy holds, and asking again is answered the same.
func (s *Conn) cutAnswer(u *upstream, ref *partRef, rd *bufio.Reader, head []byte, total int, rm cutRoom, most int) (*wire.Buf, error) {
	var park *cutPark
	if nc := s.parkable(u, ref, total); nc != nil {
		park = &cutPark{br: rd, nc: nc, from: fetchParkFrom}
	}
	buf, cut, err := cutFetchAnswer(rd, answerDropper(rd, u.nc), park, head, total, ref.version, most, rm)
	if err != nil {
		return nil, err
	}
	ref.cut = cut.dropped > 0
	if n := s.env.FetchCuts; n != nil && cut.dropped > 0 {
		n.Add(1)
	}
	if cut.dropped > 1 {
		s.mu.Lock()
		s.noteOvershootLocked(u.key.node, ref, cut.dropped, cut.bytes)
		s.mu.Unlock()
	}
	if n := s.env.FetchParks; n != nil && buf.Out != nil {
		n.Add(1)
	}
	if !ref.cut {
		return buf, nil
	}
	if skipped, ok := s.env.cutLog.Allow("cut", time.Now()); ok {
		maxBytes := int32(-1)
		s.mu.Lock()
		if st := ref.st; st != nil {
			if fr, ok := st.plan.Parts[ref.i].Request.(*kmsg.FetchRequest); ok {
				maxBytes = fr.MaxBytes
			}
		}
		s.mu.Unlock()
		s.env.Log.Warn("a broker answered a Fetch part beyond its max_bytes, more than the memory free now: cut at a partition boundary, the partitions past it answered with no records",
			append(s.c.Who(), "broker", u.key.node, "answer_bytes", total, "max_bytes", maxBytes, "kept_bytes", len(buf.B),
				"partitions_emptied", cut.dropped, "record_bytes_dropped", cut.bytes, "held_back", skipped)...)
	}
	return buf, nil
}
