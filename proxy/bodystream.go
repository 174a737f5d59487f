package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// Large produce requests stream in None mode too, though there the
// sequencer must know every partition a write touches: their bodies pass
// from the client socket to the upstream socket as they arrive, records
// spliced by the kernel, while wire.ProduceStream reads the few bytes
// between one partition's records and the next (topic, partition, record
// length). Each partition found is added to the write in the sequencer
// (Extend). One that an earlier write still in flight holds is set aside
// and the stream goes on: the bytes after it pass while that write is
// answered, and the request's last byte waits until every partition set
// aside is added (settle). The upstream cannot act on a request it has not
// received whole, so the request is processed after every earlier write it
// overlaps, as if it had waited whole; in the meantime its bytes cross
// while the upstream answers the write before it, instead of waiting in the
// client socket.
//
// A request streams once nothing pushed before it waits to be forwarded
// and no barrier is in flight (Sequencer.Open): then every wait is for a
// write already in flight, whose response does not depend on this
// request. One that arrives before then waits for it with its body in the
// client socket (awaitOpen), as the upstream would have waited for it to
// be forwarded: the requests before it wait only for answers to what is
// in flight. Only a connection that stops forwarding (a failed acks=0
// write, a failed upstream write) reads it whole instead, to end cleanly.
//
// The trade: a streaming request that waits, or waits its turn, holds the
// client reader, so a later request whose partitions it does not share
// cannot overtake it as it could if the paused one were held in memory.
// Requests this large come from producers that batch per partition and
// send every partition with data in each request, so consecutive ones
// share partitions and wait for each other anyway; smaller requests
// (below spliceMin) are read whole and keep overlapping.

// streamWindow is the first size of the buffer that holds the bytes
// between records; it grows, charged to the budget, for the rare request
// whose tagged fields or names outgrow it.
const streamWindow = 4 << 10

// streamPeek is how many bytes the client reader peeks at to find the next
// partition without reading it: enough for a partition's index and record
// length, and for the topic before it with a name of Kafka's longest.
const streamPeek = 512

// streamDeferred is how many partitions a streaming request sets aside
// before it waits for them: a request that writes more partitions than
// this that earlier writes hold waits, for those, where it found them.
const streamDeferred = 16

// bodyStream is the client reader's state while it streams one request.
type bodyStream struct {
	scan wire.ProduceStream
	// win holds bytes read from the client and not yet written upstream;
	// the first done of them are scanned, or are records.
	win     *wire.Buf
	winCh   charge
	done    int
	records int64 // of the current partition, not yet passed on
	socket  int64 // bytes of the frame still in the client socket
	// lead: bytes at the front of the client socket, scanned already from
	// a peek, that go upstream before the rest (a head left unread); the
	// first leadN bytes of peeked are those that follow them.
	lead  int64
	leadN int
	keys  charge // key state of the partitions added while streaming
	// barrier: the write grew past ordering.MaxWriteKeys and holds no
	// keys; the partitions after are not the sequencer's concern.
	barrier bool
	// deferred: partitions found that an earlier write in flight holds,
	// still to add before the frame's last byte goes upstream.
	deferred  [streamDeferred]ordering.Key
	ndeferred int
	seq       uint64 // the request streaming
	// aud counts the streaming request's partitions for its audit event
	// as they pass, when it is audited (audit/capture).
	aud    capture.Stream
	one    [1][]byte
	peeked [streamPeek]byte // what peekNext saw
}

// streamWork counts, over every connection, the work of streaming
// request bodies in None mode: calls on the sockets that may each be a
// system call (peeks, reads, writes and splices), and partitions handed
// to the sequencer. A client chooses how many partitions a request holds
// and how small they are; neither may buy more than a bounded amount of
// this work per byte of the request. Tests read it.
type streamWork struct {
	calls, extends atomic.Int64
}

// spliceableNone is spliceable in None mode: a Produce request whose head
// holds everything before its topics streams if nothing pushed before it
// waits to be forwarded; its partitions are added as they pass. In
// Connection mode, for an audited request, it streams the same way to be
// counted; an acks=0 one keeps its acks there and expects no response, as
// one spliced whole does: the order is the connection's, and the proxy
// need not learn when the write is accepted.
func (c *conn) spliceableNone(head *wire.Buf, h wire.RequestHeader, size int32) *request {
	body := head.B[h.Body:]
	total := 4 + int(size)
	used, ok := c.startStream(body, h, total)
	if !ok {
		return nil
	}
	bs := c.bs
	rest := body[used:]
	bs.win.B = append(bs.win.B, rest...) // within its capacity
	bs.socket = int64(total - len(head.B))
	head.B = head.B[:h.Body+used]

	r := getRequest()
	r.hdr, r.frame = h, head
	r.stream, r.scanBody = int(bs.socket), true
	r.noResp = bs.scan.Acks == 0
	r.ord = ordering.Request{Kind: ordering.Write, NoResponse: r.noResp}
	if r.noResp && c.mode == ordering.None {
		// As classifyProduce: forwarded as acks=1.
		body[bs.scan.AcksAt], body[bs.scan.AcksAt+1] = 0, 1
		r.forcedAck = true
	}
	return r
}

// unreadNone is spliceableNone for a request whose first bytes, head,
// were peeked at and are all still in the client socket (unread.go): the
// head goes upstream unread, spliced with the first partition the scan
// finds. Its acks are not 0 (unreadable): in None mode acks=0 would need a
// rewrite. In Connection mode it would not, but only an answered request
// turns the peek on (readClient), so a producer of acks=0 requests never
// peeks, and its heads are read.
func (c *conn) unreadNone(head []byte, h wire.RequestHeader, size int32) *request {
	total := 4 + int(size)
	used, ok := c.startStream(head[h.Body:], h, total)
	if !ok {
		return nil
	}
	bs := c.bs
	bs.socket = int64(total)
	bs.lead = int64(h.Body + used)
	bs.leadN = copy(bs.peeked[:], head[bs.lead:])

	r := getRequest()
	r.hdr = h
	r.stream, r.scanBody = total, true
	r.ord = ordering.Request{Kind: ordering.Write}
	return r
}

// startStream starts c.bs's scan of the Produce request h of total bytes,
// whose body begins with body, and takes its window, empty, from the
// budget. It returns how many bytes of body precede the topics, or false
// when the request is not to stream: the scan cannot start, it has no
// topics, or a request pushed before it still waits to be forwarded.
func (c *conn) startStream(body []byte, h wire.RequestHeader, total int) (int, bool) {
	if c.bs == nil {
		c.bs = new(bodyStream)
	}
	bs := c.bs
	used, err := bs.scan.Start(body, h.Version, total-h.Body)
	if err != nil || bs.scan.Topics() == 0 {
		// Nothing to stream past: read whole.
		return 0, false
	}
	// A write with no keys yet, forwarded at once while the sequencer
	// is Open: the body waits in the client socket until it is.
	if !c.awaitOpen() {
		return 0, false
	}
	n := max(streamWindow, len(body)-used)
	if err := c.accts[0].Reserve(wire.Cap(n)); err != nil {
		return 0, false
	}
	bs.win, bs.winCh = wire.Get(n), charge{N: int64(wire.Cap(n))}
	bs.win.B = bs.win.B[:0]
	bs.done, bs.records, bs.lead, bs.leadN = 0, 0, 0, 0
	// In Connection mode (an audited request, counted by audit/capture) no
	// partition is the sequencer's concern.
	bs.barrier, bs.ndeferred = c.mode != ordering.None, 0
	return used, true
}

// awaitOpen waits until the sequencer is Open, so that a request pushed
// now is forwarded at once, and reports whether it is; false when the
// connection stops forwarding first (a failed acks=0 write, a failed
// upstream write, its end). Everything pushed before waits only for
// writes and barriers in flight, which the upstream answers without this
// reader, so the wait ends. The frame's read timeout restarts after it:
// the wait was the upstream's.
func (c *conn) awaitOpen() bool {
	open, waited := c.awaitOpenLocked()
	if waited {
		c.startFrame()
	}
	return open
}

// awaitOpenLocked is awaitOpen's part under mu.
func (c *conn) awaitOpenLocked() (open, waited bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.poisoned == nil && c.writeErr == nil && !c.dead.Load() && !c.seq.Open() {
		if !waited {
			c.pauseRead()
			defer c.resumeRead()
		}
		c.cond.Wait()
		waited = true
	}
	return c.poisoned == nil && c.writeErr == nil && !c.dead.Load(), waited
}

// streamProduce forwards the rest of the request seq, whose head flush has
// just written, from the client socket and c.bs's window. It runs on the
// client reader, inside flush. Any error leaves the upstream mid-frame and
// ends the connection; one of the client's (cutOff) only once the requests
// before seq are answered.
//
// Where the window holds nothing unscanned, the next partition is found by
// peeking at the client socket (peekNext), and its header is spliced with
// its records; otherwise the window is filled by reading. After the last
// partition's records only tag sections follow, which the proxy needs
// nothing from: they go with those records, unscanned, as a request's body
// does in connection mode, and the upstream judges them.
func (c *conn) streamProduce(seq uint64, ar *capture.Req) error {
	bs := c.bs
	bs.seq = seq
	bs.aud.Begin(ar)
	defer c.endStream(seq)
	for {
		if bs.records > 0 {
			if k := min(bs.records, int64(len(bs.win.B)-bs.done)); k > 0 {
				bs.done += int(k)
				bs.records -= k
				continue
			}
			if bs.fits(bs.records) {
				// Read with what follows them, in one call.
				if err := c.fillWindow(); err != nil {
					return err
				}
				continue
			}
			if err := c.sendScanned(bs.records); err != nil {
				return err
			}
			bs.socket -= bs.records
			bs.records = 0
			continue
		}
		window := bs.win.B[bs.done:]
		peeked := false
		switch {
		case len(window) > 0:
		case bs.lead > 0:
			// Seen with the unread head: no need to peek again.
			window, peeked = bs.peeked[:bs.leadN], true
		default:
			if n := c.peekNext(); n > 0 {
				window, peeked = bs.peeked[:n], true
			}
		}
		step, err := bs.scan.Next(window)
		switch {
		case errors.Is(err, wire.ErrNeedMore) && bs.lead > 0:
			// The head goes by itself, and what follows it is
			// peeked at or read afresh.
			if err := c.sendLead(); err != nil {
				return err
			}
			continue
		case errors.Is(err, wire.ErrNeedMore):
			// What was peeked at is read now, with whatever follows.
			if err := c.fillWindow(); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("%w: Produce: %v", ErrBadRequest, err)
		case step.End:
			// What follows the structure, if anything, goes as it is.
			c.aud.ev.Streamed(&bs.aud)
			return c.passRest()
		}
		if bs.aud.On() {
			c.aud.ev.Count(&bs.aud, step, window[step.Used:])
		}
		if !bs.barrier {
			if err := c.extendPartition(seq, step.Partition); err != nil {
				return err
			}
		}
		if bs.scan.Last() {
			c.aud.ev.Streamed(&bs.aud)
			return c.passRest()
		}
		if peeked {
			// Header and records are still in the socket, behind
			// the head if it is there too.
			k := bs.lead + int64(step.Used) + step.Records
			if bs.fits(k) {
				// Read with what follows them, in one call.
				if err := c.readScanned(k); err != nil {
					return err
				}
				bs.lead = 0
				continue
			}
			if err := c.sendScanned(k); err != nil {
				return err
			}
			bs.socket -= k
			bs.lead = 0
			continue
		}
		bs.done += step.Used
		bs.records = step.Records
	}
}

// fits reports whether n bytes of the frame, all in the client socket,
// are better read into the window, whose free space they fit, than
// spliced: a splice is a few system calls whatever its size, and a
// request of many small partitions would cost some per partition, where
// a read brings in what follows too, often many partitions at once.
func (bs *bodyStream) fits(n int64) bool {
	return n <= int64(cap(bs.win.B))
}

// readScanned reads the next n bytes of the frame, which fit the window
// (fits) and need no scanning, into the window as scanned, with whatever
// of the frame follows them up to the window's end, which is scanned next.
// The window holds nothing unscanned: it comes here only once it is empty
// of what is to scan.
func (c *conn) readScanned(n int64) error {
	bs := c.bs
	if int64(cap(bs.win.B)-len(bs.win.B)) < n {
		if err := c.writeScanned(true); err != nil {
			return err
		}
	}
	free := bs.win.B[len(bs.win.B):cap(bs.win.B)]
	free = free[:min(int64(len(free)), bs.socket)]
	got := 0
	for int64(got) < n {
		c.p.streamWork.calls.Add(1)
		k, err := c.in.ReadOwn(free[got:])
		got += k
		if err != nil {
			bs.win.B = bs.win.B[:len(bs.win.B)+got]
			bs.socket -= int64(got)
			return c.bodyReadError(err)
		}
	}
	bs.win.B = bs.win.B[:len(bs.win.B)+got]
	bs.socket -= int64(got)
	bs.done += int(n)
	return nil
}

// sendLead splices the unread head upstream by itself.
func (c *conn) sendLead() error {
	bs := c.bs
	if err := c.sendScanned(bs.lead); err != nil {
		return err
	}
	bs.socket -= bs.lead
	bs.lead, bs.leadN = 0, 0
	return nil
}

// peekNext copies the client socket's next bytes of the frame into
// bs.peeked without taking them, and returns how many; 0 when the client
// reader's buffer holds bytes (they come first), nothing is left, the
// client is not a TCP socket, or the peek fails (a read then says why).
func (c *conn) peekNext() int {
	bs := c.bs
	p := c.clientPeeker()
	if p == nil || c.in.Buffered() > 0 || bs.socket == 0 {
		return 0
	}
	c.p.streamWork.calls.Add(1)
	n, err := p.Peek(bs.peeked[:min(int64(len(bs.peeked)), bs.socket)])
	if err != nil {
		// Reading says what went wrong.
		return 0
	}
	return n
}

// extendPartition adds the partition p, just found, to the streaming write
// seq, or sets it aside while an earlier write in flight holds it; once
// streamDeferred are set aside, it waits for them first.
func (c *conn) extendPartition(seq uint64, p wire.Partition) error {
	bs := c.bs
	k := partitionKey('p', "", kbin.UnsafeString(p.Topic), p.TopicID, p.Partition)
	c.p.streamWork.extends.Add(1)
	if bs.ndeferred == len(bs.deferred) {
		if err := c.settle(); err != nil {
			return err
		}
	}
	if bs.barrier {
		return nil
	}
	added, err := c.extendKey(seq, k, false)
	if err == nil && !added {
		bs.deferred[bs.ndeferred] = k
		bs.ndeferred++
	}
	return err
}

// settle adds the partitions set aside to the streaming write seq, waiting
// for the writes in flight that hold them. It comes before the frame's
// last byte goes upstream.
func (c *conn) settle() error {
	bs := c.bs
	for bs.ndeferred > 0 && !bs.barrier {
		bs.ndeferred--
		if _, err := c.extendKey(bs.seq, bs.deferred[bs.ndeferred], true); err != nil {
			return err
		}
	}
	bs.ndeferred = 0
	return nil
}

// settleBefore settles before the scanned bytes at the front of the
// window go upstream, if they end the frame.
func (c *conn) settleBefore() error {
	if c.bs.ndeferred == 0 || c.bs.socket > 0 {
		return nil
	}
	return c.settle()
}

// passRest forwards the rest of the frame as it is: the window's bytes,
// then what is still in the client socket.
func (c *conn) passRest() error {
	bs := c.bs
	bs.done = len(bs.win.B)
	if err := c.sendScanned(bs.socket); err != nil {
		return err
	}
	bs.socket = 0
	return nil
}

// sendScanned writes the window, every byte of it scanned or records,
// together with the next n bytes of the body: those the client reader's
// buffer holds go in the same system call, the rest is spliced from the
// client socket after them. The window is left empty.
func (c *conn) sendScanned(n int64) error {
	if c.bs.ndeferred == 0 || n < c.bs.socket {
		return c.sendNow(n)
	}
	// The frame ends here and partitions are set aside: all but its last
	// byte cross while the writes that hold them are answered.
	if n > 1 {
		if err := c.sendNow(n - 1); err != nil {
			return err
		}
		n = 1
	}
	if err := c.settle(); err != nil {
		return err
	}
	return c.sendNow(n)
}

// sendNow is sendScanned with no regard to the partitions set aside.
func (c *conn) sendNow(n int64) error {
	bs := c.bs
	c.p.streamWork.calls.Add(1)
	bufs := c.spliced[:0]
	if len(bs.win.B) > 0 {
		bufs = append(bufs, bs.win.B)
	}
	bufs, rest, err := c.writeHead(bufs, n)
	clear(bufs)
	if err != nil {
		return err
	}
	bs.win.B, bs.done = bs.win.B[:0], 0
	if rest == 0 {
		return nil
	}
	return c.spliceRest(rest)
}

// extendKey adds k to the streaming write seq, waiting while an earlier
// write in flight holds it if wait is true; otherwise it reports false
// then, having changed nothing. Its state is charged to the budget first.
func (c *conn) extendKey(seq uint64, k ordering.Key, wait bool) (added bool, err error) {
	if err := c.accts[0].Reserve(ordering.KeyStateBytes); err != nil {
		return false, c.timedOut(err)
	}
	added, waited, err := c.extendLocked(seq, k, wait)
	if err != nil || !added {
		c.p.budget.Release(ordering.KeyStateBytes, false)
		return false, err
	}
	if waited {
		// The rest of the frame gets a fresh read timeout: the wait
		// was the upstream's, not the client's.
		c.startFrame()
	}
	return true, nil
}

// extendLocked is extendKey's part under mu: the wait, and where the key
// state charge goes. added is false only when wait is.
func (c *conn) extendLocked(seq uint64, k ordering.Key, wait bool) (added, waited bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		did, err := c.seq.Extend(seq, k)
		if err != nil {
			return false, waited, fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
		}
		switch did {
		case ordering.ExtendAdded:
			c.bs.keys.N += ordering.KeyStateBytes
			return true, waited, nil
		case ordering.ExtendHeld:
			c.p.budget.Release(ordering.KeyStateBytes, false)
			return true, waited, nil
		case ordering.ExtendBarrier:
			// The write holds no keys any more, and takes none.
			c.p.budget.Release(ordering.KeyStateBytes, false)
			c.bs.keys.Release(c.p.budget)
			c.bs.barrier = true
			return true, waited, nil
		}
		if !wait {
			return false, false, nil
		}
		if c.dead.Load() {
			return false, waited, ErrShutdown
		}
		if !waited {
			c.pauseRead()
			defer c.resumeRead()
		}
		c.cond.Wait()
		waited = true
	}
}

// writeScanned writes the scanned bytes at the front of the window
// upstream and keeps the rest. more says more of the frame follows at
// once: the bytes may wait in the kernel to share its segments.
func (c *conn) writeScanned(more bool) error {
	bs := c.bs
	if bs.done == 0 {
		return nil
	}
	if bs.done == len(bs.win.B) {
		if err := c.settleBefore(); err != nil {
			return err
		}
	}
	c.p.streamWork.calls.Add(1)
	b := bs.win.B[:bs.done]
	var err error
	if more {
		bs.one[0] = b
		err = c.writeUpBefore(bs.one[:])
		bs.one[0] = nil
	} else {
		_, err = c.up.Write(b)
	}
	if err != nil {
		return err
	}
	n := copy(bs.win.B, bs.win.B[bs.done:])
	bs.win.B = bs.win.B[:n]
	bs.done = 0
	return nil
}

// fillWindow reads more of the frame from the client into the window,
// growing it when the bytes still to scan fill it.
func (c *conn) fillWindow() error {
	bs := c.bs
	// Nothing can use the frame before its end, which is still to come.
	if err := c.writeScanned(bs.socket > 0); err != nil {
		return err
	}
	if bs.socket == 0 {
		return fmt.Errorf("%w: Produce: %v", ErrBadRequest, wire.ErrCannotScan)
	}
	if len(bs.win.B) == cap(bs.win.B) {
		n := 2 * cap(bs.win.B)
		if err := c.accts[0].Reserve(wire.Cap(n)); err != nil {
			return c.timedOut(err)
		}
		nb := wire.Get(n)
		nb.B = nb.B[:copy(nb.B, bs.win.B)]
		wire.Put(bs.win)
		bs.winCh.Release(c.p.budget)
		bs.win, bs.winCh = nb, charge{N: int64(wire.Cap(n))}
	}
	free := bs.win.B[len(bs.win.B):cap(bs.win.B)]
	c.p.streamWork.calls.Add(1)
	k, err := c.in.ReadOwn(free[:min(int64(len(free)), bs.socket)])
	bs.win.B = bs.win.B[:len(bs.win.B)+k]
	bs.socket -= int64(k)
	if err != nil {
		return c.bodyReadError(err)
	}
	return nil
}

// bodyReadError is the connection's error for a failed read of a request
// body the proxy streams: the proxy's own deadline (a drain), a body cut
// short, one that did not arrive within the read timeout, or the client's
// socket failing.
func (c *conn) bodyReadError(err error) error {
	switch {
	case c.draining.Load():
		return fmt.Errorf("%w: a request was cut mid-body", ErrShutdown)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %v", ErrBadRequest, wire.ErrTruncated)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return c.timedOut(err)
	}
	return fmt.Errorf("%w: %w", errClientRead, err)
}

// dropStream gives back the window of a request that was set up to stream
// and never did: the connection ended first (a refused re-authentication,
// a failed upstream). The client reader, which alone streams, calls it as
// it stops; after a stream that ran, endStream has left nothing. Key state
// is charged only while streaming, so none is held here.
func (c *conn) dropStream() {
	if c.bs != nil && c.bs.win != nil {
		c.putWindow()
	}
}

// putWindow returns the window to its pool and its charge to the budget.
func (c *conn) putWindow() {
	bs := c.bs
	wire.Put(bs.win)
	bs.win = nil
	bs.winCh.Release(c.p.budget)
}

// endStream returns the window and hands the key state charged while
// streaming to the request, which releases it when it completes; if it has
// completed already, the charge goes back now.
func (c *conn) endStream(seq uint64) {
	bs := c.bs
	c.putWindow()
	if bs.keys.N == 0 {
		return
	}
	c.mu.Lock()
	if r, ok := c.seq.Get(seq); ok && r.resp == nil {
		r.stateCharge.N += bs.keys.N
		bs.keys = charge{}
	}
	c.mu.Unlock()
	bs.keys.Release(c.p.budget)
}
