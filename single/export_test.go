package single

import (
	"io"

	"github.com/inorder-proxy/inorder/wire"
)

// CutRoom is cutRoom, for the tests' rooms.
type CutRoom = cutRoom

// CutFetchAnswer is cutFetchAnswer, for the tests: it returns the cut
// frame, how many partitions' records were dropped, and the error.
func CutFetchAnswer(rd io.Reader, head []byte, total int, version int16, most int, room CutRoom) (*wire.Buf, int, error) {
	buf, cut, err := cutFetchAnswer(rd, head, total, version, most, room)
	return buf, cut.dropped, err
}
