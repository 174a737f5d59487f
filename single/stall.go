package single

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

// A broker can stop answering while its connections stay open: its
// process stopped, its host gone behind a network that drops everything
// once connected. Every request with a part on it then waits for that
// part, the other brokers' partitions with it, until the client gives up
// on the whole connection; and the client's next connection dials the
// broker again, which the host's kernel accepts, and waits again.
//
// A broker answers a connection's requests one at a time, in order, so
// only the oldest part unanswered on a connection (its head) is being
// worked on, from when it was written or the part before it answered.
// A head whose request carries its own timeout (Produce, DeleteRecords,
// ListOffsets, the admin requests that wait for the controller), or a
// fence, is timed; any other (a JoinGroup the coordinator may hold, a
// Fetch, whose rounds end at the client's wait) is not, nor is what
// waits behind it. Unanswered after stallGrace, a timed head's broker is
// probed: a connection of its own, an ApiVersions, within the dial
// timeout. A broker that answers the probe is alive, only slow (a
// Produce waiting for its replicas may take its whole timeout), and is
// given until the head's timeout and stallGrace. A broker that does not
// answer the probe, or has not begun to answer the head by then, is
// taken for stalled: its connection fails, every part in flight on it is
// answered with its retriable error or sent to another broker as a
// failed dial's are, and the broker is down, for its backoff, as one
// whose dial failed. From then on a connection to it is used only once
// the broker has answered an ApiVersions on it (probe), so that a broker
// that accepts connections and answers nothing stays down while every
// other broker is served. A stall is answered 5 s and the dial timeout
// after the head was written (15 s with the default dial timeout),
// before the Java client gives up on a Produce (at its own timeout, 30 s
// by default) or franz-go does (10 s past it, 20 s by default).

// stallGrace is how long a timed head waits before its broker is
// probed, and what a broker is given past the head's own timeout.
const stallGrace = 5 * time.Second

// fenceTimeout is a fence's timeout: it waits for the acks=0 writes
// before it, which may be many.
const fenceTimeout = 30 * time.Second

// probeMax bounds the ApiVersions answer a probe reads.
const probeMax = 1 << 20

// errProbe: a suspect broker did not answer the probe's ApiVersions as
// a broker does.
var errProbe = errors.New("no ApiVersions answer")

// stallWait returns how long ref's broker may take to begin to answer
// it once it is the head, or false when it is not timed: its own
// timeout, at least stallGrace, and stallGrace, so that the broker is
// probed before it is taken for stalled.
func stallWait(ref *partRef) (time.Duration, bool) {
	if ref.fence {
		return fenceTimeout + stallGrace, true
	}
	if ref.key == keyFetch || ref.st == nil || ref.st.plan == nil {
		return 0, false
	}
	tr, ok := ref.st.plan.Parts[ref.i].Request.(kmsg.TimeoutRequest)
	if !ok {
		return 0, false
	}
	return max(time.Duration(tr.Timeout())*time.Millisecond, stallGrace) + stallGrace, true
}

// watchLocked notes ref, written to u now, for u's watch, and arms the
// watch if ref is timed and the watch is not armed; once armed, it is
// armed again while parts are in flight. The caller holds s.mu, and ref
// is not yet in u.pending.
func (u *upstream) watchLocked(ref *partRef, now time.Time) {
	if u.key.fetch {
		// Fetch parts are never timed.
		return
	}
	ref.wait, _ = stallWait(ref)
	if len(u.pending) == 0 {
		u.headSince = now
	}
	if ref.wait > 0 && u.watch == nil {
		u.armWatchLocked(stallGrace)
	}
}

// armWatchLocked arms u's watch to fire after d. The caller holds s.mu.
func (u *upstream) armWatchLocked(d time.Duration) {
	s := u.s
	if s.closed || u.gone != nil {
		return
	}
	u.watchGen++
	gen := u.watchGen
	s.wg.Add(1)
	u.watch = time.AfterFunc(d, func() {
		defer s.wg.Done()
		u.watchFired(gen)
	})
	s.waits[u.watch] = true
}

// stopWatchLocked stops u's watch. The caller holds s.mu.
func (u *upstream) stopWatchLocked() {
	t := u.watch
	u.watch = nil
	if t == nil || !u.s.waits[t] {
		return
	}
	delete(u.s.waits, t)
	if t.Stop() {
		u.s.wg.Done()
	}
}

// headLocked returns the oldest part unanswered on u, nil when none.
// The caller holds s.mu.
func (u *upstream) headLocked() *partRef {
	var (
		head *partRef
		age  int32
	)
	for corr, ref := range u.pending {
		if a := (u.corr - corr) & corrMask; head == nil || a > age {
			head, age = ref, a
		}
	}
	return head
}

// watchFired looks at u's head: timed, and unanswered past its wait with
// nothing of its answer read, u's broker is taken for stalled; past
// stallGrace, the broker is probed, once for that head. The watch is
// then armed again while parts are in flight.
func (u *upstream) watchFired(gen uint64) {
	s := u.s
	s.mu.Lock()
	if u.watch == nil || u.watchGen != gen {
		// Stopped, too late to stop it.
		s.mu.Unlock()
		return
	}
	delete(s.waits, u.watch)
	u.watch = nil
	head := u.headLocked()
	if s.closed || u.gone != nil || head == nil {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	since := now.Sub(u.headSince)
	next := stallGrace
	switch {
	case head.wait == 0, u.inbound != nil:
		// Not timed, or its answer is coming in.
	case since >= head.wait:
		key, version := head.key, head.version
		s.mu.Unlock()
		u.stalled(fmt.Errorf("%s v%d unanswered for %s", kmsg.NameForKey(key), version, since.Round(time.Millisecond)))
		return
	case since >= stallGrace:
		if !head.probed && !u.probing {
			head.probed, u.probing = true, true
			s.wg.Add(1)
			go u.probeStall(head)
		}
		next = head.wait - since
	default:
		next = stallGrace - since
	}
	u.armWatchLocked(next)
	s.mu.Unlock()
}

// probeStall probes u's broker, whose head is unanswered past
// stallGrace, on a connection of its own: u fails, its broker taken for
// stalled, unless the broker answers the probe or the head.
func (u *upstream) probeStall(head *partRef) {
	s := u.s
	defer s.wg.Done()
	nc, _, own, err := s.c.Dial(s.ctx, u.addr)
	if err == nil {
		err = probe(s.ctx, nc, s.v.dialTimeout)
		nc.Close()
	}
	s.mu.Lock()
	u.probing = false
	live := u.gone == nil && !s.closed && u.inbound == nil && u.headLocked() == head
	s.mu.Unlock()
	if err == nil || !live || s.ctx.Err() != nil || own && errors.Is(err, proxyerr.UpstreamAuth) {
		// It answered, the probe or the head; or the credentials of
		// the client's own principal were refused, which says nothing
		// of the broker: the head's wait decides.
		return
	}
	u.stalled(fmt.Errorf("%s v%d unanswered for %s, and a probe: %v", kmsg.NameForKey(head.key), head.version, stallGrace, err))
}

// stalled fails u, whose broker stalled (why), and marks the broker down
// and suspect.
func (u *upstream) stalled(why error) {
	s := u.s
	err := fmt.Errorf("%w: node %d at %s: %w: %v", proxyerr.UpstreamFailed, u.key.node, u.addr, proxyerr.BrokerStalled, why)
	if s.v.Stalled(u.key.node) {
		s.env.Log.Warn("broker stalled: its parts are answered with their retriable error until it answers again", "broker", u.key.node, "addr", u.addr, "err", err)
	}
	if n := s.env.BrokerStalls; n != nil {
		n.Add(1)
	}
	s.fail(u, err)
}

// probe asks the broker at the other end of nc, suspected of stalling,
// for its ApiVersions, and returns an error unless it answers within
// timeout (zero: probeTimeout), and before ctx ends.
func probe(ctx context.Context, nc net.Conn, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = probeTimeout
	}
	nc.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer func() {
		if stop() {
			nc.SetDeadline(time.Time{})
		}
	}()
	const corr = 1
	f := append([]byte(nil), fenceFrame...)
	wire.SetRequestCorrelation(f, corr)
	if _, err := nc.Write(f); err != nil {
		return err
	}
	var lenBuf [4]byte
	size, err := wire.ReadLength(nc, &lenBuf, wire.MinResponseFrame, probeMax)
	if err != nil {
		return err
	}
	body := make([]byte, size)
	if err := wire.ReadBody(nc, body); err != nil {
		return err
	}
	head := append(lenBuf[:], body[:4]...)
	if got := wire.ResponseCorrelation(head); got != corr {
		return fmt.Errorf("%w: correlation id %d, want %d", errProbe, got, corr)
	}
	return nil
}

// probeTimeout bounds a probe when no dial timeout is set.
const probeTimeout = 10 * time.Second
