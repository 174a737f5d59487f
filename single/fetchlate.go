package single

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
)

// A Fetch's round 1 ends when its wait does, as round 2 does (DESIGN.md,
// "Fetch"): a broker asks no wait of a part in round 1 and answers it at
// once, so a part whose answer has not begun to come when the client's
// wait ends is a broker in trouble (stalled, its connection held), and
// the client must not wait on it past what it asked. An answer that has
// begun to come is waited for, however long it takes to read, as the
// client would wait for it from the broker. Each part still out is
// answered as its broker last described its partitions, with no records
// (synthLocked), and its answer is kept when it comes (fetchkeep.go), for
// the next Fetch that asks the same. A part that cannot be so answered
// (its broker said nothing yet of a partition, or nothing since the
// client's last write to it) is given lateGrace more, then its partitions
// are answered NOT_LEADER_OR_FOLLOWER: the client asks for metadata and
// fetches again, as from a broker that moved.
//
// While a late part is still out on its connection, the next Fetch's
// part for that broker is not sent behind it: it takes the late part
// over when it asks the same, and is otherwise answered at its own
// deadline the same way. So a stalled broker holds one request of each
// client connection, not one per Fetch.

// lateGrace is how long past the client's wait a part that cannot be
// answered from its broker's last word is waited for: a broker answering
// a long poll that ends at the client's deadline answers the part queued
// behind it a moment after.
const lateGrace = 250 * time.Millisecond

// errLate is the answer of a part its broker did not answer by its
// Fetch's deadline and grace.
var errLate = errors.New("the broker did not answer within the fetch's wait")

// lateLocked answers st's round-1 parts still out when its wait ended:
// from what their brokers last said, else, once graced, with errLate.
// It reports whether no part is out any more. The caller holds s.mu.
func (s *Conn) lateLocked(st *Split) bool {
	f := st.fetch
	for i, ref := range f.refs {
		if ref == nil {
			continue
		}
		var (
			res splitmerge.Result
			u   *upstream // the connection the part is out on, if it was sent or waits for its dial
		)
		if up := s.ups[upKey{st.plan.Parts[i].Node, true}]; up != nil && up.gone == nil {
			if up.inbound == ref {
				continue // its answer is coming in
			}
			if resp, ok := up.synthLocked(st.plan.Parts[i].Request.(*kmsg.FetchRequest)); ok {
				res.Response = resp
			}
			if up.holdsLocked(ref) {
				u = up
			}
		}
		if res.Response == nil {
			if !f.graced {
				continue
			}
			res.Err = errLate
		}
		st.results[i] = res
		f.bytes[i] = 0
		f.refs[i] = nil
		f.out--
		ref.st = nil
		if u != nil {
			u.late = ref
			if res.Response != nil && u.poll == nil && ref.round == 1 && ref.sig != nil {
				// Kept when it comes, whatever the memory: a
				// broker late is rare, and an answer dropped
				// here would be asked again late.
				u.poll = ref
			}
		}
		if s.env.FetchLate != nil {
			s.env.FetchLate.Add(1)
		}
		if s.env.Log != nil {
			s.env.Log.Debug("a fetch part was not answered within the client's wait", "node", st.plan.Parts[i].Node, "answered_empty", res.Response != nil)
		}
	}
	f.graced = true
	return f.out == 0
}

// holdsLocked reports whether ref is out on u: sent and unanswered, or
// waiting for u's dial. The caller holds s.mu.
func (u *upstream) holdsLocked(ref *partRef) bool {
	for _, p := range u.pending {
		if p == ref {
			return true
		}
	}
	for _, q := range u.queued {
		if q.ref == ref {
			return true
		}
	}
	return false
}

// heldLocked reports whether ref, a round-1 part of st for u, is held
// rather than sent behind a part u's broker is late with, and if so
// leaves it to st's deadline. The caller holds s.mu.
func (s *Conn) heldLocked(st *Split, u *upstream, ref *partRef) bool {
	if !u.lateOutLocked() {
		return false
	}
	st.fetch.refs[ref.i] = ref
	return true
}

// lateOutLocked reports whether a part u's broker did not answer by its
// Fetch's deadline is still out on u. The caller holds s.mu.
func (u *upstream) lateOutLocked() bool {
	if u.late == nil {
		return false
	}
	if u.gone == nil && u.holdsLocked(u.late) {
		return true
	}
	u.late = nil
	return false
}
