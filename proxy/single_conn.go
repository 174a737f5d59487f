package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

// singleConn is a client connection's side of the single topology: an
// upstream connection per broker its requests went to (and a second one
// per broker for Fetch, whose long polls would hold up everything behind
// them, since a broker answers a connection's requests one at a time),
// the transactions it has writes in flight for, and what a Fetch must
// wait for or not reuse after a write (single_fetchdeps.go).
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
// while it has requests in flight, as conn's one upstream has. Locks:
// conn's wmu, then conn's mu, then s.mu; an upstream's wmu is taken with
// none of them held.
type singleConn struct {
	c *conn
	v *single.View

	// ctx ends the dials in progress when the connection dies.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards what follows and every upstream's fields marked so;
	// cond wakes the flusher waiting for an upstream to drain or a
	// transaction's writes to be answered.
	mu     sync.Mutex
	cond   sync.Cond
	ups    map[upKey]*upstream  // the ones parts go to
	open   map[*upstream]bool   // every socket not closed yet, retiring ones included
	txns   map[string]int       // requests with parts unanswered, by transactional id
	waits  map[*time.Timer]bool // the Fetch waits running (single_fetch.go)
	closed bool                 // the connection died: nothing is completed any more

	// What orders a Fetch after the writes before it (single_fetchdeps.go).
	writesOut    int                // Produce, DeleteRecords and fence parts unanswered
	commitsOut   int                // OffsetCommit and TxnOffsetCommit parts unanswered
	fetched      bool               // a Fetch part was sent: answered writes stamp their partitions
	tick         uint64             // writes answered since
	stamps       map[markKey]uint64 // the tick each partition was last written at
	offsetsStamp uint64             // the tick of the last commit answered
	stampAll     uint64             // every partition was written at this tick or later

	// The flusher's, to lay out a Produce and place its partitions
	// (single_produce.go).
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
	s    *singleConn
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
	// asked to fetch (single_fetch.go).
	poll  *partRef
	marks map[markKey]fetchMark
	// blind: an acks=0 write went on this connection since its last
	// fence (single_fetchdeps.go).
	blind bool
}

// queuedPart is a part that waits for its upstream connection's dial:
// it is encoded when sent, from its request, which it holds until then,
// unless it came as a vector.
// Without a request it is a fence (single_fetchdeps.go).
type queuedPart struct {
	st  *splitState
	req kmsg.Request
	ref *partRef // nil: no answer comes (acks=0)
	// vec: the part's frame already made: a Produce part's, slices of
	// the client's frame, which is kept until the part is written
	// (splitState.dropLater), or a long poll's, encoded whole.
	vec vecFrame
}

// dialStarted, when set, is told the address of every dial a client
// connection starts; tests count them.
var dialStarted func(addr string)

var (
	// errRetired: an upstream connection is replaced (its session is
	// due for renewal, or its broker moved); it answers what it has in
	// flight.
	errRetired = errors.New("upstream connection retired")
	// errBrokerDown: the last dial to a broker failed and its backoff
	// has not ended, so none is tried.
	errBrokerDown = errors.New("broker down: the last dial to it failed")
)

func newSingleConn(c *conn, v *single.View) *singleConn {
	s := &singleConn{c: c, v: v, ups: make(map[upKey]*upstream), open: make(map[*upstream]bool), txns: make(map[string]int),
		waits: make(map[*time.Timer]bool)}
	s.ctx, s.cancel = context.WithCancel(c.p.ctx)
	s.cond.L = &s.mu
	return s
}

// connect readies the client connection: nothing is dialled before a part
// needs a broker.
func (s *singleConn) connect() error {
	s.c.in.init(s.c.client)
	return nil
}

// upstream returns the connection for parts to node (fetch: Fetch parts),
// starting a dial if there is none or the one there must be replaced; a
// connection being dialled is returned at once, and parts sent on it wait
// for the dial. Flusher only.
func (s *singleConn) upstream(node int32, fetch bool) (*upstream, error) {
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
			s.fail(u, fmt.Errorf("%w: %w", ErrUpstreamFailed, errUpstreamIdleClose))
		default:
			return u, nil
		}
	}
	return s.dial(key)
}

// idleClosed reports whether the broker closed u while it had nothing in
// flight (its reader, which would have seen it, is not running).
func (s *singleConn) idleClosed(u *upstream) bool {
	s.mu.Lock()
	idle := !u.reading
	s.mu.Unlock()
	return idle && peekClosed(u.nc)
}

// dial starts a connection to key's broker once allow-upstream allows
// its address and the broker is not down, and returns it being dialled.
func (s *singleConn) dial(key upKey) (*upstream, error) {
	addr, err := s.v.Address(key.node)
	if err != nil {
		s.v.Stale()
		return nil, err
	}
	if s.v.IsDown(key.node) {
		return nil, fmt.Errorf("%w: node %d at %s: %w", ErrUpstreamFailed, key.node, addr, errBrokerDown)
	}
	u := &upstream{s: s, key: key, addr: addr, dialing: true, pending: make(map[int32]*partRef)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrShutdown
	}
	s.ups[key] = u
	s.open[u] = true
	s.c.wg.Add(1)
	go u.connect()
	return u, nil
}

// connect dials u through dialSecure (TLS, and SASL as the client's
// principal maps to, upidentity.go) and sends the parts that waited for
// it, in the order they came, then lets parts go to it directly. A failed dial marks the broker down and fails the
// parts that waited.
func (u *upstream) connect() {
	s, p := u.s, u.s.c.p
	defer s.c.wg.Done()
	if f := dialStarted; f != nil {
		f(u.addr)
	}
	auth := s.c.sasl.auth
	nc, sess, err := p.dialSecure(withIdentity(s.ctx, auth), u.addr, slices.Contains(p.current().Upstreams, u.addr))
	if err != nil {
		// A principal's credentials the broker refuses say nothing of
		// the broker: it stays up for everyone else, and the back-off
		// holds back this identity's dials alone (gateKey).
		if s.ctx.Err() == nil && (auth == nil || auth == p.sec.auth || !errors.Is(err, ErrUpstreamAuth)) {
			s.v.DialFailed(u.key.node)
			s.v.Stale()
		}
		u.dialFailed(fmt.Errorf("%w: node %d at %s: %w", ErrUpstreamFailed, u.key.node, u.addr, err))
		return
	}
	s.v.Dialed(u.key.node)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		u.dialFailed(ErrShutdown)
		return
	}
	u.nc, u.reauthAt = nc, reauthAt(sess)
	s.mu.Unlock()
	for {
		s.mu.Lock()
		q := u.queued
		u.queued = nil
		if len(q) == 0 {
			u.dialing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, e := range q {
			if e.vec.head != nil {
				u.sendv(e.vec.vec[:1], e.vec.vec, []*partRef{e.ref})
				e.vec.put()
				s.unhold(e.st)
				continue
			}
			if e.st == nil {
				u.send([][]byte{append([]byte(nil), fenceFrame...)}, []*partRef{e.ref})
				continue
			}
			frame := encodePart(e.st.r, e.req)
			u.send([][]byte{frame.B}, []*partRef{e.ref})
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
			s.unhold(e.st)
		}
	}
}

// sendPart sends req, part ref.i of st (ref nil: no answer comes), on u,
// or has it wait for u's dial. frame is req encoded, or nil; sendPart
// owns it.
func (u *upstream) sendPart(st *splitState, req kmsg.Request, frame *wire.Buf, ref *partRef) {
	if u.queueIfDialing(queuedPart{st: st, req: req, ref: ref}) {
		wire.Put(frame)
		return
	}
	if frame == nil {
		frame = encodePart(st.r, req)
	}
	u.send([][]byte{frame.B}, []*partRef{ref})
	wire.Put(frame)
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
func (s *singleConn) unhold(st *splitState) {
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
			putRequest(st.r)
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

// reauthAt is when a connection authenticated with sess must be replaced.
func reauthAt(sess upauth.Session) time.Time { return sess.ReauthAt }

// retire takes u out of use. With wait it waits until u has answered what
// it has in flight and closes it; without, u's reader closes it once it
// has. Flusher only.
func (s *singleConn) retire(u *upstream, wait bool) {
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
	for wait && len(u.pending) > 0 && !s.closed {
		s.cond.Wait()
	}
	closeNow := len(u.pending) == 0 && !u.reading
	if closeNow {
		delete(s.open, u)
	}
	s.mu.Unlock()
	if closeNow {
		u.nc.Close()
	}
}

// send writes frames to u, each answering refs[i] (nil: no answer comes,
// acks=0), with u's next correlation ids. A failure fails u, and with it
// every part it has in flight, these included.
func (u *upstream) send(frames [][]byte, refs []*partRef) {
	u.sendv(frames, frames, refs)
}

// sendv is send of frames whose bytes are bufs joined: heads[i] starts
// frame i (its correlation id is set there), and bufs is written as it
// is, one system call for all where the socket takes a vector.
func (u *upstream) sendv(frames, bufs [][]byte, refs []*partRef) {
	s := u.s
	s.mu.Lock()
	if err := u.gone; err != nil {
		for _, ref := range refs {
			if ref != nil && ref.counted {
				// It waited for the dial: counted, never sent.
				s.leftLocked(ref)
			}
		}
		s.mu.Unlock()
		for _, ref := range refs {
			if ref != nil {
				s.partFailed(ref, fmt.Errorf("%w: node %d: %v", ErrUpstreamFailed, u.key.node, err))
			}
		}
		return
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
			u.pending[corr] = refs[i]
		}
		wire.SetRequestCorrelation(f, corr)
	}
	if len(u.pending) > 0 && !u.reading {
		u.reading = true
		s.c.wg.Add(1)
		go u.read()
	}
	s.mu.Unlock()
	u.wmu.Lock()
	err := writeVector(u.nc, bufs, len(bufs) > len(frames))
	u.wmu.Unlock()
	if err != nil {
		s.fail(u, fmt.Errorf("%w: node %d: write: %v", ErrUpstreamFailed, u.key.node, err))
	}
}

// fail ends u: its socket closes and every part it had in flight fails,
// to be answered with its retriable error, unless the client connection
// has died, when nothing is answered any more.
func (s *singleConn) fail(u *upstream, err error) {
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
	closed := s.closed
	s.cond.Broadcast()
	nc := u.nc
	s.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	if closed {
		return
	}
	if len(refs) > 0 {
		s.c.p.log.Debug("upstream connection failed", append(s.c.who(), "broker", u.key.node, "in_flight", len(refs), "err", err)...)
		s.v.Stale()
	}
	for _, ref := range refs {
		s.partFailed(ref, err)
	}
}

// close closes every upstream connection and stops the Fetch waits;
// conn.die calls it. The readers end, and nothing is completed any more.
func (s *singleConn) close() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	ups := make([]net.Conn, 0, len(s.open))
	for u := range s.open {
		if u.nc != nil {
			ups = append(ups, u.nc)
		}
	}
	for t := range s.waits {
		if t.Stop() {
			s.c.wg.Done()
		}
	}
	clear(s.waits)
	s.cond.Broadcast()
	s.mu.Unlock()
	for _, nc := range ups {
		nc.Close()
	}
}

// read reads u's answers while it has requests in flight, lingering
// readerLinger for the next, as conn's upstream reader does.
func (u *upstream) read() {
	defer u.s.c.wg.Done()
	err := u.readLoop()
	if err == nil {
		return
	}
	if errors.Is(err, ErrUpstreamProtocol) {
		// A broker that answers what was not asked, or what does not
		// parse, ends the client connection, as in the other
		// topologies.
		u.s.c.die(err)
	}
	u.s.fail(u, err)
}

func (u *upstream) readLoop() error {
	s, c := u.s, u.s.c
	var (
		lenBuf [4]byte
		head   [8]byte
	)
	rd := upstreamReaders.Get().(*bufio.Reader)
	rd.Reset(u.nc)
	defer func() {
		rd.Reset(nil)
		upstreamReaders.Put(rd)
	}()
	lingered := false
	for {
		s.mu.Lock()
		if len(u.pending) == 0 {
			if lingered || u.gone != nil || s.closed || rd.Buffered() > 0 {
				u.reading = false
				retired := u.gone == errRetired && s.open[u]
				if retired {
					delete(s.open, u)
				}
				s.mu.Unlock()
				if rd.Buffered() > 0 {
					return fmt.Errorf("%w: %d %w", ErrUpstreamProtocol, rd.Buffered(), errUnsolicited)
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
			u.nc.SetReadDeadline(time.Now().Add(readerLinger))
			_, err := rd.Peek(1)
			u.nc.SetReadDeadline(time.Time{})
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return u.readError(err)
			}
			continue
		}
		s.mu.Unlock()
		lingered = false
		size, err := wire.ReadLength(rd, &lenBuf, wire.MinResponseFrame, c.cfg.MaxResponseSize)
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
		if ref != nil {
			s.leftLocked(ref)
		}
		if len(u.pending) == 0 {
			s.cond.Broadcast() // for retire
		}
		s.mu.Unlock()
		if ref == nil {
			return fmt.Errorf("%w: node %d: %w %d", ErrUpstreamProtocol, u.key.node, errUnknownCorrelation, corr)
		}
		total := 4 + int(size)
		acct := c.upAccount(total)
		buf, err := readAnswer(rd, head[:], total, s.answerAccount(ref, acct), ref.key == keyFetch)
		if err != nil {
			s.partFailed(ref, err)
			return u.readError(err)
		}
		if err := s.answered(u, ref, buf, acct.charge(cap(buf.B))); err != nil {
			return err
		}
	}
}

// readError names a failed read of u.
func (u *upstream) readError(err error) error {
	if errors.Is(err, wire.ErrNotKafka) {
		return fmt.Errorf("%w: node %d: %w", ErrUpstreamProtocol, u.key.node, strangerFromUpstream(err))
	}
	if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrFrameTooSmall) {
		return fmt.Errorf("%w: node %d: %w", ErrUpstreamProtocol, u.key.node, err)
	}
	return fmt.Errorf("%w: node %d: read: %v", ErrUpstreamFailed, u.key.node, err)
}
