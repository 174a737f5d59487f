//go:build !unix

package proxy

import "net"

// peekClosed cannot look at a socket without reading it here; a close by
// the upstream is then noticed at the next request.
func peekClosed(net.Conn) bool { return false }

// peeker cannot look at a socket without reading it here: newPeeker
// returns nil and the caller always reads.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) peek([]byte) int { return 0 }
