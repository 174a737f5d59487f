//go:build !unix

package proxy

import "net"

// newRawReader has no non-blocking read here: the client is read directly.
func newRawReader(net.Conn) rawReader { return nil }
