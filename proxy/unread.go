package proxy

import (
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// A large Produce request can go upstream unread, head and body spliced
// together from the client socket as a relay moves them, when its head
// needs no change: the client reader peeks at the head (MSG_PEEK), learns
// from it what it would have read it for (the key, the version, acks), and
// splices the whole frame. In None mode the partitions are still found on
// the way (bodystream.go), and the head goes spliced with the first.
//
// The one field the proxy otherwise rewrites is the correlation id: the
// upstream's is the request's sequence number plus corrBase, a constant
// the connection takes from its first request's id (31 bits, wrapping).
// Clients that number each connection's requests one by one (franz-go,
// librdkafka, Sarama, kafka-python) therefore send, request after request,
// the very id the proxy would write, and those requests need no rewrite.
// Because corrBase never changes, ids stay unique among live requests and
// a late or repeated response can never match a newer request.
//
// The client reader peeks only while the requests it sees stream and are
// answered (unreadHead.on): a peek that is no use costs a system call, and
// a connection that sends small requests, or acks=0 ones, never peeks.

// unreadHead is the client reader's state for peeking at request heads.
type unreadHead struct {
	on bool // peek at the next request's head
	// never: the client numbers its requests otherwise (a counter shared
	// by its connections, as Java's is), so no head of it can go unread.
	never bool
	n     int // bytes of the current frame peeked at, all still in the socket
	// misses counts the small Produce requests peeked at in a row in the
	// single topology, which keep the peeks on up to peekMisses.
	misses int
	// buf holds what was peeked at. Made at the first peek and kept: a
	// peek waits for the client with it, so a pooled buffer would sit
	// idle with every idle producer.
	buf *[4 + spliceHead]byte
}

// corrMask keeps upstream correlation ids within 31 bits, never negative.
const corrMask = 1<<31 - 1

// upstreamCorrelation is the correlation id the upstream sees for seq.
func (c *conn) upstreamCorrelation(seq uint64) int32 {
	return int32((uint32(seq) + c.corrBase) & corrMask)
}

// sequenceOf is the live sequence number whose upstream correlation id is
// corr, if any.
func (c *conn) sequenceOf(corr int32) (uint64, bool) {
	if corr < 0 {
		return 0, false
	}
	return c.seq.Lookup(int32((uint32(corr) - c.corrBase) & corrMask))
}

// clientPeeker returns the client socket's peeker, nil when the client
// is not a TCP socket.
func (c *conn) clientPeeker() *sockio.Peeker {
	if !c.peekMade {
		c.peek, c.peekMade = sockio.NewPeeker(tcpConn(c.client)), true
	}
	return c.peek
}

// peekPrefix looks at the next request's first bytes without reading them,
// waiting for them as a read would. It returns how many it saw (at least 4:
// the length prefix is in lenBuf and the frame starts in c.uh.buf), or,
// with k < 4, that the caller reads instead.
func (c *conn) peekPrefix(lenBuf *[4]byte) (k int, err error) {
	if c.uh.buf == nil {
		c.uh.buf = new([4 + spliceHead]byte)
	}
	k, err = c.peek.Peek(c.uh.buf[:])
	if k < 4 {
		c.uh.drop()
		return k, err
	}
	copy(lenBuf[:], c.uh.buf[:4])
	c.uh.n = k
	return k, nil
}

// drop forgets what was peeked at.
func (u *unreadHead) drop() { u.n = 0 }

// unreadRequest returns the request whose head was peeked at, to be spliced
// whole, if it can go upstream unread: a Produce of at least spliceMin
// bytes, answered (acks not 0), whose header and acks lie in what was seen
// and whose correlation id is the one the proxy would write. Otherwise it
// takes the length prefix from the socket, as readPrefix would have, and
// returns nil: the caller reads the rest as usual. readErr and err are
// readRequest's.
func (c *conn) unreadRequest(size int32, lenBuf *[4]byte) (r *request, readErr, err error) {
	head := c.uh.buf[:min(c.uh.n, 4+int(size))]
	r, foreign := c.unreadable(head, size)
	c.uh.drop()
	c.uh.never = c.uh.never || foreign
	if r != nil {
		if err := c.reserveState(r); err != nil {
			putRequest(r)
			return nil, nil, err
		}
		return r, nil, nil
	}
	c.uh.on = false
	return nil, c.rereadPrefix(lenBuf), nil
}

// rereadPrefix reads the length prefix a peek saw, which the socket still
// holds, into lenBuf, as readPrefix would have.
func (c *conn) rereadPrefix(lenBuf *[4]byte) error {
	for n := 0; n < 4; {
		k, err := c.in.Read(lenBuf[n:])
		n += k
		if err != nil && n < 4 {
			return err
		}
	}
	return nil
}

// unreadable returns the request head begins, to go upstream unread, if
// it can; foreign reports a request that could have but for its
// correlation id. In None mode the request streams (bodystream.go), its
// head spliced with its first partition.
func (c *conn) unreadable(head []byte, size int32) (r *request, foreign bool) {
	if !c.splice || size < spliceMin {
		return nil, false
	}
	h, err := wire.ParseRequestHeader(head)
	if err != nil || h.Key != keyProduce || !c.p.served(h) {
		return nil, false
	}
	acks, _, err := produceAcks(head[h.Body:], h.Version, h.Flexible())
	if err != nil || acks == 0 || !c.headAllowed(h, head, size) {
		return nil, false
	}
	c.mu.Lock()
	next := c.seq.Next()
	fits := next > 0 && c.upstreamCorrelation(next) == h.Correlation
	c.mu.Unlock()
	if !fits {
		return nil, true
	}
	if c.mode == ordering.None || c.aud.countWrites {
		// Streamed as in None mode; in Connection mode when audited,
		// to be counted (audit/capture).
		return c.unreadNone(head, h, size), false
	}
	r = getRequest()
	r.hdr = h
	r.stream = 4 + int(size)
	r.ord = ordering.Request{Kind: ordering.Write}
	return r, false
}
