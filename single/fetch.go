package single

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// Fetch in the single topology is sessionless, and its wait and minimum
// bytes are honoured over the parts (DESIGN.md, "Fetch"): a plan of one
// part, or a fetch that does not wait, goes as the client sent it;
// otherwise every part is first asked with no wait (round 1), and if
// their records together fall short of the minimum, asked again with the
// rest of the wait and the client's minimum (round 2, the long polls).
// The merged answer goes when the latest answers reach the minimum, when
// every poll is in, or when the wait ends, each part answered by its
// latest answer; a wait that ends in round 1 answers the parts still out
// as fetchlate.go says. A long poll still out when its request is answered is
// abandoned: it stays on its connection, where the broker answers it
// when its own wait ends. Until then a later Fetch asking that broker the
// very same thing takes it over instead of asking again, and its round 1
// is answered from what that broker last said of its partitions (no
// records, the watermarks a moment old), so that one idle broker does not
// hold up every fetch behind its poll.

// maxMarks bounds the partitions an upstream connection remembers the
// watermarks of.
const maxMarks = 10000

// fetchRounds is the state of a Fetch whose rounds run.
type fetchRounds struct {
	min      int32
	deadline time.Time
	round    int8       // 0 sent as asked, 1, 2
	out      int        // parts unanswered in this round
	bytes    []int      // record bytes of results[i]
	refs     []*partRef // this round's parts still out
	sigs     [][]byte   // part i as asked, waits aside
	timer    *time.Timer
	failed   bool  // a part got no answer
	cut      bool  // a part's answer was cut short: its broker has more than the proxy holds
	graced   bool  // round 1's wait ended, and its parts still out had lateGrace more (fetchlate.go)
	toPoll   []int // parts to ask (again) with the rest of the wait
	// fills[i]: the partitions round 1 left out of part i, answered
	// (fetchtrim.go); nil when it left none out of any part.
	fills [][]kmsg.FetchResponseTopic
}

// markKey names a partition as a Fetch answer names it.
type markKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// fetchMark is what a broker last said of a partition, in answer to a
// fetch sent at tick sent (fetchdeps.go).
type fetchMark struct {
	hw, lso, logStart int64
	sent              uint64
}

// startFetch sends a Fetch's parts, each on its broker's Fetch
// connection. Flusher only; st.out holds the flusher's own count.
func (s *Conn) startFetch(st *Split) {
	r := st.r
	req := st.req.(*kmsg.FetchRequest)
	n := len(st.plan.Parts)
	f := &fetchRounds{min: req.MinBytes, bytes: make([]int, n), refs: make([]*partRef, n), sigs: make([][]byte, n)}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	f.deadline = time.Now().Add(wait)
	if n > 1 && wait > 0 {
		f.round = 1
	}
	s.mu.Lock()
	st.fetch = f
	f.out = n
	st.holds++
	s.mu.Unlock()
	for i := range st.plan.Parts {
		part := &st.plan.Parts[i]
		ref := &partRef{st: st, i: i, key: keyFetch, version: st.plan.Version, round: f.round, node: part.Node, pieces: r.Pieces()}
		s.awaitWrites(part.Request.(*kmsg.FetchRequest))
		u, err := s.upstream(part.Node, true)
		if err != nil {
			s.partFailed(ref, err)
			continue
		}
		q := part.Request
		if f.round == 1 {
			full := part.Request.(*kmsg.FetchRequest)
			fq := *full
			fq.MaxWaitMillis, fq.MinBytes = 0, 0
			q = &fq
			f.sigs[i] = fetchSig(full)
			ref.sig, ref.maxBytes = f.sigs[i], full.MaxBytes
			if taken, held := s.takeOver(st, u, ref, &fq); taken || held {
				continue
			}
		} else {
			s.mu.Lock()
			k := s.unkeepLocked(u)
			s.mu.Unlock()
			k.release(s)
		}
		frame := encodePart(r, q)
		if s.outlasts(u, f.deadline) {
			// The broker answers the abandoned poll on u first, when
			// its wait ends, which is after this fetch's: the part
			// goes on a new connection, and u closes once answered.
			s.retire(u, false)
			if u, err = s.upstream(part.Node, true); err != nil {
				wire.Put(frame)
				s.partFailed(ref, err)
				continue
			}
		}
		s.mu.Lock()
		f.refs[i] = ref
		s.mu.Unlock()
		u.sendPart(st, q, frame, ref)
	}
	if f.round == 1 {
		s.mu.Lock()
		s.armWaitLocked(st, time.Until(f.deadline))
		s.mu.Unlock()
	}
	s.letGo(st)
}

// outlasts reports whether u holds an abandoned long poll whose wait ends
// after deadline.
func (s *Conn) outlasts(u *upstream, deadline time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return u.poll != nil && u.poll.st == nil && u.gone == nil && u.poll.until.After(deadline)
}

// takeOver answers a round-1 part from an abandoned long poll on u that
// asks the very same thing, sent after the last write to its partitions
// was answered: from what u's broker last said of the partitions when it
// said something of each since those writes, else by the poll's own
// answer when it comes, if that is by st's deadline: a poll that answers
// later would leave the part late (fetchlate.go). fq is the part as
// round 1 sends it, which first leaves out the partitions its maximum does
// not hold when its broker answers past it (fetchtrim.go), ref.sig then
// what it asks. It reports whether it took the part, and else whether
// the part is held: not sent behind a part its broker is late with, the
// deadline answers it (fetchlate.go).
func (s *Conn) takeOver(st *Split, u *upstream, ref *partRef, fq *kmsg.FetchRequest) (taken, held bool) {
	q := st.plan.Parts[ref.i].Request.(*kmsg.FetchRequest)
	s.mu.Lock()
	if fills := u.trimLocked(fq); fills != nil {
		f := st.fetch
		if f.fills == nil {
			f.fills = make([][]kmsg.FetchResponseTopic, len(f.refs))
		}
		f.fills[ref.i] = fills
		ref.sig = fetchSig(fq)
		if n := s.env.FetchTrimmed; n != nil {
			n.Add(1)
		}
	}
	sig := ref.sig
	act, ok, dropped := s.takeKeptLocked(st, u, ref, sig)
	if ok {
		s.mu.Unlock()
		s.act(st, act)
		return true, false
	}
	poll := u.poll
	if poll == nil || poll.st != nil || poll.version != ref.version || !bytes.Equal(poll.sig, sig) || poll.maxBytes > q.MaxBytes || u.gone != nil || !s.freshLocked(poll.sent, q) {
		if poll != nil && poll.st == nil && poll.round == 1 {
			// A part answered early that asked something else: its
			// answer is not kept.
			u.poll = nil
		}
		held = s.heldLocked(st, u, ref)
		s.mu.Unlock()
		dropped.release(s)
		return false, held
	}
	if poll.round == 1 {
		// A part answered early, its answer on its way: this part
		// takes it, and may be answered early in turn.
		poll.st, poll.i = st, ref.i
		st.fetch.refs[ref.i] = poll
		s.mu.Unlock()
		dropped.release(s)
		return true, false
	}
	if resp, ok := u.synthLocked(q); ok {
		act := s.gotLocked(st, ref, splitmerge.Result{Response: resp}, nil, charge{})
		s.mu.Unlock()
		dropped.release(s)
		s.act(st, act)
		return true, false
	}
	if poll.until.After(st.fetch.deadline) {
		held = s.heldLocked(st, u, ref)
		s.mu.Unlock()
		dropped.release(s)
		return false, held
	}
	poll.st, poll.i, poll.round = st, ref.i, ref.round
	st.fetch.refs[ref.i] = poll
	s.mu.Unlock()
	dropped.release(s)
	return true, false
}

// fetchGotLocked records a Fetch part's answer, in place of an earlier
// round's. A long poll that failed leaves its round-1 answer. The caller
// holds s.mu.
func (s *Conn) fetchGotLocked(st *Split, ref *partRef, res splitmerge.Result, buf *wire.Buf, ch charge) int {
	f, i := st.fetch, ref.i
	if f.refs[i] == ref {
		f.refs[i] = nil
	}
	f.out--
	if res.Err != nil {
		// A failed long poll leaves its round-1 answer, and ends the
		// wait: nothing watches that broker any more, and the
		// client's next fetch asks it on a new connection.
		f.failed = true
		if ref.round == 2 {
			return s.fetchNextLocked(st)
		}
	}
	wire.Put(st.frames[i])
	if old := &st.charges[i]; st.room != nil && old.Resp {
		// An earlier round's answer: its memory is the room's again,
		// for this one's.
		st.room.give(old.N)
		*old = charge{}
	} else {
		old.Release(s.env.Budget)
	}
	if fr, ok := res.Response.(*kmsg.FetchResponse); ok && res.Err == nil && f.fills != nil && f.fills[i] != nil {
		fillFetch(fr, f.fills[i])
	}
	st.results[i], st.frames[i], st.charges[i] = res, buf, ch
	f.bytes[i] = recordBytes(res)
	f.cut = f.cut || ref.cut
	if ref.round == 2 && f.bytes[i] < int(f.min) && time.Until(f.deadline) > repollMin {
		// A poll taken over answered when its own, shorter, wait
		// ended: ask this broker again for the rest of this one.
		f.toPoll = append(f.toPoll, i)
	}
	return s.fetchNextLocked(st)
}

// repollMin is the least wait left for which a part whose long poll
// answered short is asked again.
const repollMin = 10 * time.Millisecond

// fetchNextLocked decides what st's Fetch does now. The caller holds s.mu.
func (s *Conn) fetchNextLocked(st *Split) int {
	f := st.fetch
	if st.done || st.holds > 0 {
		return actNone
	}
	total := 0
	for _, b := range f.bytes {
		total += b
	}
	enough := total >= int(f.min)
	switch f.round {
	case 0:
		if f.out > 0 {
			return actNone
		}
	case 1:
		if f.out > 0 {
			if !enough || total == 0 || !s.earlyLocked(st) {
				return actNone
			}
			break
		}
		if !enough && !f.failed && !f.cut && time.Now().Before(f.deadline) {
			f.round = 2
			for i := range f.sigs {
				f.toPoll = append(f.toPoll, i)
			}
			return actPoll
		}
	case 2:
		if !enough && !f.failed && !f.cut && len(f.toPoll) > 0 {
			return actPoll
		}
		if f.out > 0 && !enough && !f.failed && !f.cut {
			return actNone
		}
	}
	st.done = true
	return actFinish
}

// poll starts round 2: every part that answered round 1 is asked again,
// with the rest of the wait, on the connection that answered it; a part
// whose connection is gone keeps its answer. A connection still marked
// dialling may have answered round 1 already: the parts that waited for
// its dial are sent before it is cleared, and their answers may be in
// first. Its poll waits behind them, encoded now, since the wait may end
// and the request be answered before it is sent. A timer ends the wait.
func (s *Conn) poll(st *Split) {
	r, f := st.r, st.fetch
	type send struct {
		u     *upstream
		ref   *partRef
		frame *wire.Buf
	}
	var sends []send
	s.mu.Lock()
	rest := time.Until(f.deadline)
	st.holds++ // this goroutine's, as the flusher's in round 1
	for _, i := range f.toPoll {
		u := s.ups[upKey{st.plan.Parts[i].Node, true}]
		if u == nil || u.gone != nil || f.sigs[i] == nil || st.done {
			continue
		}
		pq := st.plan.Parts[i].Request.(*kmsg.FetchRequest)
		ref := &partRef{st: st, i: i, key: keyFetch, version: st.plan.Version, round: 2, sig: f.sigs[i], maxBytes: pq.MaxBytes, until: time.Now().Add(rest)}
		f.out++
		if poll := u.poll; poll != nil && poll.st == nil && poll.version == ref.version && bytes.Equal(poll.sig, ref.sig) && poll.maxBytes <= pq.MaxBytes &&
			s.freshLocked(poll.sent, pq) {
			// Its wait may end before this one's: when it answers
			// short, the part is asked again (fetchGotLocked).
			poll.st, poll.i, poll.round = st, i, 2
			f.refs[i] = poll
			continue
		}
		q := *st.plan.Parts[i].Request.(*kmsg.FetchRequest)
		q.MaxWaitMillis = int32(max(rest.Milliseconds(), 1))
		q.MinBytes = f.min
		f.refs[i], u.poll = ref, ref
		sends = append(sends, send{u, ref, encodePart(r, &q)})
	}
	f.toPoll = f.toPoll[:0]
	s.armWaitLocked(st, rest)
	s.mu.Unlock()
	for _, sd := range sends {
		if sd.u.queueIfDialing(queuedPart{st: st, ref: sd.ref, vec: vecFrame{head: sd.frame, vec: [][]byte{sd.frame.B}}}) {
			continue
		}
		sd.u.send([][]byte{sd.frame.B}, []*partRef{sd.ref})
		wire.Put(sd.frame)
	}
	s.letGo(st)
}

// armWaitLocked starts the timer that ends st's Fetch's wait in d, unless
// one runs. The caller holds s.mu.
func (s *Conn) armWaitLocked(st *Split, d time.Duration) {
	f := st.fetch
	if f.timer != nil || st.done || s.closed {
		return
	}
	s.wg.Add(1)
	f.timer = time.AfterFunc(d, func() {
		defer s.wg.Done()
		s.waitEnded(st)
	})
	s.waits[f.timer] = true
}

// waitEnded answers a Fetch whose wait ended with the answers it has; in
// round 1, its parts still out are answered first (fetchlate.go), or
// given a grace.
func (s *Conn) waitEnded(st *Split) {
	f := st.fetch
	s.mu.Lock()
	delete(s.waits, f.timer)
	if st.done || s.closed {
		s.mu.Unlock()
		return
	}
	if f.round == 1 && f.out > 0 && !s.lateLocked(st) {
		f.timer = nil
		s.armWaitLocked(st, lateGrace)
		s.mu.Unlock()
		return
	}
	st.done = true
	s.mu.Unlock()
	s.finish(st)
}

// endFetch abandons a finished Fetch's long polls still out and stops its
// timer; finish calls it before merging.
func (s *Conn) endFetch(st *Split) {
	f := st.fetch
	s.mu.Lock()
	for i, ref := range f.refs {
		if ref != nil {
			ref.st = nil
			f.refs[i] = nil
		}
	}
	t := f.timer
	f.timer = nil
	stop := t != nil && s.waits[t]
	delete(s.waits, t)
	s.mu.Unlock()
	if stop && t.Stop() {
		s.wg.Done()
	}
}

// noteFetchLocked learns what a Fetch answer read from u says of its
// partitions, and that u's long poll, if this was it, is in. The caller
// holds s.mu.
func (u *upstream) noteFetchLocked(ref *partRef, resp *kmsg.FetchResponse) {
	if u.poll == ref {
		u.poll = nil
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			k := markKey{t.Topic, t.TopicID, p.Partition}
			if p.ErrorCode != 0 {
				delete(u.marks, k)
				continue
			}
			if u.marks == nil {
				u.marks = make(map[markKey]fetchMark)
			}
			if _, ok := u.marks[k]; ok || len(u.marks) < maxMarks {
				u.marks[k] = fetchMark{hw: p.HighWatermark, lso: p.LastStableOffset, logStart: p.LogStartOffset, sent: ref.sent}
			}
		}
	}
}

// synthLocked answers q from what u's broker last said of each of its
// partitions: no records, the watermarks it gave. It reports false when
// it said nothing yet of one of them, or nothing since the last write to
// it was answered. The caller holds s.mu.
func (u *upstream) synthLocked(q *kmsg.FetchRequest) (*kmsg.FetchResponse, bool) {
	s := u.s
	table := s.v.Table()
	out := kmsg.NewPtrFetchResponse()
	out.Version = q.Version
	for i := range q.Topics {
		t := &q.Topics[i]
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			m, ok := u.freshMarkLocked(table, t.Topic, t.TopicID, p.Partition)
			if !ok {
				return nil, false
			}
			rt.Partitions = append(rt.Partitions, m.answer(p.Partition))
		}
		out.Topics = append(out.Topics, rt)
	}
	return out, true
}

// answer is partition's answer from m: no records, the watermarks its
// broker gave.
func (m fetchMark) answer(partition int32) kmsg.FetchResponseTopicPartition {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = partition
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = m.hw, m.lso, m.logStart
	rp.RecordBatches = []byte{} // empty, not null, as a broker answers
	return rp
}

// freshMarkLocked returns what u's broker last said of a partition, and
// false when it said nothing yet, or nothing since the last write to it
// was answered. The caller holds s.mu.
func (u *upstream) freshMarkLocked(table *splitmerge.Table, topic string, id [16]byte, partition int32) (fetchMark, bool) {
	m, ok := u.marks[markKey{topic, id, partition}]
	if !ok || u.s.writtenSinceLocked(table, m.sent, topic, id, partition) {
		return fetchMark{}, false
	}
	return m, true
}

// fetchSig is what a Fetch part asks, its waits and its maximum bytes
// aside, in one order of its topics and partitions: clients turn the
// order of what they fetch from one request to the next, so that no
// partition always comes last, and the proxy lowers the maximum to the
// memory free (reserveFetchRoom). An answer to a part of the same sig
// that asked no more bytes answers this one.
func fetchSig(q *kmsg.FetchRequest) []byte {
	c := *q
	c.MaxWaitMillis, c.MinBytes, c.MaxBytes = 0, 0, 0
	c.Topics = slices.Clone(q.Topics)
	slices.SortFunc(c.Topics, func(a, b kmsg.FetchRequestTopic) int {
		if n := strings.Compare(a.Topic, b.Topic); n != 0 {
			return n
		}
		return bytes.Compare(a.TopicID[:], b.TopicID[:])
	})
	for i := range c.Topics {
		t := &c.Topics[i]
		t.Partitions = slices.Clone(t.Partitions)
		slices.SortFunc(t.Partitions, func(a, b kmsg.FetchRequestTopicPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	}
	return c.AppendTo(nil)
}

// recordBytes is how many record bytes a Fetch answer carries.
func recordBytes(res splitmerge.Result) int {
	fr, ok := res.Response.(*kmsg.FetchResponse)
	if res.Err != nil || !ok {
		return 0
	}
	n := 0
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			n += len(fr.Topics[i].Partitions[j].RecordBatches)
		}
	}
	return n
}
