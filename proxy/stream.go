package proxy

import (
	"bufio"
	"fmt"

	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/wire"
)

// Large responses whose type can carry no addresses are streamed: once the
// upstream reader has read a response's length and correlation id, and the
// response is the next one the client is owed, the proxy writes the header
// with the client's correlation id and moves the body from the upstream
// socket to the client socket, instead of reading the whole response into
// a buffer that grows as it arrives. A Fetch from v16 on, which can carry
// addresses after its records, streams too, through a walk of its body
// (fetchstream.go), as does a Fetch of any version whose audit event
// counts what it returned (auditFetch). Anything else, or a response that must wait behind an
// earlier one, is read into a buffer.
//
// Between two TCP sockets the kernel splices the body, as a plain TCP relay
// does. Measured against the proxy's earlier copy through one pooled 1 MiB
// chunk, in the same rounds on a quiet machine, it took between 10% less
// and 6% more CPU per byte, 5% less at the median (BENCHMARKS.md), and the
// bytes never enter the proxy's memory. Over TLS the body is copied a whole
// chunk of at most streamChunk bytes at a time, read in a few calls and
// written in one.

// streamMin is the smallest response worth streaming; smaller ones are
// batched into one write with their neighbours instead.
const streamMin = spliceMin

// streamChunk bounds the memory a streamed response holds.
const streamChunk = 1 << 20

// streamable reports whether r's response, of size bytes after its length
// prefix, may be streamed: the proxy rewrites nothing in it but, in a Fetch
// from v16 on, the endpoints that end it (walked, fetchstream.go). An
// answer the ACLs let through untouched streams as without them.
func (c *conn) streamable(r *request, size int32) bool {
	if !c.streamResp || size < streamMin || r.noResp || r.forcedAck || r.fix != nil {
		// A Fix completes the decoded answer (authz.go): the
		// refusals of what was left out, what the client may not see.
		return false
	}
	key, version := r.hdr.Key, r.hdr.Version
	if key == keyApiVersions || c.p.fixup != nil && c.p.fixup.Needs(key, version) {
		return false
	}
	return key == keyFetch || !rewrite.Needs(key, version)
}

// streamResponse moves r's response from rd (the upstream) to the client if
// r is the next response owed: head holds its length prefix and correlation
// id, size its length. It reports false, having moved nothing, when an
// earlier response is still owed; the caller then reads it into a buffer.
// Holding wmu while checking the head and writing keeps the one-writer rule
// of deliver. A body cut short leaves the client mid-frame, so any error
// ends the connection.
func (c *conn) streamResponse(r *request, rd *bufio.Reader, head *[8]byte, size int32) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	next := c.seq.Head() == r.seq
	c.mu.Unlock()
	if !next {
		return false, nil
	}
	// The chunk or window is charged to the memory budget like any
	// frame, but without waiting: memory is freed by deliveries, which
	// wait for wmu, held here. Short of memory, the response takes the
	// buffered path, which waits outside wmu.
	walk := walked(r)
	n := wire.Cap(int(min(int64(size)-4, streamChunk)))
	if walk {
		n = wire.Cap(int(min(int64(size)+4, streamChunk)))
		if c.splice {
			n = wire.Cap(int(min(int64(size)+4, fetchWindow)))
		}
	}
	if !c.p.budget.TryReserveResponse(int64(n)) {
		return false, nil
	}
	wire.SetResponseCorrelation(head[:], r.hdr.Correlation)
	c.beginWrite()
	defer c.endWrite()
	if walk {
		// The window takes the charge.
		return true, c.streamWalk(r, rd, head, size, n)
	}
	defer c.p.budget.ReleaseResponse(int64(n))
	rest := int64(size) - 4
	// The upstream reader's buffer may already hold the start of the body.
	buffered, _ := rd.Peek(int(min(int64(rd.Buffered()), rest)))
	// Unlike a request's head, this one goes without MSG_MORE: held
	// back for the spliced body, it cost 5-9% more CPU per byte in two
	// side-by-side runs.
	c.outBufs = append(c.outBufs[:0], head[:], buffered)
	c.outW = c.outBufs
	_, err := c.outW.WriteTo(c.client)
	clear(c.outBufs)
	if err != nil {
		return true, c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
	}
	rd.Discard(len(buffered))
	rest -= int64(len(buffered))
	if rest == 0 {
		return true, nil
	}
	// rd is empty now, so the rest is read from the socket itself.
	if c.splice {
		copied, err := copyN(c.client, c.up, rest, &c.respBody)
		if err != nil && peerReset(c.client) {
			// A splice does not say which socket failed.
			return true, c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
		}
		if err != nil {
			return true, c.streamError(fmt.Errorf("%w: a streamed response was cut with %d bytes to go: %v", ErrUpstreamFailed, rest-copied, err))
		}
		return true, nil
	}
	// A whole chunk at a time, written in one call per chunk.
	chunk := wire.Get(int(min(rest, streamChunk)))
	defer wire.Put(chunk)
	for rest > 0 {
		b := chunk.B[:min(rest, int64(len(chunk.B)))]
		if err := wire.ReadBody(c.up, b); err != nil {
			return true, c.streamError(fmt.Errorf("%w: a streamed response was cut with %d bytes to go: %v", ErrUpstreamFailed, rest, err))
		}
		if _, err := c.client.Write(b); err != nil {
			return true, c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
		}
		rest -= int64(len(b))
	}
	return true, nil
}

func (c *conn) streamError(err error) error {
	if c.dead.Load() {
		return c.cause()
	}
	return err
}
