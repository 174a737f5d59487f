//go:build !unix

package sockio

import (
	"errors"
	"net"
)

var errNoPeek = errors.New("cannot peek here")

// PeekClosed cannot look at a socket without reading it here; a close by
// the peer is noticed at the next read.
func PeekClosed(*net.TCPConn) bool { return false }

// Peeker cannot look at a socket without reading it here: NewPeeker
// returns nil and the caller always reads.
type Peeker struct{}

func NewPeeker(*net.TCPConn) *Peeker { return nil }

func (*Peeker) Peek([]byte) (int, error) { return 0, errNoPeek }
