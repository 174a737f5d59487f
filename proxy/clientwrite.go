package proxy

import (
	"fmt"
	"sync/atomic"
	"time"
)

// The write timeout. A client that stops reading leaves the response being
// written to it blocked, with its memory, the responses behind it and the
// upstream connection; buffered responses are charged to the shared
// budget, so a few such clients could stall everyone's large responses.
// watchClients ends a connection whose client has accepted no byte of a
// response for the write timeout.
//
// No deadline is set on the writes themselves: that would be a timer
// update per response on the hot path, a splice that meets a deadline
// drops the bytes in its pipe, and a TLS write that does leaves the
// session broken, so a write could not be resumed after a deadline met
// while bytes still moved. Instead the client writer marks each write
// (beginWrite, endWrite), and the watch looks, every writeCheckEvery, at
// the client socket under a write that has lasted: while the kernel holds
// bytes for the client that it does not acknowledge, the client is not
// reading; bytes acknowledged, or none waiting (a streamed response waits
// for the upstream, not the client), are progress. Where the socket cannot
// say (not Linux), a write lasting the whole timeout is taken for a stall.

// writeWatch is one connection's client write as the watch sees it.
type writeWatch struct {
	// since is when the write under way began, on monoNow's clock; 0
	// while none is. The client writer stores it, the watch loads it.
	since atomic.Int64

	// The watch's own, read and written by watchClients alone: the write
	// it looked at last (its since), the bytes the client had
	// acknowledged then, and when bytes last moved.
	seen     int64
	acked    uint64
	progress int64
}

// clockStart anchors monoNow.
var clockStart = time.Now()

// monoNow is nanoseconds on the monotonic clock, never 0.
func monoNow() int64 { return int64(time.Since(clockStart)) + 1 }

// beginWrite marks the start of a client write. Client writer only.
func (c *conn) beginWrite() {
	if c.lim.write > 0 {
		c.ww.since.Store(monoNow())
	}
}

// endWrite marks its end.
func (c *conn) endWrite() {
	if c.lim.write > 0 {
		c.ww.since.Store(0)
	}
}

// writeCheckEvery is how often watchClients looks at the clients, for a
// write timeout of d: a quarter of it, within 10 ms and 1 s; every second
// without one.
func writeCheckEvery(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return min(max(d/4, 10*time.Millisecond), time.Second)
}

// watchClients ends, until the proxy closes, every connection whose client
// accepts no byte of a response for its write timeout, or has gone while
// the proxy does not read it (clientpause.go).
func (p *Proxy) watchClients() {
	defer p.wg.Done()
	var conns []*conn
	for {
		every := writeCheckEvery(p.current().WriteTimeout)
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(every):
		}
		conns = p.openConns(conns)
		for _, c := range conns {
			now := monoNow()
			if c.writeStalled(now) {
				c.die(fmt.Errorf("%w: the client accepted no byte of a response for %v", ErrWriteTimeout, c.lim.write))
			}
			if err := c.pausedClientGone(now); err != nil {
				c.die(err)
			}
		}
		clear(conns)
	}
}

// writeStalled reports whether c's client has accepted no byte of the
// write under way for the write timeout. watchClients only.
func (c *conn) writeStalled(now int64) bool {
	return c.writeStalledWith(now, func() (uint64, bool, bool) { return sendQueue(c.client) })
}

// writeStalledWith is writeStalled with the client socket's send queue
// read by queue (sendQueue's results).
func (c *conn) writeStalledWith(now int64, queue func() (acked uint64, waiting, known bool)) bool {
	w := &c.ww
	since := w.since.Load()
	d := int64(c.lim.write)
	if since == 0 || d <= 0 {
		w.seen = 0
		return false
	}
	if now-since < d/4 {
		return false // too young to be worth a system call
	}
	acked, waiting, known := queue()
	switch {
	case w.seen != since:
		// A write not seen before: whether bytes moved since it began
		// is unknown, so the timeout counts from now.
		w.seen, w.acked, w.progress = since, acked, now
	case known && acked != w.acked:
		w.acked, w.progress = acked, now
	}
	if known && !waiting {
		w.progress = now // nothing for the client to take
	}
	return now-w.progress >= d
}
