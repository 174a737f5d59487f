package proxy

import (
	"errors"
	"net"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/wire"
)

// A response written as a vector: r.resp holds the bytes the proxy
// encoded (the head), r.vec every piece of the frame in order, slices of
// the head and of buffers it does not own, which r.vecDone gives back
// once the frame is written (request.free). The single topology's merged
// Fetch answers pass their parts' record sets this way
// (single/fetchmerge.go).

// respLen is the length of r's response frame.
func (r *request) respLen() int {
	if r.vec != nil {
		return r.vecLen
	}
	return len(r.resp.B)
}

// appendResp appends r's response frame to bufs, as pieces, and the pipe
// each is spliced from to from, when from is kept (see piped).
func (r *request) appendResp(bufs net.Buffers, from []*sockio.Pipe, piped bool) (net.Buffers, []*sockio.Pipe) {
	if r.vec != nil {
		if piped {
			if r.vecFrom != nil {
				from = append(from, r.vecFrom...)
			} else {
				for range r.vec {
					from = append(from, nil)
				}
			}
		}
		return append(bufs, r.vec...), from
	}
	if piped {
		from = append(from, nil)
	}
	return append(bufs, r.resp.B), from
}

// piped reports whether one of rs's answers has a piece in a pipe.
func piped(rs []*request) bool {
	for _, r := range rs {
		if r.vecFrom != nil {
			return true
		}
	}
	return false
}

// vecChunk is how much of a vector a connection that takes no vector
// (TLS) is given at a time: the pieces are joined into chunks of it, so
// that a frame goes as a few full TLS records, not one record and one
// write per piece. A vector's head reserves it (single/fetchmerge.go).
const vecChunk = 64 << 10

// writeOut writes c.outW to the client: at once where the socket takes a
// vector or no response is in pieces, else in chunks of vecChunk; with
// c.outFrom, its pieces in pipes spliced.
func (c *conn) writeOut(pieces bool) error {
	if c.outFrom != nil {
		tc, ok := c.client.(*net.TCPConn)
		if !ok {
			return errNoSplice
		}
		return sockio.WritePiped(tc, c.outW, c.outFrom)
	}
	if !pieces || c.clientTakesVector() {
		_, err := c.outW.WriteTo(c.client)
		return err
	}
	chunk := wire.Get(vecChunk)
	defer wire.Put(chunk)
	buf := chunk.B[:vecChunk]
	n := 0
	for _, b := range c.outW {
		for len(b) > 0 {
			k := copy(buf[n:], b)
			n += k
			b = b[k:]
			if n == len(buf) {
				if _, err := c.client.Write(buf); err != nil {
					return err
				}
				n = 0
			}
		}
	}
	if n > 0 {
		if _, err := c.client.Write(buf[:n]); err != nil {
			return err
		}
	}
	return nil
}

// errNoSplice: pieces in pipes for a client socket that takes no splice,
// which the single topology never makes (singleClient.Splices).
var errNoSplice = errors.New("an answer in pipes for a socket that takes no splice")

// clientTakesVector reports whether the client's socket writes a vector
// as it is (plaintext TCP), with no chunk joined for it.
func (c *conn) clientTakesVector() bool {
	_, ok := c.client.(*net.TCPConn)
	return ok
}
