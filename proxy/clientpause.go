package proxy

import (
	"fmt"
	"sync/atomic"
)

// While the client reader waits without reading (for room in the
// sequencer, for the upstream to fall quiet, for an earlier write to a
// partition a streamed request touches), a client that resets or closes
// goes unnoticed until the upstream answers, and an upstream that hangs
// never does: the connection, its upstream connection and what it holds
// would stay. The watch (watchClients) looks at a paused reader's client
// socket. A reset ends the connection at once. A close (a FIN) may be a
// half-close, after which the client still reads what it is owed, so the
// connection goes on while responses are delivered; it ends once none has
// been for eofDrain, the bound an EOF the reader reads gives its requests.

// pauseWatch is the client reader's pause as the watch sees it.
type pauseWatch struct {
	// paused: the client reader waits without reading the client.
	paused atomic.Bool
	// finAt is when the watch, seeing the client's FIN while the reader
	// was paused, last saw a response delivered (the sequencer's head
	// move from head), on monoNow's clock; 0: no FIN seen. watchClients
	// only.
	finAt int64
	head  uint64
}

// pauseRead marks the client reader as waiting without reading; resumeRead
// ends the mark. Client reader only.
func (c *conn) pauseRead()  { c.pw.paused.Store(true) }
func (c *conn) resumeRead() { c.pw.paused.Store(false) }

// pausedClientGone returns why the connection must end, if its client has
// gone while the reader is paused: reset, or closed and no response
// delivered for eofDrain. watchClients only.
func (c *conn) pausedClientGone(now int64) error {
	if !c.pw.paused.Load() {
		return nil
	}
	reset, closed := peerGone(c.client)
	if reset {
		return fmt.Errorf("%w: reset while the proxy waited to read from it", errClientClosed)
	}
	if !closed {
		c.pw.finAt = 0
		return nil
	}
	c.mu.Lock()
	head := c.seq.Head()
	c.mu.Unlock()
	if c.pw.finAt == 0 || head != c.pw.head {
		c.pw.finAt, c.pw.head = now, head
		return nil
	}
	if now-c.pw.finAt >= int64(eofDrain) {
		return errEOFDrain
	}
	return nil
}
