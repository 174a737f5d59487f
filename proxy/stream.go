package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/wire"
)

// Large responses whose type can carry no addresses are streamed: once the
// upstream reader has read a response's length and correlation id, and the
// response is the next one the client is owed, the proxy writes the header
// with the client's correlation id and the kernel moves the body from the
// upstream socket to the client socket, as a plain TCP relay does. A Fetch
// below v16 (clients capped with --api-version-cap Fetch=15) is the case
// that matters: its records never enter user space. Anything else, or a
// response that must wait behind an earlier one, is read into a buffer.

// streamMin is the smallest response worth streaming; smaller ones are
// batched into one write with their neighbours instead.
const streamMin = spliceMin

// streamable reports whether r's response, of size bytes after its length
// prefix, may go from upstream to client unread: the proxy neither rewrites
// nor inspects anything in it.
func (c *conn) streamable(r *request, size int32) bool {
	if !c.streamResp || size < streamMin || r.noResp || r.forcedAck {
		return false
	}
	key, version := r.hdr.Key, r.hdr.Version
	if key == keyApiVersions || rewrite.Needs(key, version) {
		return false
	}
	return c.p.fixup == nil || !c.p.fixup.Needs(key, version)
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
	wire.SetResponseCorrelation(head[:], r.hdr.Correlation)
	rest := int64(size) - 4
	// The upstream reader's buffer may already hold the start of the body.
	buffered, _ := rd.Peek(int(min(int64(rd.Buffered()), rest)))
	c.outBufs = append(c.outBufs[:0], head[:], buffered)
	w := c.outBufs
	_, err := w.WriteTo(c.client)
	clear(c.outBufs)
	if err != nil {
		return true, c.streamError(fmt.Errorf("%w: client write: %v", errClientClosed, err))
	}
	rd.Discard(len(buffered))
	rest -= int64(len(buffered))
	if rest == 0 {
		return true, nil
	}
	// rd is empty now, so the rest is read from the socket itself: with
	// both ends TCP sockets, io.CopyN splices.
	n, err := io.CopyN(c.client, c.up, rest)
	if err != nil {
		if errors.Is(err, io.EOF) && n < rest {
			err = wire.ErrTruncated
		}
		return true, c.streamError(fmt.Errorf("%w: a streamed response was cut after %d of %d bytes: %v", ErrUpstreamFailed, n, rest, err))
	}
	return true, nil
}

func (c *conn) streamError(err error) error {
	if c.dead.Load() {
		return c.cause()
	}
	return err
}
