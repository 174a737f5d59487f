package single

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// A Fetch split over brokers is answered from the parts that are in
// (DESIGN.md, "Fetch"): once round 1's answers in reach the client's
// minimum with records, the parts still out are answered as their brokers
// last described their partitions, with no records (synthLocked), and the
// merged answer goes. Each part still out stays on its connection, and its
// answer, when it comes, is kept for the client's next Fetch that asks
// that broker the very same thing, which takes it at once instead of
// asking again. So the client's one connection has the brokers' answers
// on their way while it reads the last one, as it would through a
// connection per broker, and a slow broker delays only its own
// partitions.
//
// A kept answer is held, and charged, until it is taken; until a Fetch
// asks its broker something else; until its connection fails, retires or
// closes; and at most keepFor. It is a broker's answer to exactly what the
// next Fetch asks, at the offsets it asks, from a fetch sent after every
// write to its partitions was answered (freshLocked), so the client reads
// what it would have read had the proxy asked again, a moment older.

// keepFor bounds how long a kept answer waits for the Fetch that takes
// it: a consumer asks again as soon as it has read the last answer.
const keepFor = time.Second

// keptAnswer is a round-1 part's answer that came after its Fetch was
// answered without it.
type keptAnswer struct {
	ref   *partRef // what it answers: its sig, version and tick sent
	res   splitmerge.Result
	buf   *wire.Buf // the frame res aliases
	ch    charge
	timer *time.Timer
}

// earlyLocked answers st's round-1 parts still out as their brokers last
// described their partitions, and marks each to be kept when it answers.
// It reports false, changing nothing, when memory is short (a part's
// answer was cut, the parts ask less than the client did, or what the
// parts still out may bring would take more than half the memory free),
// or when a part still out cannot be so answered: its broker said nothing
// yet of one of its partitions, or nothing since the last write to it was
// answered. The caller holds s.mu.
func (s *Conn) earlyLocked(st *Split) bool {
	f := st.fetch
	if !s.keepRoomLocked(st) {
		return false
	}
	type early struct {
		u    *upstream
		resp *kmsg.FetchResponse
	}
	out := make([]early, len(f.refs))
	for i, ref := range f.refs {
		if ref == nil {
			continue
		}
		u := s.ups[upKey{st.plan.Parts[i].Node, true}]
		if u == nil || u.gone != nil {
			return false
		}
		resp, ok := u.synthLocked(st.plan.Parts[i].Request.(*kmsg.FetchRequest)) // the plan is not changed once sent
		if !ok {
			return false
		}
		out[i] = early{u, resp}
	}
	for i, e := range out {
		if e.resp == nil {
			continue
		}
		ref := f.refs[i]
		// A part out in round 1 has no answer yet to give back.
		st.results[i] = splitmerge.Result{Response: e.resp}
		f.bytes[i] = 0
		f.out--
		if e.u.poll == nil && ref.round == 1 && ref.sig != nil && e.u.holdsLocked(ref) {
			e.u.poll = ref
		}
	}
	if s.env.FetchEarly != nil {
		s.env.FetchEarly.Add(1)
	}
	return true
}

// keepRoomLocked reports whether memory allows keeping the answers of
// st's parts still out: no part's answer was cut, the parts ask what the
// client did, and what the parts still out may bring takes at most half
// the memory free. Otherwise what is kept would take the memory of the
// Fetch requests to come. The caller holds s.mu.
func (s *Conn) keepRoomLocked(st *Split) bool {
	f := st.fetch
	if f.cut || st.room != nil && st.room.short {
		return false
	}
	var keep int64
	for _, ref := range f.refs {
		if ref != nil {
			// Reckoned as if encoded whole: reckoned lean, more
			// answers were kept and fewer taken (BENCHMARKS.md,
			// runs 119 to 124).
			keep += partRoom(ref.maxBytes, false)
		}
	}
	b := s.env.Budget
	return b == nil || keep <= (b.Limit()-b.Used())/2
}

// keepLocked keeps ref's answer, read from u after its Fetch was answered
// without it, and reports whether it did: only a round-1 part answered
// early (earlyLocked) is kept. The caller holds s.mu, and releases what
// dropped returns after unlocking.
func (s *Conn) keepLocked(u *upstream, ref *partRef, wasPoll bool, res splitmerge.Result, buf *wire.Buf, ch charge) (kept bool, dropped *keptAnswer) {
	if !wasPoll || ref.round != 1 || ref.sig == nil || s.closed || u.gone != nil {
		return false, nil
	}
	dropped = s.unkeepLocked(u)
	k := &keptAnswer{ref: ref, res: res, buf: buf, ch: ch}
	u.kept = k
	s.wg.Add(1)
	k.timer = time.AfterFunc(keepFor, func() {
		defer s.wg.Done()
		s.mu.Lock()
		delete(s.waits, k.timer)
		gone := u.kept == k
		if gone {
			u.kept = nil
		}
		s.mu.Unlock()
		if gone {
			k.release(s)
		}
	})
	s.waits[k.timer] = true
	if s.env.FetchKept != nil {
		s.env.FetchKept.Add(1)
	}
	return true, dropped
}

// takeKeptLocked gives ref's round-1 part, which asks sig, the answer
// kept on u when it answers exactly that, fresh, and says what it makes
// happen; ok is false when it does not, and a kept answer that does not is
// dropped, returned for the caller to release after unlocking. The
// caller holds s.mu.
func (s *Conn) takeKeptLocked(st *Split, u *upstream, ref *partRef, sig []byte) (act int, ok bool, dropped *keptAnswer) {
	k := s.unkeepLocked(u)
	if k == nil {
		return actNone, false, nil
	}
	q := st.plan.Parts[ref.i].Request.(*kmsg.FetchRequest)
	if k.ref.version != ref.version || !bytes.Equal(k.ref.sig, sig) || k.ref.maxBytes > q.MaxBytes || !s.freshLocked(k.ref.sent, q) ||
		k.buf != nil && k.buf.Out != nil && !st.r.Pieces() {
		return actNone, false, k
	}
	if s.env.FetchKeptTaken != nil {
		s.env.FetchKeptTaken.Add(1)
	}
	ref.cut = k.ref.cut
	return s.gotLocked(st, ref, k.res, k.buf, k.ch), true, nil
}

// unkeepLocked takes u's kept answer, if any, from u, its timer stopped.
// The caller holds s.mu.
func (s *Conn) unkeepLocked(u *upstream) *keptAnswer {
	k := u.kept
	if k == nil {
		return nil
	}
	u.kept = nil
	if s.waits[k.timer] {
		delete(s.waits, k.timer)
		if k.timer.Stop() {
			s.wg.Done()
		}
	}
	return k
}

// release gives back what a dropped kept answer holds; k may be nil.
func (k *keptAnswer) release(s *Conn) {
	if k == nil {
		return
	}
	wire.Put(k.buf)
	k.ch.Release(s.env.Budget)
}
