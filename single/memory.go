package single

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

// Reserve reserves what r costs once decoded (SplitCost) before it is
// decoded, and gives it to r's split state, which it returns and which
// holds it until the request is answered. A cost that the budget could never hold beside the
// frame ends the connection at once, naming the setting to raise, rather
// than after the memory is spent or by waiting for memory that cannot come.
func (s *Conn) Reserve(r Request) (*Split, error) {
	c := s.c
	b := s.env.Budget
	hdr, frame := r.Header(), r.Frame()
	cost := SplitCost(hdr.Key, hdr.Version, frame.B[hdr.Body:])
	acct := c.Account(int(cost))
	most := b.Max(acct.Bulk())
	if fa := c.Account(len(frame.B)); fa.Bulk() == acct.Bulk() {
		most -= int64(cap(frame.B))
	}
	if cost > most {
		return nil, fmt.Errorf("%w: a %s of %s needs about %s to decode, split and merge, and --max-memory %s holds at most %s for one request: raise --max-memory",
			proxyerr.Memory, kmsg.NameForKey(hdr.Key), roughSize(int64(len(frame.B))), roughSize(cost),
			config.FormatSize(b.Limit()), config.FormatSize(max(most, 0)))
	}
	if err := acct.Reserve(int(cost)); err != nil {
		return nil, c.TimedOut(err)
	}
	return &Split{r: r, cost: acct.Charge(int(cost))}, nil
}

// roughSize writes n rounded up to a whole KiB, or MiB from 1 MiB on: a
// size a person reads in a log line.
func roughSize(n int64) string {
	unit := int64(1 << 10)
	if n >= 1<<20 {
		unit = 1 << 20
	}
	return config.FormatSize((n + unit - 1) / unit * unit)
}

// encode encodes the merged response resp of st into a frame charged to
// the budget before it is allocated, and returns the frame and its charge.
//
// A merged Fetch answer copies the records its parts' answers hold, so
// for a moment it is held twice. Its size is known before it is encoded
// (EncodedSize), and its frame is reserved and taken at that size's fine
// class (wire.GetFine, at most an eighth above it), not rounded up to a
// power of two; when that does not fit beside the parts' answers, the
// answers are first moved to frames of their own size
// (compact). A merged answer that could never fit beside them ends the
// connection at once, naming the setting, rather than waiting for memory
// that cannot come. Other merged answers hold no records: they are
// reserved at the size of the parts' answers, and what the proxy's own
// entries add is charged once encoded. size is a Fetch answer's frame size
// when the caller measured it already, else 0.
func (s *Conn) encode(st *Split, resp kmsg.Response, size int) (*wire.Buf, charge, error) {
	c, hdr := s.c, st.r.Header()
	flexible := hdr.ResponseFlexible()
	acct := c.UpAccount(0)
	b := s.env.Budget
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		// Encoded whole: the record sets parked in pipes are read
		// back into their frames first (fetchpark.go), unless the
		// answer names no partition (a throttled fetch's, emptied):
		// then nothing refers to them, and Put drops them unread.
		if len(fr.Topics) > 0 {
			if err := fillAll(st.frames); err != nil {
				return nil, charge{}, err
			}
		} else if n := s.env.FetchParkDrops; n != nil {
			for _, f := range st.frames {
				if parkedIn(f) != nil {
					n.Add(1)
				}
			}
		}
		if size == 0 {
			size = EncodedSize(fr, hdr.Correlation, flexible)
		}
		held := wire.FineCap(size)
		// The room reserved with the parts holds the merged answer
		// but for what its answers outgrew.
		got := st.room.take(int64(held))
		if rest := int64(held) - got; rest > 0 && !b.TryReserveResponse(rest) {
			s.compact(st, fr)
			parts := int64(0)
			for _, ch := range st.charges {
				parts += ch.N
			}
			if most := b.MaxResponse(); parts+int64(held) > most {
				st.room.give(got)
				return nil, charge{}, fmt.Errorf("%w: a merged Fetch answer of %s beside its parts' %s needs more than --max-memory %s holds for responses (%s): raise --max-memory",
					proxyerr.Memory, roughSize(int64(size)), roughSize(parts), config.FormatSize(b.Limit()), config.FormatSize(most))
			}
			if err := acct.Reserve(int(rest)); err != nil {
				st.room.give(got)
				return nil, charge{}, c.TimedOut(err)
			}
		}
		out := exactBuf(size)
		out.B = wire.AppendResponse(out.B[:0], hdr.Correlation, flexible, resp.AppendTo)
		return s.charged(acct, out, held)
	}
	need := 4 << 10
	for _, f := range st.frames {
		if f != nil {
			need += len(f.B)
		}
	}
	need = wire.Cap(need)
	if err := acct.Reserve(need); err != nil {
		return nil, charge{}, c.TimedOut(err)
	}
	out := wire.Get(need)
	out.B = wire.AppendResponse(out.B[:0], hdr.Correlation, flexible, resp.AppendTo)
	return s.charged(acct, out, need)
}

// charged returns out's charge, of which reserved bytes are reserved: a
// frame that outgrew them while it was encoded (a merged answer larger
// than every answer together, with the proxy's own entries and
// endpoints) has the rest charged now.
func (s *Conn) charged(acct Account, out *wire.Buf, reserved int) (*wire.Buf, charge, error) {
	ch := acct.Charge(reserved)
	if grown := int64(cap(out.B)); grown > ch.N {
		if err := acct.Reserve(int(grown - ch.N)); err != nil {
			ch.Release(s.env.Budget)
			return nil, charge{}, s.c.TimedOut(err)
		}
		ch.N = grown
	}
	return out, ch, nil
}

// exactBufFrom is the size above which a frame is taken from the pool's
// fine classes (wire.GetFine), an eighth of a power of two apart, rather
// than its powers of two.
const exactBufFrom = wire.FineFrom

// exactBuf returns an empty pooled buffer of capacity wire.FineCap(n).
func exactBuf(n int) *wire.Buf {
	b := wire.GetFine(n)
	b.B = b.B[:0]
	return b
}

// compact moves each part's answer whose frame is much larger than the
// answer (a pool's class rounds a frame up to a power of two) to a frame
// of its own size, so that the merged answer finds room beside them. fr's
// records, which alias the old frames, are moved with them (copying a
// frame costs less than the answer it makes room for). Only what fits
// now is moved: this makes room, and never waits for it. A mapped frame
// (fetchpark.go) stays: it is the answer's size already, and it must be
// unmapped, not left to the collector, while a field may still alias it.
func (s *Conn) compact(st *Split, fr *kmsg.FetchResponse) {
	b := s.env.Budget
	for i, f := range st.frames {
		if f == nil || f.Out != nil || f.Free != nil || len(f.B) <= exactBufFrom || cap(f.B)-len(f.B) < len(f.B)/8 {
			continue
		}
		if !b.TryReserveResponse(int64(len(f.B))) {
			continue
		}
		nf := &wire.Buf{B: append([]byte(nil), f.B...)}
		old := f.B[:cap(f.B)]
		for ti := range fr.Topics {
			t := &fr.Topics[ti]
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				if off, ok := within(old, p.RecordBatches); ok {
					p.RecordBatches = nf.B[off : off+len(p.RecordBatches) : off+len(p.RecordBatches)]
				}
			}
		}
		if res, ok := st.results[i].Response.(*kmsg.FetchResponse); ok {
			for ti := range res.Topics {
				t := &res.Topics[ti]
				for pi := range t.Partitions {
					p := &t.Partitions[pi]
					if off, ok := within(old, p.RecordBatches); ok {
						p.RecordBatches = nf.B[off : off+len(p.RecordBatches) : off+len(p.RecordBatches)]
					}
				}
			}
		}
		// Not back to a pool: a field this missed (an unknown tag's
		// bytes) may still alias it.
		st.charges[i].Release(b)
		st.frames[i], st.charges[i] = nf, charge{N: int64(len(nf.B)), Resp: true}
	}
}

// within reports whether sub lies in buf, and where. kmsg slices a byte
// field out of the frame it reads with its capacity cut to its length, so
// only the addresses say where it lies; they are compared as numbers and
// never turned back into pointers.
func within(buf, sub []byte) (int, bool) {
	if len(sub) == 0 || cap(buf) == 0 {
		return 0, false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	if at < start || at-start > uintptr(cap(buf)) || at-start+uintptr(len(sub)) > uintptr(cap(buf)) {
		return 0, false
	}
	return int(at - start), true
}

// A Fetch's room. The parts of a Fetch are answered one by one, each
// answer held until the last is in, and the merged answer is held beside
// them while it is encoded. Were each of these reserved as it came, every
// consumer's Fetch could hold some of its answers while waiting for room
// for the rest, and several consumers together hold what all of them wait
// for: nothing is released until a wait gives up. So a Fetch reserves, at
// the flusher before its parts are sent, room for all of it at once: its
// parts' answers at the most they ask for and the merged answer again,
// or, when the client takes the merged answer in pieces (lean), only the
// merged answer's head: its records stay in the parts' answers
// (fetchmerge.go). When that is not free, the parts ask for less (a
// consumer reads in more fetches, as from a broker with a smaller
// fetch.max.bytes), down to
// fetchFloor each; only then does the Fetch wait for room, holding none,
// for room that Fetches in flight give back without waiting themselves.
// An answer larger than its room (a first record batch above the part's
// maximum, which a broker answers whole) reserves the rest from the
// budget if it is free now; one larger than that is cut at a partition
// boundary as it is read (fetchcut.go), never waited for.

// fetchFloor is the least a Fetch's part asks for when the budget is
// short: about one record batch at Kafka's default max.message.bytes, so
// that the broker's answer fits in the room reserved for it.
const fetchFloor = 1 << 20

// fetchRoomsOf: the rooms of every Fetch in flight together ask for at
// most 1/fetchRoomsOf of the budget before their parts are lowered to
// fetchFloor, so that consumers whose long polls hold their room while
// they wait leave the rest to producers and other answers.
const fetchRoomsOf = 2

// fetchRoomSlack is what a part's answer and its share of the merged
// answer hold beside their records (headers, watermarks, aborted
// transactions), reserved with each.
const fetchRoomSlack = 16 << 10

// partRoom is the room a Fetch part asking most bytes takes: its answer,
// and its share of the merged answer, the same again unless the merged
// answer is lean (written in pieces, its records left in the parts'
// answers): then only its head.
func partRoom(most int32, lean bool) int64 {
	n := int64(max(most, 0)) + fetchRoomSlack
	if lean {
		return n + fetchRoomSlack
	}
	return 2 * n
}

// fetchRoom is the response memory a Fetch reserved before its parts were
// sent and has not yet drawn. Its answers' readers draw from it and give
// back to it concurrently, hence its own lock.
type fetchRoom struct {
	b     *budget.Budget
	rooms *atomic.Int64 // every Fetch's room, as reserved
	held  int64         // this room as reserved, counted in rooms
	mu    sync.Mutex
	n     int64
	gone  bool // released: what comes back goes to the budget
	// short: the parts ask fewer bytes than the client did, to fit the
	// memory free; set before they are sent.
	short bool
}

// take draws up to n bytes and returns how many it drew.
func (m *fetchRoom) take(n int64) int64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := min(n, m.n)
	m.n -= k
	return k
}

// give returns n bytes of response memory to the room, or to the budget
// once the room is released.
func (m *fetchRoom) give(n int64) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		m.b.ReleaseResponse(n)
		return
	}
	m.n += n
}

// release gives back what was not drawn; later gives go to the budget.
func (m *fetchRoom) release() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.gone {
		m.gone = true
		m.b.ReleaseResponse(m.n)
		m.n = 0
		m.rooms.Add(-m.held)
	}
}

// roomAccount reads a Fetch part's answer into its request's room, and
// reserves from the budget only what the room lacks.
type roomAccount struct {
	room *fetchRoom
	next Account
}

func (a *roomAccount) Reserve(n int) error {
	got := a.room.take(int64(n))
	if rest := n - int(got); rest > 0 {
		if err := a.next.Reserve(rest); err != nil {
			a.room.give(got)
			return err
		}
	}
	return nil
}

// Release gives to the room: the bytes are response memory whichever way
// they were reserved.
func (a *roomAccount) Release(n int) { a.room.give(int64(n)) }

// TryReserve is Reserve without waiting: it reports whether the room and
// what the budget holds free now had n bytes.
func (a *roomAccount) TryReserve(n int) bool {
	got := a.room.take(int64(n))
	if rest := int64(n) - got; rest > 0 && !a.room.b.TryReserveResponse(rest) {
		a.room.give(got)
		return false
	}
	return true
}

// budgetRoom reserves response memory from the budget without waiting:
// an answer with no room (a long poll abandoned) is cut from it.
type budgetRoom struct{ b *budget.Budget }

func (r budgetRoom) TryReserve(n int) bool { return r.b.TryReserveResponse(int64(n)) }
func (r budgetRoom) Release(n int)         { r.b.ReleaseResponse(int64(n)) }

// readAnswer reads a part's answer of total bytes, whose first bytes are
// head, into a frame charged to acct. A large Fetch answer (bigAnswer) is
// read into a frame of its fine class (wire.GetFine), which the caller
// reserved in acct (wire.FineCap): a broker fills a part up to the bytes
// it asks for, so the frame is often just above a power of two, and a
// power of two's class would hold twice it, beside the growth steps
// before.
func readAnswer(rd io.Reader, head []byte, total int, acct wire.Account, fetch bool) (*wire.Buf, error) {
	if !bigAnswer(fetch, total) {
		buf, err := wire.Start(head, total, acct)
		if err == nil {
			buf, err = wire.Grow(rd, buf, total, acct, wire.TrustedGrowFactor)
		}
		return buf, err
	}
	b := wire.GetFine(total)
	n := copy(b.B, head)
	if _, err := io.ReadFull(rd, b.B[n:]); err != nil {
		return nil, readFailed(b, acct, total, err)
	}
	return b, nil
}

// readFailed gives back b, the frame of an answer of total bytes reserved
// in acct whose read failed with err, and names the failure: an answer
// cut short is wire.ErrTruncated.
func readFailed(b *wire.Buf, acct wire.Account, total int, err error) error {
	wire.Put(b)
	acct.Release(wire.FineCap(total))
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return wire.ErrTruncated
	}
	return err
}

// bigAnswer reports whether an answer is read into a frame of its fine
// class (wire.GetFine), reserved before it is read.
func bigAnswer(fetch bool, total int) bool { return fetch && total > exactBufFrom }

// answerAccount is the account an answer for ref is read into: its
// Fetch's room, while that Fetch waits for it, else acct; and for a
// Fetch, the memory a cut answer is reserved from (fetchcut.go).
func (s *Conn) answerAccount(ref *partRef, acct Account) (wire.Account, cutRoom) {
	if ref.key != keyFetch {
		return acct, nil
	}
	s.mu.Lock()
	st := ref.st
	s.mu.Unlock()
	if st == nil || st.room == nil {
		return acct, budgetRoom{s.env.Budget}
	}
	ra := &roomAccount{room: st.room, next: acct}
	return ra, ra
}

// cutMost is what a cut answer for ref may keep: its part's own share of
// its Fetch's room and half what the budget holds free, so that the
// merged answer and the other parts find room beside it.
func (s *Conn) cutMost(ref *partRef) int {
	b := s.env.Budget
	most := int(max(b.Limit()-b.Used(), 0) / 2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := ref.st; st != nil && st.room != nil {
		if fr, ok := st.plan.Parts[ref.i].Request.(*kmsg.FetchRequest); ok { // the plan is not changed once sent
			most += fetchRoomSlack + int(max(fr.MaxBytes, 0))
		}
	}
	return most
}

// reserveNow reserves n bytes of rm without waiting; with no budget
// there is nothing to reserve.
func reserveNow(b *budget.Budget, rm cutRoom, n int) bool {
	return b == nil || rm == nil || rm.TryReserve(n)
}

// reserveFetchRoom reserves st's room, lowering its parts' maximum bytes
// to what the budget holds free now and what the rooms in flight leave of
// their share (fetchFloor each at the least, or what they asked if less),
// and waits for room only at that floor. The
// flusher calls it after FetchShare and before the parts are sent.
func (s *Conn) reserveFetchRoom(st *Split) error {
	b := s.env.Budget
	if b == nil {
		return nil
	}
	var parts []*kmsg.FetchRequest
	var floors []int32
	for i := range st.plan.Parts {
		if fr, ok := st.plan.Parts[i].Request.(*kmsg.FetchRequest); ok {
			parts = append(parts, fr)
			floors = append(floors, min(max(fr.MaxBytes, 0), fetchFloor))
		}
	}
	lean := st.r.Pieces() // the merged answer goes as a vector (fetchmerge.go)
	need := func() int64 {
		n := int64(0)
		for _, fr := range parts {
			n += partRoom(fr.MaxBytes, lean)
		}
		return n
	}
	rooms := s.env.FetchRooms
	most := b.Limit()/fetchRoomsOf + int64(len(parts))*2*fetchRoomSlack
	short := false
	for {
		n := need()
		if rooms.Add(n) <= most {
			if b.TryReserveResponse(n) {
				st.room = &fetchRoom{b: b, n: n, rooms: rooms, held: n, short: short}
				return nil
			}
		}
		rooms.Add(-n)
		lowered := false
		for i, fr := range parts {
			if fr.MaxBytes > floors[i] {
				fr.MaxBytes = max(fr.MaxBytes/2, floors[i])
				lowered, short = true, true
			}
		}
		if !lowered {
			break
		}
	}
	n := need()
	wait := *s.env.ResponseWait
	if err := b.ReserveResponse(n, s.halt, time.Now().Add(wait)); err != nil {
		if errors.Is(err, budget.ErrDeadline) {
			return fmt.Errorf("%w: a Fetch found no memory for %s for %s of answers (raise --max-memory)", proxyerr.Memory, wait, roughSize(n))
		}
		return err
	}
	rooms.Add(n)
	st.room = &fetchRoom{b: b, n: n, rooms: rooms, held: n, short: short}
	return nil
}
