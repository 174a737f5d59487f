//go:build !unix

package sockio

import (
	"errors"
	"net"
)

// Reader has no non-blocking read here: NewReader returns nil, and the
// caller reads the connection directly.
type Reader struct{}

func NewReader(*net.TCPConn) *Reader { return nil }

func (*Reader) Fill(Lender) (int, error) { return 0, errors.ErrUnsupported }

func (*Reader) Queued() int { return 0 }
