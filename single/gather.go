package single

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// Split is a request's life in the single topology: the client's
// request decoded, its plan, and what became of each part. Guarded by the
// Conn's mu once its parts are sent.
type Split struct {
	r    Request
	req  kmsg.Request // decoded: strings copied, byte fields alias r.frame
	plan *splitmerge.Plan

	results []splitmerge.Result
	frames  []*wire.Buf // part i's answer, which results[i] aliases
	charges []charge    // frames' memory
	// cost is the memory reserved for the decoded request, its parts,
	// their decoded answers and the merged response (memory.go).
	cost charge
	out  int // parts unanswered
	// holds counts the goroutines still sending parts, and the parts
	// waiting for a dial, which use the request: it is not answered
	// (and recycled) before they are done.
	holds int
	// queued counts its parts that wait for a dial; dropLater: a
	// Produce's records are dropped when the last of them is sent.
	queued    int
	dropLater bool
	// unanswered: no answer comes (acks=0 in connection mode); the last
	// hold lets the request go.
	unanswered bool
	// unsent: the parts of an unanswered request that were not sent.
	unsent []kmsg.Request
	txn    string // counted in Conn.txns until done
	done   bool   // every part is in; finish runs or ran

	fetch *fetchRounds // the Fetch rounds, when they run
	// room: a Fetch's memory reserved before its parts were sent, for
	// its answers and the merged answer (memory.go).
	room *fetchRoom
}

// partRef is one part sent and unanswered: its request's state and its
// index there; st is nil once the answer is no longer wanted (a Fetch
// part its request stopped waiting for, whose answer may be kept:
// fetchkeep.go).
type partRef struct {
	st           *Split
	i            int
	key, version int16
	round        int8   // Fetch: 0 sent as the client asked, 1 at once, 2 the long poll
	sig          []byte // Fetch rounds 1 and 2: what it asks, its waits aside
	sent         uint64 // Fetch: Conn.tick when it was sent
	fence        bool   // not a part: a fence behind acks=0 writes (fetchdeps.go)
	counted      bool   // sentLocked counted it
	node         int32  // the broker it went to
	wrote        bool   // it was written, at least in part, to its broker
	tries        int8   // how many times it was sent again after a failure
	cut          bool   // Fetch: its answer was cut short (fetchcut.go)
	pieces       bool   // Fetch: its request's answer may go in pieces
	maxBytes     int32  // Fetch rounds 1 and 2: the most bytes it asked
	// until is when a Fetch long poll's own wait ends, and its broker
	// answers it at the latest.
	until time.Time
	// wait: how long its broker may take to begin to answer it once it
	// is the oldest on its connection (stall.go); zero: not timed.
	// probed: its broker was probed while it waited.
	wait   time.Duration
	probed bool
}

// release gives back what the answers hold.
func (st *Split) release(b *budget.Budget) {
	for i, f := range st.frames {
		wire.Put(f)
		st.frames[i] = nil
		st.charges[i].Release(b)
	}
	clear(st.results)
}

// ReleaseAll gives back what the answers hold and what the request's
// decoded form was charged: nothing of it is used any more.
func (st *Split) ReleaseAll(b *budget.Budget) {
	st.release(b)
	st.cost.Release(b)
	st.room.release()
}

// answered takes an answer read from u for ref: it is decoded and kept
// until every part of its request is in. An answer nobody waits for any
// more is dropped, after the view learned from it.
func (s *Conn) answered(u *upstream, ref *partRef, buf *wire.Buf, ch charge) error {
	b := s.env.Budget
	resp, err := DecodeAnswer(ref.key, ref.version, buf.B)
	if err != nil {
		wire.Put(buf)
		ch.Release(b)
		return fmt.Errorf("%w: node %d: %v", proxyerr.UpstreamProtocol, u.key.node, err)
	}
	s.c.Fixup(ref.key, ref.version, resp)
	if controllerBound(ref.key) && answeredNotController(resp) {
		s.mu.Lock()
		live := !s.closed && ref.st != nil && !ref.st.done
		if live {
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if live {
			go s.retryAtController(u.key.node, ref, resp, buf, ch)
			return nil
		}
	}
	s.mu.Lock()
	wasPoll := u.poll == ref
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		u.noteFetchLocked(ref, fr)
	}
	st := ref.st
	if s.closed || st == nil || st.done {
		kept, dropped := s.keepLocked(u, ref, wasPoll, splitmerge.Result{Response: resp}, buf, ch)
		s.mu.Unlock()
		dropped.release(s)
		if !kept {
			wire.Put(buf)
			ch.Release(b)
		}
		return nil
	}
	act := s.gotLocked(st, ref, splitmerge.Result{Response: resp}, buf, ch)
	s.mu.Unlock()
	s.act(st, act)
	return nil
}

// retryAtController sends a part that broker from answered NOT_CONTROLLER
// (resp, read from buf) once more, to the controller a refresh of the
// view names, and records that answer instead; with no other controller
// to ask, or if asking fails, resp is the part's answer. A broker that
// answers NOT_CONTROLLER did nothing, so asking again is safe. The retry
// goes through the proxy's own client, as coordinator lookups do: the
// flusher alone dials the client connection's upstream connections, and
// every upstream connection authenticates as the proxy anyway. It runs
// on a goroutine of its own, so that the reader of from's connection
// goes on reading its other answers meanwhile.
func (s *Conn) retryAtController(from int32, ref *partRef, resp kmsg.Response, buf *wire.Buf, ch charge) {
	defer s.wg.Done()
	b := s.env.Budget
	part := atVersion{ref.st.plan.Parts[ref.i].Request, ref.version} // the plan is not changed once split
	// The controller may take the request's own timeout to answer
	// (CreateTopics waits for the topics to be created).
	ctx, cancel := context.WithTimeout(s.pctx, s.env.ProbeTimeout+time.Duration(part.Timeout())*time.Millisecond)
	defer cancel()
	res := splitmerge.Result{Response: resp}
	if err := s.v.Refresh(ctx); err == nil {
		if ctl := s.v.Controller(); ctl >= 0 && ctl != from {
			again, err := s.v.Broker(ctl).Request(ctx, part)
			switch {
			case err != nil:
				s.env.Log.Debug("asking the controller again failed", "request", kmsg.NameForKey(ref.key), "node", ctl, "err", err)
			default:
				again.SetVersion(ref.version)
				s.c.Fixup(ref.key, ref.version, again)
				wire.Put(buf)
				ch.Release(b)
				buf, ch = nil, charge{}
				res = splitmerge.Result{Response: again}
			}
		}
	}
	s.mu.Lock()
	st := ref.st
	if s.closed || st == nil || st.done {
		s.mu.Unlock()
		wire.Put(buf)
		ch.Release(b)
		return
	}
	act := s.gotLocked(st, ref, res, buf, ch)
	s.mu.Unlock()
	s.act(st, act)
}

// atVersion is a request the proxy's own client sends at exactly the
// client's version: kgo sends a request at the highest version both it
// and the broker serve, no higher than MaxVersion.
type atVersion struct {
	kmsg.Request
	v int16
}

func (a atVersion) MaxVersion() int16 { return a.v }

// Timeout is the request's own timeout, 0 for none: kgo waits that much
// longer for the answer (kmsg.TimeoutRequest).
func (a atVersion) Timeout() int32 {
	if t, ok := a.Request.(kmsg.TimeoutRequest); ok {
		return max(t.Timeout(), 0)
	}
	return 0
}

// answeredNotController reports whether every entry of a controller-bound
// answer is NOT_CONTROLLER: the broker asked did nothing, and is not the
// controller.
func answeredNotController(resp kmsg.Response) bool {
	code := kerr.NotController.Code
	all := func(n int, at func(int) int16) bool {
		for i := range n {
			if at(i) != code {
				return false
			}
		}
		return n > 0
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return all(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return all(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return all(len(r.Topics), func(i int) int16 { return r.Topics[i].ErrorCode })
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == code
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return all(len(r.Results), func(i int) int16 { return r.Results[i].ErrorCode })
	case *kmsg.UpdateFeaturesResponse:
		return r.ErrorCode == code
	}
	return false
}

// partFailed records that ref's part got no answer: its entries are
// answered with the retriable error of their kind, unless any broker
// answers it and it can be sent to another.
func (s *Conn) partFailed(ref *partRef, err error) {
	s.mu.Lock()
	st := ref.st
	if s.closed || st == nil || st.done {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if s.resend(ref) {
		return
	}
	s.mu.Lock()
	if s.closed || ref.st == nil || st.done {
		s.mu.Unlock()
		return
	}
	act := s.gotLocked(st, ref, splitmerge.Result{Err: err}, nil, charge{})
	s.mu.Unlock()
	s.act(st, act)
}

// resend sends ref's part, which failed, again once: to another broker
// when any broker answers it and sending it again changes nothing the
// first did not (it was never written: its broker is down, its dial
// failed; or it is a read), and to its own broker, on a new connection,
// when it is an ApiVersions part (every broker is asked for its own
// versions, and a client connection whose every part failed is closed:
// a connection reset in passing must not close it). It reports whether it
// did.
func (s *Conn) resend(ref *partRef) bool {
	st := ref.st
	if ref.fence || ref.tries > 0 || ref.round != 0 || st.plan == nil {
		return false
	}
	part := &st.plan.Parts[ref.i]
	var node int32
	switch {
	case part.Any && (!ref.wrote || splitmerge.Read(ref.key)):
		other, ok := s.otherNode(ref.node, ref.key)
		if !ok {
			return false
		}
		node = other
	case ref.key == keyApiVersions:
		node = ref.node
	default:
		return false
	}
	s.mu.Lock()
	u := s.ups[upKey{node, false}]
	if u != nil && u.gone != nil {
		u = nil
	}
	s.mu.Unlock()
	if u == nil {
		var err error
		if u, err = s.dial(upKey{node, false}); err != nil {
			return false
		}
	}
	again := &partRef{st: st, i: ref.i, key: ref.key, version: ref.version, tries: ref.tries + 1}
	s.mu.Lock()
	st.holds++ // this goroutine's, while it sends
	s.mu.Unlock()
	u.sendPart(st, part.Request, nil, again)
	s.letGo(st)
	return true
}

// gotLocked records part ref.i's result and says what it makes happen.
// The caller holds s.mu.
func (s *Conn) gotLocked(st *Split, ref *partRef, res splitmerge.Result, buf *wire.Buf, ch charge) int {
	if st.fetch != nil {
		return s.fetchGotLocked(st, ref, res, buf, ch)
	}
	st.results[ref.i] = res
	st.frames[ref.i], st.charges[ref.i] = buf, ch
	st.out--
	return s.nextLocked(st)
}

// nextLocked says what st does now. The caller holds s.mu.
func (s *Conn) nextLocked(st *Split) int {
	if st.fetch != nil {
		return s.fetchNextLocked(st)
	}
	if st.done || st.out > 0 || st.holds > 0 {
		return actNone
	}
	st.done = true
	return actFinish
}

// letGo ends a sender's hold on st.
func (s *Conn) letGo(st *Split) {
	s.mu.Lock()
	st.holds--
	act := s.nextLocked(st)
	s.mu.Unlock()
	s.act(st, act)
}

// What a result makes happen to its request.
const (
	actNone = iota
	actFinish
	actPoll // a Fetch's round 1 is in and fell short: round 2
)

// act does what a result made happen, with no lock held.
func (s *Conn) act(st *Split, act int) {
	switch act {
	case actFinish:
		s.finish(st)
	case actPoll:
		s.poll(st)
	}
}

// finish merges the answers of a whole request into the client's response
// and completes the request: delivery is the other topologies', in order.
// The merged response is encoded within the memory budget (encode), and
// the parts' answers are given back once it is.
func (s *Conn) finish(st *Split) {
	c, r := s.c, st.r
	b := s.env.Budget
	r.Merging()
	if st.fetch != nil {
		s.endFetch(st)
	}
	s.v.Learn(st.req, st.plan, st.results)
	resp, err := st.plan.Merge(st.results, s.v.Self())
	if err != nil {
		st.ReleaseAll(b)
		if errors.Is(err, splitmerge.ErrCannotAnswer) {
			err = fmt.Errorf("%w: %s cannot be answered: every broker asked failed", proxyerr.UpstreamFailed, kmsg.NameForKey(r.Header().Key))
		} else {
			err = fmt.Errorf("%w: %v", proxyerr.UpstreamProtocol, err)
		}
		c.Die(err)
		return
	}
	r.FixResponse(resp)
	if dc, ok := resp.(*kmsg.DescribeConfigsResponse); ok {
		rewrite.DescribeConfigs(dc, s.v)
	}
	if av, ok := resp.(*kmsg.ApiVersionsResponse); ok {
		c.Versions(av)
		if av.ErrorCode == kerr.UnsupportedVersion.Code {
			// As a broker answers a version it does not know:
			// with a v0 body, which clients read at v0 whatever
			// they asked (kroxylicious #2450).
			av.Version = 0
		}
	}
	resp, size := c.Quota(r, resp)
	out, ch, err := s.encodeMerged(st, resp, size)
	if err != nil {
		st.ReleaseAll(b)
		c.Die(err)
		return
	}
	if r.ForcedAck() {
		r.SetFailed(firstProduceError(resp))
	}
	st.ReleaseAll(b)
	s.txnDone(st)
	if err := c.Complete(r, out, ch); err != nil {
		c.Die(err)
	}
}

// firstProduceError is the first partition error of a merged Produce
// response, for an acks=0 request the proxy forwarded with acks=1.
func firstProduceError(resp kmsg.Response) error {
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok {
		return nil
	}
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// txnDone uncounts a transaction's write once its parts are all in, which
// may let its EndTxn go.
func (s *Conn) txnDone(st *Split) {
	if st.txn == "" {
		return
	}
	s.mu.Lock()
	if s.txns[st.txn]--; s.txns[st.txn] <= 0 {
		delete(s.txns, st.txn)
		s.cond.Broadcast()
	}
	st.txn = ""
	s.mu.Unlock()
}
