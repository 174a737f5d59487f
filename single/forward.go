package single

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// Decode reads a request's body with kmsg at parse time, so that a body
// kmsg cannot read closes the connection there, as any malformed frame
// does. Strings are copied; byte fields (records) alias the frame, which
// the request keeps until its parts are written. What the decoded request
// costs was reserved before (Reserve).
func (st *Split) Decode() error {
	hdr := st.r.Header()
	req := kmsg.RequestForKey(hdr.Key)
	req.SetVersion(hdr.Version)
	if err := req.ReadFrom(st.r.Frame().B[hdr.Body:]); err != nil {
		return err
	}
	st.req = req
	return nil
}

// Req is the request decoded: what is split, changed in place by what
// the proxy does to a request before it is sent (authorization, quotas).
func (st *Split) Req() kmsg.Request { return st.req }

// Forward splits st's request over the view and sends its parts; the
// flusher calls it, one request at a time in dispatch order, so that on
// every upstream connection the parts keep the client's order.
// unanswered: no answer comes (acks=0 in connection mode); write: the
// request writes.
func (s *Conn) Forward(st *Split, now time.Time, unanswered, write bool) {
	c, r := s.c, st.r
	hdr := r.Header()
	if err := s.findCoordinators(st.req); err != nil && s.pctx.Err() == nil {
		s.env.Log.Debug("coordinator lookup failed", append(c.Who(), "request", kmsg.NameForKey(hdr.Key), "err", err)...)
	}
	var err error
	if len(s.v.Split().Brokers()) == 0 {
		// Nothing is known of the cluster yet (the start-up discovery
		// failed, or has not run): ask now, once for this request.
		ctx, cancel := context.WithTimeout(s.pctx, s.env.ProbeTimeout)
		err = s.v.Refresh(ctx)
		cancel()
	}
	var plan *splitmerge.Plan
	if err == nil {
		plan, err = splitmerge.Split(st.req, s.v.Split())
	}
	if err != nil {
		c.Die(fmt.Errorf("%w: %s: %v", proxyerr.UpstreamFailed, kmsg.NameForKey(hdr.Key), err))
		return
	}
	if plan.Stale {
		s.v.Stale()
	}
	st.plan = plan
	n := len(plan.Parts)
	st.results = make([]splitmerge.Result, n)
	st.frames = make([]*wire.Buf, n)
	st.charges = make([]charge, n)
	if n == 0 {
		st.done = true
		if unanswered {
			// Nothing of it goes upstream (no leader of its
			// partitions is known) and no answer comes: it is let
			// go, as one whose parts were all sent is, never
			// completed, which only a sequenced request may be.
			s.release(st)
			return
		}
		s.finish(st)
		return
	}
	if plan.EndTxn {
		s.waitTxn(plan.TransactionalID)
	}
	if plan.TransactionalID != "" && !plan.EndTxn && !unanswered {
		s.mu.Lock()
		s.txns[plan.TransactionalID]++
		s.mu.Unlock()
		st.txn = plan.TransactionalID
	}
	if hdr.Key == keyFetch {
		FetchShare(plan, s.env.Budget, r.Pieces())
		if err := s.reserveFetchRoom(st); err != nil {
			c.Die(err)
			return
		}
		s.startFetch(st)
		return
	}
	st.out, st.holds, st.unanswered = n, 1, unanswered
	var vecs []vecFrame
	if hdr.Key == keyProduce {
		vecs = s.vecFrametors(r, st.req, plan.Parts)
	}
	spliced := false
	if un := r.Unread(); un != nil {
		spliced, err = s.spliceParts(st, vecs, un, unanswered)
		if err == nil && !spliced {
			// The parts go from the frame's copy, made whole.
			err = un.Take(r.Frame().B)
		}
		if err != nil {
			if !spliced {
				for i := range vecs {
					vecs[i].put()
				}
			}
			c.Die(err)
			return
		}
	}
	writes := 0
	for i := range plan.Parts {
		if spliced {
			if write {
				writes++
			}
			continue
		}
		part := &plan.Parts[i]
		node := part.Node
		if part.Any {
			node = s.anyNode(node, plan.Key)
		}
		var ref *partRef
		if !unanswered {
			ref = &partRef{st: st, i: i, key: plan.Key, version: plan.Version, node: node}
		}
		u, err := s.upstream(node, false)
		if err != nil {
			// Its broker is down, or not allowed: the part is
			// answered with its retriable error at once, or sent
			// to another broker where any will do.
			if ref != nil {
				s.partFailed(ref, err)
			} else {
				s.unsent(st, part.Request)
			}
			if vecs != nil {
				vecs[i].put()
			}
			continue
		}
		if vecs != nil {
			err = u.sendVec(st, part.Request, vecs[i], ref)
		} else {
			err = u.sendPart(st, part.Request, nil, ref)
		}
		if err != nil && ref == nil {
			s.unsent(st, part.Request)
		}
		if write {
			writes++
		}
	}
	if hdr.Key == keyProduce {
		s.mu.Lock()
		// Parts waiting for a dial are slices of the frame, or
		// encoded from it, when they are sent: the last one sent
		// drops it.
		st.dropLater = st.queued > 0
		drop := !st.dropLater
		s.mu.Unlock()
		if drop {
			s.dropRecords(st)
		}
	}
	if writes > 0 {
		c.Forwarded(now)
	}
	if unanswered {
		s.mu.Lock()
		st.holds--
		last := st.holds == 0
		s.mu.Unlock()
		if last {
			s.release(st)
		}
		return
	}
	s.letGo(st)
}

// errUnsent is the failure of a part no answer comes for that was never
// sent, as Merge is given it.
var errUnsent = errors.New("part not sent")

// unsent records req, a part of st no answer comes for, as not sent: its
// broker is down or not allowed, its dial failed, or its write did.
func (s *Conn) unsent(st *Split, req kmsg.Request) {
	s.mu.Lock()
	st.unsent = append(st.unsent, req)
	s.mu.Unlock()
}

// release lets st, which no answer comes for, go once every part of it
// was sent or failed, with the answer it would have got had it asked for
// one, when something of it was not written: the parts not sent failed,
// as Merge answers a failed part (NOT_LEADER_OR_FOLLOWER for a Produce's
// partitions), those sent accepted, with no offset. The audit trail
// records that answer, so that it never names as written a partition
// that was not sent.
func (s *Conn) release(st *Split) {
	s.mu.Lock()
	unsent := st.unsent
	st.unsent = nil
	s.mu.Unlock()
	var failed kmsg.Response
	// A stale plan answered some partition itself (its leader unknown):
	// not sent either.
	if len(unsent) > 0 || st.plan.Stale {
		results := make([]splitmerge.Result, len(st.plan.Parts))
		for i := range st.plan.Parts {
			if req := st.plan.Parts[i].Request; slices.Contains(unsent, req) {
				results[i].Err = errUnsent
			} else {
				// Accepted: no error, no offset known.
				results[i].Response = splitmerge.ErrorResponse(req, 0, "")
			}
		}
		if resp, err := st.plan.Merge(results, s.v.Self()); err == nil {
			failed = resp
		}
	}
	s.c.Release(st.r, failed)
}

// encodePart encodes a part behind the client's request header; the
// correlation id is set when it is sent.
func encodePart(r Request, req kmsg.Request) *wire.Buf {
	frame := r.Frame()
	b := wire.Get(len(frame.B) + 256)
	out := wire.AppendRequest(b.B[:0], frame.B, *r.Header(), req.AppendTo)
	if cap(out) != cap(b.B) {
		wire.Put(b)
		return &wire.Buf{B: out}
	}
	b.B = out
	return b
}

// dropRecords lets a Produce's frame go once its parts are written: the
// records, which the parts' frames sent or were slices of, are needed by
// nothing after.
func (s *Conn) dropRecords(st *Split) {
	drop := func(req kmsg.Request) {
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			for i := range pr.Topics {
				for j := range pr.Topics[i].Partitions {
					pr.Topics[i].Partitions[j].Records = nil
				}
			}
		}
	}
	drop(st.req)
	for i := range st.plan.Parts {
		drop(st.plan.Parts[i].Request)
	}
	s.c.DropFrame(st.r)
}

// anyNode picks the broker for a part of key any broker answers: the
// controller the view knows for the requests a broker that is not the
// controller refuses (Kafka before KRaft, and kfake, answer them
// NOT_CONTROLLER), else one the client connection is connected to
// already, else the view's choice, passing over brokers a dial just
// failed to.
func (s *Conn) anyNode(node int32, key int16) int32 {
	if ctl := s.v.Controller(); ctl >= 0 && controllerBound(key) && !s.v.IsDown(ctl) {
		return ctl
	}
	s.mu.Lock()
	best := int32(-1)
	for k, u := range s.ups {
		if !k.fetch && u.gone == nil && (best < 0 || k.node < best) {
			best = k.node
		}
	}
	s.mu.Unlock()
	if best >= 0 {
		return best
	}
	if !s.v.IsDown(node) {
		return node
	}
	for _, b := range s.v.Split().Brokers() {
		if !s.v.IsDown(b) {
			return b
		}
	}
	return node
}

// otherNode picks the broker to send again a part of key any broker
// answers, which failed on failed: as anyNode does, failed and the
// brokers that are down passed over. It reports false when there is none.
func (s *Conn) otherNode(failed int32, key int16) (int32, bool) {
	if ctl := s.v.Controller(); ctl >= 0 && ctl != failed && controllerBound(key) && !s.v.IsDown(ctl) {
		return ctl, true
	}
	s.mu.Lock()
	best := int32(-1)
	for k, u := range s.ups {
		if !k.fetch && k.node != failed && u.gone == nil && (best < 0 || k.node < best) {
			best = k.node
		}
	}
	s.mu.Unlock()
	if best >= 0 {
		return best, true
	}
	for _, b := range s.v.Split().Brokers() {
		if b != failed && !s.v.IsDown(b) {
			return b, true
		}
	}
	return 0, false
}

// controllerBound reports whether requests of key go to the controller
// where brokers do not forward them: CreateTopics, DeleteTopics,
// CreatePartitions, ElectLeaders, AlterUserSCRAMCredentials and
// UpdateFeatures.
func controllerBound(key int16) bool {
	switch key {
	case 19, 20, 37, 43, 51, 57:
		return true
	}
	return false
}

// findCoordinators looks up the coordinators req needs that the view
// lacks, so that the split finds them.
func (s *Conn) findCoordinators(req kmsg.Request) error {
	var keys [2][]string
	splitmerge.Coordinators(req, func(typ int8, key string) {
		if typ == splitmerge.CoordinatorGroup || typ == splitmerge.CoordinatorTransaction {
			keys[typ] = append(keys[typ], key)
		}
	})
	var errs []error
	for typ, ks := range keys {
		if missing := s.v.MissingCoordinators(int8(typ), ks); len(missing) > 0 {
			ctx, cancel := context.WithTimeout(s.pctx, s.env.ProbeTimeout)
			errs = append(errs, s.v.Lookup(ctx, int8(typ), missing))
			cancel()
		}
	}
	return proxyerr.OneLine(errs...)
}

// waitTxn holds an EndTxn until every earlier write of its transaction
// that went to a broker has been answered: its coordinator must not end
// the transaction before the records and offsets it ends have reached
// their brokers. The flusher waits, so what follows the EndTxn waits
// with it.
func (s *Conn) waitTxn(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.txns[id] > 0 && !s.closed {
		s.cond.Wait()
	}
}
