//go:build !linux

package sockio

import (
	"errors"
	"net"
)

// Splicer cannot be had here: NewSplicer fails, and the caller copies.
type Splicer struct{}

var errNoSplice = errors.New("sockio: no splice here")

// ErrSpliceClosed: the Splicer was closed.
var ErrSpliceClosed = errNoSplice

func NewSplicer() (*Splicer, error) { return nil, errNoSplice }
func (s *Splicer) Close()           {}
func (s *Splicer) Move(dst, src *net.TCPConn, n int) (taken int, readErr, writeErr error) {
	return 0, nil, errNoSplice
}
