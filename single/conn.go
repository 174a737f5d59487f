package single

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

// Conn is a client connection's side of the single topology: an
// upstream connection per broker its requests went to (and a second one
// per broker for Fetch, whose long polls would hold up everything behind
// them, since a broker answers a connection's requests one at a time),
// the transactions it has writes in flight for, and what a Fetch must
// wait for or not reuse after a write (fetchdeps.go).
//
// Goroutines: the flusher (the client reader, or a flusher a completion
// started, one at a time as in the other topologies) writes every part
// and fence, except the Fetch rounds' later parts, which the goroutine
// that ends a round writes, and a part that waited for its connection's
// dial, or is sent again to another broker after a failure. No dial
// happens on the flusher: each runs on a goroutine of its own, parts for
// its broker wait for it in order and go once it connects, or fail
// together when it does not, so that one broker that does not answer
// holds only its own parts. Each upstream connection has its own reader
// while it has requests in flight, as the proxy's one upstream has in
// the other topologies. Locks: the client connection's (proxy's conn:
// wmu, then mu), then s.mu; an upstream's wmu is taken with
// none of them held.
type Conn struct {
	c   Client
	v   *View
	env *Env
	wg  *sync.WaitGroup // the client connection's goroutines
	// halt closes when the client connection dies: waits for memory
	// give up.
	halt        <-chan struct{}
	maxResponse int32

	// ctx ends the dials in progress when the connection dies; pctx is
	// the proxy's, which ctx is made from.
	ctx, pctx context.Context
	cancel    context.CancelFunc

	// mu guards what follows and every upstream's fields marked so;
	// cond wakes the flusher waiting for an upstream to drain or a
	// transaction's writes to be answered.
	mu     sync.Mutex
	cond   sync.Cond
	ups    map[upKey]*upstream  // the ones parts go to
	open   map[*upstream]bool   // every socket not closed yet, retiring ones included
	txns   map[string]int       // requests with parts unanswered, by transactional id
	waits  map[*time.Timer]bool // the Fetch waits and stall watches running (fetch.go, stall.go)
	closed bool                 // the connection died: nothing is completed any more
	// overshoots: the brokers seen answering a Fetch past its max_bytes
	// (fetchtrim.go).
	overshoots map[int32]bool

	// What orders a Fetch after the writes before it (fetchdeps.go).
	writesOut    int                // Produce, DeleteRecords and fence parts unanswered
	commitsOut   int                // OffsetCommit and TxnOffsetCommit parts unanswered
	fetched      bool               // a Fetch part was sent: answered writes stamp their partitions
	tick         uint64             // writes answered since
	stamps       map[markKey]uint64 // the tick each partition was last written at
	offsetsStamp uint64             // the tick of the last commit answered
	stampAll     uint64             // every partition was written at this tick or later

	// The flusher's, to lay out a Produce and place its partitions
	// (produce.go).
	layout wire.ProduceLayout
	of     []int
}

// upKey names an upstream connection of a client connection: a broker,
// and whether it carries Fetch requests.
type upKey struct {
	node  int32
	fetch bool
}

// upstream is one connection to one broker, of one client connection.
type upstream struct {
	s    *Conn
	key  upKey
	addr string
	// nc and reauthAt are set once its dial succeeds, under s.mu, before
	// dialing is cleared; nc is nil while it is dialled.
	nc       net.Conn
	reauthAt time.Time // the proxy's SASL session ends; zero: never

	wmu sync.Mutex // one write at a time

	// Guarded by s.mu.
	// dialing: its dial, or the sending of the parts that waited for
	// it, is in progress; parts sent meanwhile join queued.
	dialing bool
	queued  []queuedPart
	pending map[int32]*partRef // by correlation id
	corr    int32              // the last correlation id used
	reading bool               // its reader runs
	// gone: failed or retired; nothing more is sent, and it is no
	// longer in s.ups.
	gone error
	// poll is the Fetch long poll on this connection still unanswered,
	// and marks what the broker last said of each partition it was
	// asked to fetch (fetch.go).
	poll  *partRef
	marks map[markKey]fetchMark
	// kept is a round-1 answer that came after its Fetch was answered
	// without it, for the next Fetch that asks the same (fetchkeep.go).
	kept *keptAnswer
	// late is a round-1 part its broker did not answer by its Fetch's
	// deadline, maybe still out (fetchlate.go).
	late *partRef
	// inbound is the part whose answer's frame its reader last began to
	// read (fetchlate.go: an answer coming in is not late).
	inbound *partRef
	// blind: an acks=0 write went on this connection since its last
	// fence (fetchdeps.go).
	blind bool
	// watch (nil: not armed) fires to look at the oldest part in
	// flight, which the broker has worked on since headSince, on a
	// connection that is not for Fetch (stall.go); watchGen tells a
	// stopped watch's late firing from the one armed; probing: a probe
	// of its broker runs.
	watch     *time.Timer
	watchGen  uint64
	headSince time.Time
	probing   bool
}

// queuedPart is a part that waits for its upstream connection's dial:
// it is encoded when sent, from its request, which it holds until then,
// unless it came as a vector.
// Without a request it is a fence (fetchdeps.go).
type queuedPart struct {
	st  *Split
	req kmsg.Request
	ref *partRef // nil: no answer comes (acks=0)
	// vec: the part's frame already made: a Produce part's, slices of
	// the client's frame, which is kept until the part is written
	// (Split.dropLater), or a long poll's, encoded whole.
	vec vecFrame
}

var (
	// errRetired: an upstream connection is replaced (its session is
	// due for renewal, or its broker moved); it answers what it has in
	// flight.
	errRetired = errors.New("upstream connection retired")
)

// NewConn makes a client connection's side of the single topology: c is
// the client connection, wg tracks its goroutines, halt closes when it
// dies, and answers larger than maxResponse end it; ctx is the proxy's.
func NewConn(ctx context.Context, c Client, v *View, env *Env, wg *sync.WaitGroup, halt <-chan struct{}, maxResponse int32) *Conn {
	s := &Conn{c: c, v: v, env: env, wg: wg, halt: halt, maxResponse: maxResponse, ups: make(map[upKey]*upstream), open: make(map[*upstream]bool), txns: make(map[string]int),
		waits: make(map[*time.Timer]bool)}
	s.pctx = ctx
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.cond.L = &s.mu
	return s
}

// upstream returns the connection for parts to node (fetch: Fetch parts),
// starting a dial if there is none or the one there must be replaced; a
// connection being dialled is returned at once, and parts sent on it wait
// for the dial. Flusher only.
func (s *Conn) upstream(node int32, fetch bool) (*upstream, error) {
	key := upKey{node, fetch}
	s.mu.Lock()
	u := s.ups[key]
	dialing := u != nil && u.dialing
	s.mu.Unlock()
	if dialing {
		return u, nil
	}
	if u != nil {
		addr, err := s.v.Address(node)
		switch {
		case err != nil:
			return nil, err
		case addr != u.addr, !u.reauthAt.IsZero() && time.Now().After(u.reauthAt):
			// The broker moved, or the proxy's session on this
			// connection is due for renewal: a new connection,
			// once this one has answered what it has, so that the
			// broker sees the parts in the order they were sent.
			// Fetches need no order: their new connection is used
			// at once, and the old one closes when it has answered.
			s.retire(u, !fetch)
		case s.idleClosed(u):
			s.fail(u, fmt.Errorf("%w: %w", proxyerr.UpstreamFailed, proxyerr.UpstreamIdleClose))
		default:
			return u, nil
		}
	}
	return s.dial(key)
}

// idleClosed reports whether the broker closed u while it had nothing in
// flight (its reader, which would have seen it, is not running).
func (s *Conn) idleClosed(u *upstream) bool {
	s.mu.Lock()
	idle := !u.reading
	s.mu.Unlock()
	return idle && s.env.IdleClosed(u.nc)
}

// dial starts a connection to key's broker once allow-upstream allows
// its address and the broker is not down, and returns it being dialled.
func (s *Conn) dial(key upKey) (*upstream, error) {
	addr, err := s.v.Address(key.node)
	if err != nil {
		s.v.Stale()
		return nil, err
	}
	if s.v.IsDown(key.node) {
		return nil, fmt.Errorf("%w: node %d at %s: %w", proxyerr.UpstreamFailed, key.node, addr, proxyerr.BrokerDown)
	}
	u := &upstream{s: s, key: key, addr: addr, dialing: true, pending: make(map[int32]*partRef)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, proxyerr.Shutdown
	}
	s.ups[key] = u
	s.open[u] = true
	s.wg.Add(1)
	go u.connect()
	return u, nil
}

// connect dials u through its client connection (Client.Dial: TLS, and
// SASL as the client's principal maps to) and sends the parts that waited for
// it, in the order they came, then lets parts go to it directly. A failed dial marks the broker down and fails the
// parts that waited.
func (u *upstream) connect() {
	s := u.s
	defer s.wg.Done()
	nc, reauthAt, own, err := s.c.Dial(s.ctx, u.addr)
	if err != nil {
		// A principal's credentials the broker refuses say nothing of
		// the broker: it stays up for everyone else, and the back-off
		// holds back this identity's dials alone (the proxy's gateKey).
		if s.ctx.Err() == nil && (!own || !errors.Is(err, proxyerr.UpstreamAuth)) {
			s.v.DialFailed(u.key.node)
			s.v.Stale()
		}
		u.dialFailed(fmt.Errorf("%w: node %d at %s: %w", proxyerr.UpstreamFailed, u.key.node, u.addr, err))
		return
	}
	s.v.Dialed(u.key.node)
	if s.v.Suspect(u.key.node) {
		// It stalled: it is used once it answers (stall.go).
		if err := probe(s.ctx, nc, s.v.dialTimeout); err != nil {
			nc.Close()
			if s.ctx.Err() == nil {
				s.v.Stalled(u.key.node)
			}
			u.dialFailed(fmt.Errorf("%w: node %d at %s: %w: probe: %v", proxyerr.UpstreamFailed, u.key.node, u.addr, proxyerr.BrokerStalled, err))
			return
		}
		s.v.Answered(u.key.node)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		u.dialFailed(proxyerr.Shutdown)
		return
	}
	u.nc, u.reauthAt = nc, reauthAt
	s.mu.Unlock()
	for {
		s.mu.Lock()
		q := u.queued
		u.queued = nil
		if len(q) == 0 {
			u.dialing = false
			// A Fetch may wait for the parts sent (writingLocked).
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, e := range q {
			if e.vec.head != nil {
				if u.sendv(e.vec.vec[:1], e.vec.vec, []*partRef{e.ref}) != nil && e.ref == nil {
					s.unsent(e.st, e.req)
				}
				e.vec.put()
				s.unhold(e.st)
				continue
			}
			if e.st == nil {
				u.send([][]byte{append([]byte(nil), fenceFrame...)}, []*partRef{e.ref})
				continue
			}
			frame := encodePart(e.st.r, e.req)
			if u.send([][]byte{frame.B}, []*partRef{e.ref}) != nil && e.ref == nil {
				s.unsent(e.st, e.req)
			}
			wire.Put(frame)
			s.unhold(e.st)
		}
	}
}

// dialFailed ends u, whose dial failed: every part that waited for it
// fails, to be answered with its retriable error or sent to another
// broker.
func (u *upstream) dialFailed(err error) {
	s := u.s
	s.mu.Lock()
	u.gone, u.dialing = err, false
	if s.ups[u.key] == u {
		delete(s.ups, u.key)
	}
	delete(s.open, u)
	q := u.queued
	u.queued = nil
	for _, e := range q {
		if e.ref != nil {
			s.leftLocked(e.ref)
		}
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	for _, e := range q {
		e.vec.put()
		if e.ref != nil {
			s.partFailed(e.ref, err)
		}
		if e.st != nil {
			if e.ref == nil {
				s.unsent(e.st, e.req)
			}
			s.unhold(e.st)
		}
	}
}

// sendPart sends req, part ref.i of st (ref nil: no answer comes), on u,
// or has it wait for u's dial. frame is req encoded, or nil; sendPart
// owns it. The error is send's.
func (u *upstream) sendPart(st *Split, req kmsg.Request, frame *wire.Buf, ref *partRef) error {
	if u.queueIfDialing(queuedPart{st: st, req: req, ref: ref}) {
		wire.Put(frame)
		return nil
	}
	if frame == nil {
		frame = encodePart(st.r, req)
	}
	err := u.send([][]byte{frame.B}, []*partRef{ref})
	wire.Put(frame)
	return err
}

// queueIfDialing has q wait for u's dial when u is being dialled, and
// reports whether it does.
func (u *upstream) queueIfDialing(q queuedPart) bool {
	s := u.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !u.dialing {
		return false
	}
	if q.ref != nil {
		q.ref.node = u.key.node
		s.sentLocked(u, q.ref)
	} else {
		// An acks=0 write: a Fetch after it fences u first.
		u.blind = true
	}
	u.queued = append(u.queued, q)
	q.st.holds++
	q.st.queued++
	return true
}

// unhold ends the hold a part that waited for a dial had on st, once it
// is sent or failed. A request that expects no answer is let go with
// its last hold; any other is answered once every part is in.
func (s *Conn) unhold(st *Split) {
	s.mu.Lock()
	st.queued--
	if st.queued == 0 && st.dropLater {
		st.dropLater = false
		s.mu.Unlock()
		s.dropRecords(st)
		s.mu.Lock()
	}
	if st.unanswered {
		st.holds--
		last := st.holds == 0
		s.mu.Unlock()
		if last {
			s.release(st)
		}
		return
	}
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		// Once the connection died nothing is answered; the
		// sequencer's drain frees the request.
		s.letGo(st)
	}
}

// retire takes u out of use. With wait it waits until u has answered what
// it has in flight and closes it; without, u's reader closes it once it
// has. Flusher only.
func (s *Conn) retire(u *upstream, wait bool) {
	s.mu.Lock()
	blind := u.blind && wait && u.gone == nil
	u.blind = false
	s.mu.Unlock()
	if blind {
		// Its acks=0 writes must be processed before anything that
		// depends on them goes on another connection.
		u.sendFence()
	}
	s.mu.Lock()
	if u.gone == nil {
		u.gone = errRetired
		if s.ups[u.key] == u {
			delete(s.ups, u.key)
		}
	}
	kept := s.unkeepLocked(u)
	for wait && len(u.pending) > 0 && !s.closed {
		s.cond.Wait()
	}
	closeNow := len(u.pending) == 0 && !u.reading
	if closeNow {
		delete(s.open, u)
	}
	s.mu.Unlock()
	kept.release(s)
	if closeNow {
		u.nc.Close()
	}
}

// send writes frames to u, each answering refs[i] (nil: no answer comes,
// acks=0), with u's next correlation ids. A failure fails u, and with it
// every part it has in flight, these included; it is returned, so that
// the caller knows a part no answer comes for was not sent.
func (u *upstream) send(frames [][]byte, refs []*partRef) error {
	return u.sendv(frames, frames, refs)
}

// sendv is send of frames whose bytes are bufs joined: heads[i] starts
// frame i (its correlation id is set there), and bufs is written as it
// is, one system call for all where the socket takes a vector.
func (u *upstream) sendv(frames, bufs [][]byte, refs []*partRef) error {
	if err := u.prepare(frames, refs); err != nil {
		return err
	}
	u.wmu.Lock()
	err := writeVector(u.nc, bufs, len(bufs) > len(frames))
	u.wmu.Unlock()
	if err != nil {
		err = u.writeFailed(err)
	}
	return err
}

// writeFailed fails u, whose write failed with err, and returns the
// failure as its parts see it.
func (u *upstream) writeFailed(err error) error {
	err = fmt.Errorf("%w: node %d: write: %v", proxyerr.UpstreamFailed, u.key.node, err)
	u.s.fail(u, err)
	return err
}

// prepare readies frames to be written to u, each answering refs[i] as
// send says: their correlation ids are set and the answers awaited. It
// fails the refs, and returns why, when u is gone.
func (u *upstream) prepare(frames [][]byte, refs []*partRef) error {
	s := u.s
	s.mu.Lock()
	if gone := u.gone; gone != nil {
		err := fmt.Errorf("%w: node %d: %v", proxyerr.UpstreamFailed, u.key.node, gone)
		for _, ref := range refs {
			if ref != nil && ref.counted {
				// It waited for the dial: counted, never sent.
				s.leftLocked(ref)
			}
		}
		s.mu.Unlock()
		for _, ref := range refs {
			if ref != nil {
				s.partFailed(ref, err)
			}
		}
		return err
	}
	var now time.Time // for the stall watch, which times no Fetch (stall.go)
	if !u.key.fetch {
		now = time.Now()
	}
	for i, f := range frames {
		corr := int32(noCorrelation)
		if refs[i] == nil {
			// An acks=0 write, which only write connections carry.
			u.blind = true
		} else {
			refs[i].node, refs[i].wrote = u.key.node, true
			s.sentLocked(u, refs[i])
			u.corr = (u.corr + 1) & corrMask
			corr = u.corr
			u.watchLocked(refs[i], now)
			u.pending[corr] = refs[i]
		}
		wire.SetRequestCorrelation(f, corr)
	}
	if len(u.pending) > 0 && !u.reading {
		u.reading = true
		s.wg.Add(1)
		go u.read()
	}
	s.mu.Unlock()
	return nil
}

// fail ends u: its socket closes and every part it had in flight fails,
// to be answered with its retriable error, unless the client connection
// has died, when nothing is answered any more.
func (s *Conn) fail(u *upstream, err error) {
	s.mu.Lock()
	if u.gone == nil || u.gone == errRetired {
		u.gone = err
	}
	if s.ups[u.key] == u {
		delete(s.ups, u.key)
	}
	delete(s.open, u)
	refs := make([]*partRef, 0, len(u.pending))
	for _, ref := range u.pending {
		refs = append(refs, ref)
		s.leftLocked(ref)
	}
	clear(u.pending)
	u.poll = nil
	u.stopWatchLocked()
	kept := s.unkeepLocked(u)
	closed := s.closed
	s.cond.Broadcast()
	nc := u.nc
	s.mu.Unlock()
	kept.release(s)
	if nc != nil {
		nc.Close()
	}
	if closed {
		return
	}
	if len(refs) > 0 {
		s.env.Log.Debug("upstream connection failed", append(s.c.Who(), "broker", u.key.node, "in_flight", len(refs), "err", err)...)
		s.v.Stale()
	}
	for _, ref := range refs {
		s.partFailed(ref, err)
	}
}

// Close closes every upstream connection and stops the Fetch waits;
// the client connection's teardown calls it. The readers end, and nothing is completed any more.
func (s *Conn) Close() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	ups := make([]net.Conn, 0, len(s.open))
	var kept []*keptAnswer
	for u := range s.open {
		if u.nc != nil {
			ups = append(ups, u.nc)
		}
		if k := s.unkeepLocked(u); k != nil {
			kept = append(kept, k)
		}
	}
	for t := range s.waits {
		if t.Stop() {
			s.wg.Done()
		}
	}
	clear(s.waits)
	s.cond.Broadcast()
	s.mu.Unlock()
	for _, k := range kept {
		k.release(s)
	}
	for _, nc := range ups {
		nc.Close()
	}
}

// read reads u's answers while it has requests in flight, lingering
// Env.ReaderLinger for the next, as the proxy's upstream reader does.
func (u *upstream) read() {
	defer u.s.wg.Done()
	err := u.readLoop()
	if err == nil {
		return
	}
	if errors.Is(err, proxyerr.UpstreamProtocol) {
		// A broker that answers what was not asked, or what does not
		// parse, ends the client connection, as in the other
		// topologies.
		u.s.c.Die(err)
	}
	u.s.fail(u, err)
}

func (u *upstream) readLoop() error {
	s := u.s
	var (
		lenBuf [4]byte
		head   [8]byte
	)
	rd := s.env.Readers.Get().(*bufio.Reader)
	rd.Reset(u.nc)
	defer func() {
		rd.Reset(nil)
		s.env.Readers.Put(rd)
	}()
	lingered := false
	for {
		s.mu.Lock()
		u.inbound = nil // the last answer is handled
		if len(u.pending) == 0 {
			if lingered || u.gone != nil || s.closed || rd.Buffered() > 0 {
				u.reading = false
				retired := u.gone == errRetired && s.open[u]
				if retired {
					delete(s.open, u)
				}
				s.mu.Unlock()
				if rd.Buffered() > 0 {
					return fmt.Errorf("%w: %d %w", proxyerr.UpstreamProtocol, rd.Buffered(), proxyerr.Unsolicited)
				}
				if retired {
					// Its last answer is in: nobody closes it
					// but its reader.
					u.nc.Close()
				}
				return nil
			}
			s.mu.Unlock()
			lingered = true
			u.nc.SetReadDeadline(time.Now().Add(s.env.ReaderLinger))
			_, err := rd.Peek(1)
			u.nc.SetReadDeadline(time.Time{})
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return u.readError(err)
			}
			continue
		}
		s.mu.Unlock()
		lingered = false
		size, err := wire.ReadLength(rd, &lenBuf, wire.MinResponseFrame, s.maxResponse)
		if err == nil {
			copy(head[:], lenBuf[:])
			err = wire.ReadBody(rd, head[4:])
		}
		if err != nil {
			return u.readError(err)
		}
		corr := wire.ResponseCorrelation(head[:])
		s.mu.Lock()
		ref := u.pending[corr]
		delete(u.pending, corr)
		u.inbound = ref
		if len(u.pending) > 0 && !u.key.fetch {
			u.headSince = time.Now() // the next is worked on now (stall.go)
		}
		if ref != nil {
			s.leftLocked(ref)
		}
		if len(u.pending) == 0 {
			s.cond.Broadcast() // for retire
		}
		s.mu.Unlock()
		if ref == nil {
			return fmt.Errorf("%w: node %d: %w %d", proxyerr.UpstreamProtocol, u.key.node, proxyerr.UnknownCorrelation, corr)
		}
		total := 4 + int(size)
		acct := s.c.UpAccount(total)
		into, rm := s.answerAccount(ref, acct)
		var buf *wire.Buf
		if bigAnswer(ref.key == keyFetch, total) && !reserveNow(s.env.Budget, rm, wire.FineCap(total)) {
			// More than the memory there is now: cut, not waited for
			// (fetchcut.go).
			buf, err = s.cutAnswer(u, ref, rd, head[:], total, rm, s.cutMost(ref))
			if errors.Is(err, errCutMalformed) {
				return fmt.Errorf("%w: node %d: %v", proxyerr.UpstreamProtocol, u.key.node, err)
			}
		} else if nc := s.parkable(u, ref, total); nc != nil {
			// Its record sets parked, not read (fetchpark.go).
			buf, err = readParked(rd, nc, head[:], total, ref.version, into, fetchParkFrom)
			if errors.Is(err, errParkMalformed) {
				return fmt.Errorf("%w: node %d: %v", proxyerr.UpstreamProtocol, u.key.node, err)
			}
			if err == nil && buf.Out != nil && s.env.FetchParks != nil {
				s.env.FetchParks.Add(1)
			}
			if errors.Is(err, errParkCut) && s.env.FetchParkCuts != nil {
				s.env.FetchParkCuts.Add(1)
			}
		} else {
			buf, err = readAnswer(rd, head[:], total, into, ref.key == keyFetch)
		}
		if err != nil {
			s.partFailed(ref, err)
			return u.readError(err)
		}
		if err := s.answered(u, ref, buf, acct.Charge(cap(buf.B))); err != nil {
			return err
		}
	}
}

// readError names a failed read of u.
func (u *upstream) readError(err error) error {
	if errors.Is(err, wire.ErrNotKafka) {
		return fmt.Errorf("%w: node %d: %w", proxyerr.UpstreamProtocol, u.key.node, u.s.env.NotKafka(err))
	}
	if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrFrameTooSmall) {
		return fmt.Errorf("%w: node %d: %w", proxyerr.UpstreamProtocol, u.key.node, err)
	}
	return fmt.Errorf("%w: node %d: read: %v", proxyerr.UpstreamFailed, u.key.node, err)
}
