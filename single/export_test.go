package single

import (
	"bufio"
	"io"
	"net"

	"github.com/inorder-proxy/inorder/wire"
)

// CutRoom is cutRoom, for the tests' rooms.
type CutRoom = cutRoom

// CutFetchAnswer is cutFetchAnswer, for the tests: it returns the cut
// frame, how many partitions' records were dropped, and the error.
func CutFetchAnswer(rd io.Reader, head []byte, total int, version int16, most int, room CutRoom) (*wire.Buf, int, error) {
	buf, cut, err := cutFetchAnswer(rd, nil, nil, head, total, version, most, room)
	return buf, cut.dropped, err
}

// CutFetchAnswerFrom is cutFetchAnswer of an answer rd reads from nc,
// the bytes it drops dropped as a broker's are.
func CutFetchAnswerFrom(rd *bufio.Reader, nc net.Conn, head []byte, total int, version int16, most int, room CutRoom) (*wire.Buf, int, error) {
	buf, cut, err := cutFetchAnswer(rd, answerDropper(rd, nc), nil, head, total, version, most, room)
	return buf, cut.dropped, err
}

// ReadParked is readParked with record sets of from bytes or more
// parked, and the frame then filled: the frame as it went to the client
// had its pieces been written from memory; parked is how many spans were
// parked.
func ReadParked(rd *bufio.Reader, nc *net.TCPConn, head []byte, total int, version int16, acct wire.Account, from int) (buf *wire.Buf, parkedSpans int, err error) {
	buf, err = readParked(rd, nc, head, total, version, acct, from)
	if err != nil {
		return nil, 0, err
	}
	if h, ok := buf.Out.(*parked); ok {
		parkedSpans = len(h.spans)
	}
	return buf, parkedSpans, fill(buf)
}

// ErrParkMalformed is errParkMalformed.
var ErrParkMalformed = errParkMalformed

// ReadParkedHoled is readParked, the frame left as read: the record sets
// parked are holes in it until it is filled or put.
func ReadParkedHoled(rd *bufio.Reader, nc *net.TCPConn, head []byte, total int, version int16, acct wire.Account, from int) (*wire.Buf, error) {
	return readParked(rd, nc, head, total, version, acct, from)
}

// Fill is fill.
var Fill = fill

// CutFetchAnswerParked is cutFetchAnswer of an answer rd reads from nc,
// the bytes it drops dropped and the record sets of from bytes or more
// it keeps parked, as a broker's are.
func CutFetchAnswerParked(rd *bufio.Reader, nc *net.TCPConn, head []byte, total int, version int16, most, from int, room CutRoom) (*wire.Buf, int, error) {
	buf, cut, err := cutFetchAnswer(rd, answerDropper(rd, nc), &cutPark{br: rd, nc: nc, from: from}, head, total, version, most, room)
	return buf, cut.dropped, err
}

// FillFetch is fillFetch, for the tests.
var FillFetch = fillFetch

// Overshoots reports whether a cut answer to a part asking most bytes,
// of which dropped partitions' records were dropped, bytes of them, has
// its broker taken for one answering past max_bytes
// (noteOvershootLocked).
func Overshoots(most int32, dropped int, bytes int64) bool {
	s := &Conn{}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteOvershootLocked(1, &partRef{maxBytes: most}, dropped, bytes)
	return s.overshoots[1]
}
