package single

import (
	"bufio"
	"errors"
	"io"
	"net"

	"github.com/inorder-proxy/inorder/wire"
)

// A Fetch answer cut for memory (fetchcut.go), owed where a parked one
// may go (parkable), parks the record sets it keeps as readParked does
// (fetchpark.go): spliced from the broker's socket into pipes, holes in
// its frame, spliced on into the client's socket when the merged answer
// is written. Its frame is then mapped at the answer's size
// (internal/pages), of which only the reservation grows as the cut keeps
// more: the frame never moves, since moving it would write its holes, and
// only the pages its fields are written to are ever given. Kept record
// sets were otherwise read into the frame and written from it, a copy
// each way: with the clients' default fetch sizes through a sidecar's
// budget most answers are cut, and those copies were most of the cut's
// CPU.

// cutPark is what a cut needs to park the record sets it keeps: the
// reader of the broker's socket and the socket, and the size from which
// a record set is parked.
type cutPark struct {
	br   *bufio.Reader
	nc   *net.TCPConn
	from int
}

// mapFrame makes out a mapped frame of the answer's size, nothing of it
// reserved yet, when the cut parks; a cut that cannot map reads its
// record sets instead.
func (c *cutter) mapFrame(park *cutPark) {
	if park == nil {
		return
	}
	b := mappedFrame(c.total)
	if b == nil {
		return
	}
	c.park, c.buf, c.out = park, b, b.B
}

// parkN takes the next n bytes of the answer, a record set kept, into
// out: what the reader holds of it copied, the rest spliced into pipes
// and left a hole, as far as pipes take it, and read past that.
func (c *cutter) parkN(n int) {
	if c.err != nil {
		return
	}
	if n > c.left {
		c.fail("a field of %d bytes runs past the frame's end", n)
		return
	}
	if !c.grow(n) {
		c.err = errCutRoom
		return
	}
	at := len(c.out)
	end := at + n
	c.out = c.out[:end]
	filled, err := c.parked.take(c.park.br, c.park.nc, c.out, at, end)
	if err != nil {
		c.failRead(err)
		return
	}
	if filled < end {
		if _, err := io.ReadFull(c.park.br, c.out[filled:end]); err != nil {
			c.failRead(err)
			return
		}
	}
	c.left -= n
}

// failRead ends the cut with a read's error.
func (c *cutter) failRead(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = wire.ErrTruncated
	}
	c.err = err
}
