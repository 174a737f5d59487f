package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/wire"
)

// A Fetch response from v16 on can carry KIP-951 node endpoints, which
// must be rewritten, in its tag section: after all its records, while its
// length prefix comes first. It is streamed all the same when it is the
// next response owed. wire.FetchStream reads the small pieces between
// record sets as they pass (topic and partition headers, aborted
// transactions, tag sections) through a window; record sets pass
// unread, spliced from the upstream socket to the client's when they are
// large and both are TCP sockets, through the window otherwise (over TLS
// the window is the one bounded chunk). Between TCP sockets, where nothing
// of the next partition has been read, the walk peeks at the upstream
// socket to find its records (MSG_PEEK, as a streaming request's
// partitions are found in bodystream.go) and splices its header with
// them: no read, no copy and no write of the header bytes. Measured side
// by side with the header read through the window, 50 MiB responses of 50
// partitions cost 0.95 instead of 1.35 times a relay's CPU per GB. At the
// end the tag section is read
// whole into the window and written in the length it arrived in: without
// endpoints, nearly always, as it came; with them, rewritten through the
// node table, padded with a filler tag to that length (wire.PadTags), or,
// where the rewritten endpoints do not fit, replaced by a filler alone,
// which clients skip, learning the new leader from Metadata as before
// KIP-951. A response found malformed on the way leaves the client
// mid-frame, and the connection ends.

// Window sizes: between TCP sockets records of fetchSpliceMin bytes or
// more are spliced, so the window holds the pieces between them and
// smaller records; otherwise every byte passes through it, and it is the
// chunk a plain streamed response uses.
const (
	fetchWindow    = 64 << 10
	fetchSpliceMin = spliceMin
)

// walked reports whether r's response is streamed through a walk of its
// body rather than moved unread: one that can carry addresses, which only
// a Fetch that streamable lets through can, and any Fetch whose event is
// recorded (auditFetch).
func walked(r *request) bool {
	return rewrite.Needs(r.hdr.Key, r.hdr.Version) || auditFetch(r)
}

// auditFetch reports whether r is a Fetch whose audit event takes what
// its response returned: one audited, in either data path. Its response
// is then walked at any version, and the walk counts each partition's
// records as they pass (capture.Fetched): from the bytes the window holds
// anyway, and, for records spliced, from a peek at each batch's header
// before the batch is spliced (with any later batch whose header the
// peek saw): a peek and a splice per batch of spliceMin bytes or more,
// smaller ones read through the window, as a record set that small is.
// A proxy without an audit, or one that does not record Fetch, walks as
// before. Measured with the bench's consumer (fetches of one 1 MiB batch,
// v18, walked with or without the count), the per-request audit took
// 0.86 to 1.29 times the CPU per GB of the proxy without audit over seven
// runs, median 0.97, beside 0.82 to 1.11, median 1.02, for the audit that
// counted nothing; capped at v15, which the proxy without audit splices
// unread, 1.03 to 1.35 over six runs, median 1.18, beside 0.83 to 1.57,
// median 1.07, for the audit that spliced it unread too (the same code
// path on both sides, so the spread is the machine's, shared with other
// work).
func auditFetch(r *request) bool {
	return r.aud != nil && r.hdr.Key == keyFetch
}

// fetchWalk is the upstream reader's state while it streams a Fetch
// response through a walk.
type fetchWalk struct {
	scan wire.FetchStream
	win  *wire.Buf
	ch   charge
	// The window holds bytes of the frame read from the upstream: the
	// first done of them are scanned (or passed) and go to the client
	// next; pass bytes after them, some perhaps in the window, are a
	// field the walk passes unread.
	done   int
	pass   int64
	unread int64 // frame bytes not yet read from the upstream
	bufs   [2][]byte
	// peek is the upstream socket's peeker, made on first use (nil
	// when it cannot be, and then peekMade); peeked is what it saw.
	peek     *sockio.Peeker
	peekMade bool
	peeked   [streamPeek]byte
	// aud counts what the response returns for its audit event
	// (auditFetch); count: the bytes passed are a partition's records it
	// counts, of which the next seen, not yet moved, it saw in a peek.
	aud   capture.Fetched
	count bool
	seen  int64
}

// streamWalk streams r's response, of size bytes after its length prefix,
// whose length and correlation id (with the client's id) are in head,
// from rd to the client; the caller holds wmu, r is the next response
// owed and the window is charged. Any error leaves the client mid-frame.
func (c *conn) streamWalk(r *request, rd *bufio.Reader, head *[8]byte, size int32, n int) error {
	if c.fw == nil {
		c.fw = new(fetchWalk)
	}
	fw := c.fw
	fw.win, fw.ch = wire.Get(n), charge{N: int64(wire.Cap(n)), Resp: true}
	defer func() {
		wire.Put(fw.win)
		fw.win = nil
		fw.ch.Release(c.p.budget)
		fw.aud.Begin(nil)
	}()
	fw.win.B = append(fw.win.B[:0], head[:]...)
	fw.done, fw.pass, fw.unread = len(head), 0, int64(size)-4
	fw.count, fw.seen = false, 0
	fw.scan.Start(r.hdr.Version, fw.unread, true)
	if auditFetch(r) {
		fw.aud.Begin(r.aud)
		fw.scan.Report()
	}
	for {
		if fw.pass > 0 {
			k := min(fw.pass, int64(len(fw.win.B)-fw.done))
			c.fetchSee(fw.win.B[fw.done : fw.done+int(k)])
			fw.done += int(k)
			fw.pass -= k
			if fw.pass == 0 {
				fw.count = false
				continue
			}
			var err error
			switch run := c.fetchRun(); {
			case c.splice && run >= fetchSpliceMin:
				err = c.fetchSplice(rd, run)
			case c.fetchLook(rd):
				continue
			default:
				err = c.fetchFill(rd)
			}
			if err != nil {
				return err
			}
			continue
		}
		if n := c.fetchPeek(rd); n > 0 {
			step, err := c.fetchScanPeeked(n)
			if err == nil {
				if err := c.fetchPeeked(rd, step, n); err != nil {
					return err
				}
				if step.End {
					return c.endWalk(r, rd)
				}
				continue
			}
			if !errors.Is(err, wire.ErrNeedMore) {
				return fetchParseError(r, err)
			}
			// Too little was seen: read instead.
		}
		step, err := fw.scan.Next(fw.win.B[fw.done:])
		switch {
		case errors.Is(err, wire.ErrNeedMore):
			if err := c.fetchFill(rd); err != nil {
				return err
			}
			continue
		case err != nil:
			return fetchParseError(r, err)
		}
		c.fetchFound(step)
		fw.done += step.Used
		fw.pass = step.Pass
		if step.End {
			return c.endWalk(r, rd)
		}
	}
}

// fetchScanPeeked scans the n bytes peeked; where the scan reports (an
// audited Fetch), through the topics and partitions it finds on the way,
// each reported (fetchFound), to a step that ends at records, at the end
// of the topics or where the bytes peeked end.
func (c *conn) fetchScanPeeked(n int) (wire.FetchStep, error) {
	fw := c.fw
	used := 0
	for {
		step, err := fw.scan.Next(fw.peeked[used:n])
		if err != nil {
			if used > 0 && errors.Is(err, wire.ErrNeedMore) {
				return wire.FetchStep{Used: used}, nil
			}
			return step, err
		}
		c.fetchFound(step)
		used += step.Used
		if step.Found == wire.FoundNothing || step.Pass > 0 || step.End {
			step.Used = used
			return step, nil
		}
	}
}

// fetchFound tells the audit's count of the response what step found;
// the partition's records, which the step passes, are counted as they
// go.
func (c *conn) fetchFound(step wire.FetchStep) {
	fw := c.fw
	switch step.Found {
	case wire.FoundTopic:
		c.aud.ev.FetchTopic(&fw.aud, step.Topic, step.TopicID)
	case wire.FoundPartition:
		c.aud.ev.FetchPartition(&fw.aud, step.Partition, step.ErrorCode, step.Pass)
		fw.count, fw.seen = step.Pass > 0, 0
	}
}

// fetchSee shows the count the next bytes of the records passing, b, of
// which it saw the first fw.seen in a peek.
func (c *conn) fetchSee(b []byte) {
	fw := c.fw
	if !fw.count {
		return
	}
	k := min(fw.seen, int64(len(b)))
	fw.seen -= k
	c.aud.ev.FetchRecords(&fw.aud, b[k:])
}

// fetchSkip lets the next n bytes of the records passing go unseen: their
// first fw.seen were seen, the rest the count may skip (fetchRun).
func (c *conn) fetchSkip(n int64) {
	fw := c.fw
	if !fw.count {
		return
	}
	k := min(fw.seen, n)
	fw.seen -= k
	c.aud.ev.FetchSkip(&fw.aud, n-k)
}

// fetchRun is how many of the bytes passed may go without the walk
// seeing them: all of them, but for counted records only those seen or
// that the count may skip, up to the next batch's header not seen.
func (c *conn) fetchRun() int64 {
	fw := c.fw
	if !fw.count {
		return fw.pass
	}
	return min(fw.pass, fw.seen+fw.aud.Unseen())
}

// fetchLook peeks, between TCP sockets, at the records passing where the
// count waits for a batch's header that is not in memory and a splice
// could follow, and shows the count what it saw: the next batch's header
// and any after it in view. It reports false where it does not peek or
// saw nothing; the bytes are read then.
func (c *conn) fetchLook(rd *bufio.Reader) bool {
	fw := c.fw
	if !fw.count || !c.splice || fw.seen > 0 || fw.pass < fetchSpliceMin || rd.Buffered() > 0 {
		return false
	}
	if !fw.peekMade {
		fw.peek, fw.peekMade = sockio.NewPeeker(tcpConn(c.up)), true
	}
	if fw.peek == nil {
		return false
	}
	c.fetchCall()
	n, err := fw.peek.Peek(fw.peeked[:min(int64(len(fw.peeked)), fw.pass)])
	if err != nil || n == 0 {
		return false
	}
	c.aud.ev.FetchRecords(&fw.aud, fw.peeked[:n])
	fw.seen = int64(n)
	return true
}

// fetchCall counts a call on a socket of an audited walk (fetchCalls);
// a walk not audited counts nothing, so that the path every Fetch v16+
// takes shares no counter between connections.
func (c *conn) fetchCall() {
	if c.fw.aud.On() {
		c.p.fetchCalls.Add(1)
	}
}

func fetchParseError(r *request, err error) error {
	return fmt.Errorf("%w: a streamed Fetch v%d response does not parse: %v", ErrUpstreamProtocol, r.hdr.Version, err)
}

// fetchPeek copies the upstream socket's next bytes of the frame into
// fw.peeked without taking them, and returns how many: when splicing,
// with nothing unscanned in the window or the reader's buffer, the walk
// learns where the next record set starts without reading the bytes
// before it, and splices them with it. It returns 0 where it does not
// peek, or the peek fails (a read then says why).
func (c *conn) fetchPeek(rd *bufio.Reader) int {
	fw := c.fw
	// What is left of a frame a peek could see whole is read at once:
	// it holds no record set worth a splice, and a peek would only
	// precede the read.
	if !c.splice || fw.done < len(fw.win.B) || rd.Buffered() > 0 || fw.unread <= streamPeek {
		return 0
	}
	if !fw.peekMade {
		fw.peek, fw.peekMade = sockio.NewPeeker(tcpConn(c.up)), true
	}
	if fw.peek == nil {
		return 0
	}
	c.fetchCall()
	n, err := fw.peek.Peek(fw.peeked[:min(int64(len(fw.peeked)), fw.unread)])
	if err != nil {
		return 0
	}
	return n
}

// fetchPeeked moves the bytes a step over peeked bytes scanned: with a
// large record set after them, the window's scanned bytes are written and
// the step's bytes and the records spliced together, unread; otherwise
// the step's bytes are read into the window and what it passes follows
// as usual.
func (c *conn) fetchPeeked(rd *bufio.Reader, step wire.FetchStep, n int) error {
	fw := c.fw
	run := step.Pass
	if fw.count {
		// The records' first bytes are in view: shown to the count,
		// they let the splice go as far as the batches seen.
		k := min(int64(n-step.Used), step.Pass)
		c.aud.ev.FetchRecords(&fw.aud, fw.peeked[step.Used:int64(step.Used)+k])
		fw.seen = k
		fw.pass = step.Pass
		run = c.fetchRun()
	}
	if run >= fetchSpliceMin {
		if fw.done > 0 {
			if err := c.fetchWrite(nil); err != nil {
				return err
			}
		}
		c.fetchSkip(run)
		fw.pass = step.Pass - run
		if fw.pass == 0 {
			fw.count = false
		}
		n := int64(step.Used) + run
		fw.unread -= n
		return c.spliceUp(n)
	}
	if cap(fw.win.B)-len(fw.win.B) < step.Used {
		if err := c.fetchWrite(nil); err != nil {
			return err
		}
	}
	at := len(fw.win.B)
	fw.win.B = fw.win.B[:at+step.Used]
	c.fetchCall()
	if _, err := io.ReadFull(rd, fw.win.B[at:]); err != nil {
		return c.streamError(fmt.Errorf("%w: a streamed response was cut with %d bytes to go: %v", ErrUpstreamFailed, fw.unread, err))
	}
	fw.unread -= int64(step.Used)
	fw.done += step.Used
	fw.pass = step.Pass
	return nil
}

// endWalk reads the tail of the response (its tag section) whole into the
// window, rewrites any endpoints in it in its length, and writes out what
// the window holds.
func (c *conn) endWalk(r *request, rd *bufio.Reader) error {
	fw := c.fw
	tail := int(fw.scan.Left())
	for len(fw.win.B)-fw.done < tail {
		if err := c.fetchFill(rd); err != nil {
			return err
		}
	}
	switch {
	case rewrite.Needs(r.hdr.Key, r.hdr.Version):
		if err := c.fetchTail(r.hdr.Version, fw.win.B[fw.done:fw.done+tail]); err != nil {
			return err
		}
	case fw.aud.On():
		// The event takes the response only as kmsg would read it:
		// its tag section too.
		if _, err := wire.ScanFetchTail(r.hdr.Version, fw.win.B[fw.done:fw.done+tail]); err != nil {
			return fmt.Errorf("%w: a streamed Fetch response's tag section: %v", ErrUpstreamProtocol, err)
		}
	}
	if fw.aud.On() {
		c.aud.ev.FetchEnd(&fw.aud, fw.scan.ErrorCode())
	}
	fw.done += tail
	return c.fetchWrite(nil)
}

// fetchFill reads more of the frame into the window. Room is made first:
// scanned bytes are written to the client, or, when the window holds a
// single field larger than itself, it grows.
func (c *conn) fetchFill(rd *bufio.Reader) error {
	fw := c.fw
	if fw.unread == 0 {
		return fmt.Errorf("%w: a streamed Fetch response ends inside a field", ErrUpstreamProtocol)
	}
	if len(fw.win.B) == cap(fw.win.B) {
		if fw.done > 0 {
			if err := c.fetchWrite(nil); err != nil {
				return err
			}
		} else if err := c.fetchGrow(); err != nil {
			return err
		}
	}
	free := fw.win.B[len(fw.win.B):cap(fw.win.B)]
	if rd.Buffered() == 0 {
		c.fetchCall()
	}
	k, err := rd.Read(free[:min(int64(len(free)), fw.unread)])
	fw.win.B = fw.win.B[:len(fw.win.B)+k]
	fw.unread -= int64(k)
	if err != nil {
		return c.streamError(fmt.Errorf("%w: a streamed response was cut with %d bytes to go: %v", ErrUpstreamFailed, fw.unread, err))
	}
	return nil
}

// fetchGrow doubles the window, whose bytes are one field still to scan.
// It waits for no memory: the caller holds wmu, which the deliveries that
// would free some need.
func (c *conn) fetchGrow() error {
	fw := c.fw
	n := 2 * cap(fw.win.B)
	if !c.p.budget.TryReserveResponse(int64(wire.Cap(n))) {
		return fmt.Errorf("%w: a streamed Fetch response holds a field of over %d bytes before its records, and the memory budget has no room for it", ErrUpstreamProtocol, cap(fw.win.B))
	}
	nb := wire.Get(n)
	nb.B = append(nb.B[:0], fw.win.B...)
	wire.Put(fw.win)
	fw.ch.Release(c.p.budget)
	fw.win, fw.ch = nb, charge{N: int64(wire.Cap(n)), Resp: true}
	return nil
}

// fetchWrite writes the scanned bytes of the window to the client,
// followed by more, and keeps the rest of the window.
func (c *conn) fetchWrite(more []byte) error {
	fw := c.fw
	bufs := fw.bufs[:0]
	if fw.done > 0 {
		bufs = append(bufs, fw.win.B[:fw.done])
	}
	if len(more) > 0 {
		bufs = append(bufs, more)
	}
	c.outW = bufs
	c.fetchCall()
	_, err := c.outW.WriteTo(c.client)
	clear(fw.bufs[:])
	if err != nil {
		return c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
	}
	k := copy(fw.win.B, fw.win.B[fw.done:])
	fw.win.B, fw.done = fw.win.B[:k], 0
	return nil
}

// fetchSplice writes the window's scanned bytes and the next run bytes of
// the field being passed, none of them in the window: what the upstream
// reader's buffer holds of them goes in the same system call, the rest is
// spliced from the upstream socket to the client socket.
func (c *conn) fetchSplice(rd *bufio.Reader, run int64) error {
	fw := c.fw
	held, _ := rd.Peek(int(min(int64(rd.Buffered()), run)))
	if err := c.fetchWrite(held); err != nil {
		return err
	}
	rd.Discard(len(held))
	c.fetchSkip(run)
	rest := run - int64(len(held))
	fw.unread -= run
	fw.pass -= run
	if fw.pass == 0 {
		fw.count = false
	}
	if rest == 0 {
		return nil
	}
	// rd is empty now, so the rest is read from the socket itself.
	return c.spliceUp(rest)
}

// spliceUp splices the next n bytes of the frame from the upstream socket
// to the client socket; the upstream reader's buffer holds none of them,
// and fw.unread no longer counts them.
func (c *conn) spliceUp(n int64) error {
	c.fetchCall()
	copied, err := copyN(c.client, c.up, n, &c.respBody)
	if err != nil && peerReset(c.client) {
		// A splice does not say which socket failed.
		return c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
	}
	if err != nil {
		return c.streamError(fmt.Errorf("%w: a streamed response was cut with %d bytes to go: %v", ErrUpstreamFailed, c.fw.unread+n-copied, err))
	}
	return nil
}

// fetchTail rewrites the endpoints in the tail of a streamed Fetch
// response at version in its length (rewrite.FetchTail).
func (c *conn) fetchTail(version int16, tail []byte) error {
	fate, err := rewrite.FetchTail(version, tail, &c.p.nodes)
	switch {
	case errors.Is(err, rewrite.ErrTail):
		return fmt.Errorf("%w: a streamed %v", ErrUpstreamProtocol, err)
	case err != nil:
		return rewriteError(keyFetch, version, err)
	case fate == rewrite.TailEndpointsDropped:
		c.p.log.Debug("endpoints of a streamed Fetch response dropped: rewritten, they would not fit its length", c.who()...)
	}
	return nil
}
