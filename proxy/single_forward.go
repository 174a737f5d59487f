package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// decode reads a request's body with kmsg at parse time, so that a body
// kmsg cannot read closes the connection there, as any malformed frame
// does. Strings are copied; byte fields (records) alias the frame, which
// the request keeps until its parts are written. What the decoded request
// costs was reserved before (reserveSplit).
func (s *singleConn) decode(r *request) error {
	req := kmsg.RequestForKey(r.hdr.Key)
	req.SetVersion(r.hdr.Version)
	if err := req.ReadFrom(r.frame.B[r.hdr.Body:]); err != nil {
		return err
	}
	r.split.req = req
	return nil
}

// flush is conn.flush in the single topology: the dispatched requests are
// split and their parts written, one request at a time in dispatch order,
// so that on every upstream connection the parts keep the client's order.
// The caller has set c.flushing; flush clears it.
func (s *singleConn) flush() {
	c := s.c
	for {
		c.mu.Lock()
		if c.dead.Load() || len(c.outq) == 0 {
			c.flushing = false
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		r := c.outq[0]
		n := copy(c.outq, c.outq[1:])
		c.outq[n] = nil
		c.outq = c.outq[:n]
		now := c.p.metrics.Now()
		if m := c.p.metrics; m != nil {
			r.sentAt = now
			if r.ord.Kind == ordering.Write {
				m.WriteWait(metrics.PhaseQueued, now.Sub(r.readAt))
			}
		}
		c.mu.Unlock()
		s.forward(r, now)
	}
}

// forward splits r over the view and sends its parts.
func (s *singleConn) forward(r *request, now time.Time) {
	c, st := s.c, r.split
	if err := s.findCoordinators(st.req); err != nil && c.p.ctx.Err() == nil {
		c.p.log.Debug("coordinator lookup failed", append(c.who(), "request", kmsg.NameForKey(r.hdr.Key), "err", err)...)
	}
	var err error
	if len(s.v.Split().Brokers()) == 0 {
		// Nothing is known of the cluster yet (the start-up discovery
		// failed, or has not run): ask now, once for this request.
		ctx, cancel := context.WithTimeout(c.p.ctx, probeTimeout)
		err = s.v.Refresh(ctx)
		cancel()
	}
	var plan *splitmerge.Plan
	if err == nil {
		plan, err = splitmerge.Split(st.req, s.v.Split())
	}
	if err != nil {
		c.die(fmt.Errorf("%w: %s: %v", ErrUpstreamFailed, kmsg.NameForKey(r.hdr.Key), err))
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
		s.finish(st)
		return
	}
	if plan.EndTxn {
		s.waitTxn(plan.TransactionalID)
	}
	unanswered := r.noResp && r.upCorr == noCorrelation // acks=0 in connection mode: nothing comes back
	if plan.TransactionalID != "" && !plan.EndTxn && !unanswered {
		s.mu.Lock()
		s.txns[plan.TransactionalID]++
		s.mu.Unlock()
		st.txn = plan.TransactionalID
	}
	if r.hdr.Key == keyFetch {
		single.FetchShare(plan, s.c.p.budget)
		if err := s.reserveFetchRoom(st); err != nil {
			c.die(err)
			return
		}
		s.startFetch(st)
		return
	}
	st.out, st.holds, st.unanswered = n, 1, unanswered
	var vecs []vecFrame
	if r.hdr.Key == keyProduce {
		vecs = s.vecFrametors(r, st.req, plan.Parts)
	}
	writes := 0
	for i := range plan.Parts {
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
			}
			if vecs != nil {
				vecs[i].put()
			}
			continue
		}
		if vecs != nil {
			u.sendVec(st, part.Request, vecs[i], ref)
		} else {
			u.sendPart(st, part.Request, nil, ref)
		}
		if r.ord.Kind == ordering.Write {
			writes++
		}
	}
	if r.hdr.Key == keyProduce {
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
		c.forwardWritten(1, now)
	}
	if unanswered {
		s.mu.Lock()
		st.holds--
		last := st.holds == 0
		s.mu.Unlock()
		if last {
			putRequest(r)
		}
		return
	}
	s.letGo(st)
}

// encodePart encodes a part behind the client's request header; the
// correlation id is set when it is sent.
func encodePart(r *request, req kmsg.Request) *wire.Buf {
	b := wire.Get(len(r.frame.B) + 256)
	out := wire.AppendRequest(b.B[:0], r.frame.B, r.hdr, req.AppendTo)
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
func (s *singleConn) dropRecords(st *splitState) {
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
	r, c := st.r, s.c
	if r.frame == nil {
		return
	}
	held := len(r.frame.B)
	wire.Put(r.frame)
	r.frame = nil
	r.frameCharge.release(c.p.budget)
	if r.upCorr != noCorrelation {
		c.mu.Lock()
		c.seq.Free(held)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// anyNode picks the broker for a part of key any broker answers: the
// controller the view knows for the requests a broker that is not the
// controller refuses (Kafka before KRaft, and kfake, answer them
// NOT_CONTROLLER), else one the client connection is connected to
// already, else the view's choice, passing over brokers a dial just
// failed to.
func (s *singleConn) anyNode(node int32, key int16) int32 {
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
func (s *singleConn) otherNode(failed int32, key int16) (int32, bool) {
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
func (s *singleConn) findCoordinators(req kmsg.Request) error {
	var keys [2][]string
	splitmerge.Coordinators(req, func(typ int8, key string) {
		if typ == splitmerge.CoordinatorGroup || typ == splitmerge.CoordinatorTransaction {
			keys[typ] = append(keys[typ], key)
		}
	})
	var errs []error
	for typ, ks := range keys {
		if missing := s.v.MissingCoordinators(int8(typ), ks); len(missing) > 0 {
			ctx, cancel := context.WithTimeout(s.c.p.ctx, probeTimeout)
			errs = append(errs, s.v.Lookup(ctx, int8(typ), missing))
			cancel()
		}
	}
	return oneLine(errs...)
}

// waitTxn holds an EndTxn until every earlier write of its transaction
// that went to a broker has been answered: its coordinator must not end
// the transaction before the records and offsets it ends have reached
// their brokers. The flusher waits, so what follows the EndTxn waits
// with it.
func (s *singleConn) waitTxn(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.txns[id] > 0 && !s.closed {
		s.cond.Wait()
	}
}
