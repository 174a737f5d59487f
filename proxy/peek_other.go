//go:build !unix

package proxy

import (
	"errors"
	"net"
)

var errNoPeek = errors.New("cannot peek here")

// peekClosed cannot look at a socket without reading it here; a close by
// the upstream is then noticed at the next request.
func peekClosed(net.Conn) bool { return false }

// peeker cannot look at a socket without reading it here: newPeeker
// returns nil and the caller always reads.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) peek([]byte) (int, error) { return 0, errNoPeek }
