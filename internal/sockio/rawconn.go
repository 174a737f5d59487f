// Package sockio is what the proxy does to TCP sockets beyond package net:
// a peek at the bytes queued on a socket without taking them (a whole
// frame, or one walked with a peek offset that passes bytes uncopied),
// bytes dropped unread, a splice that says which socket failed, a pipe
// that holds a socket's bytes until they are spliced on or read back, the
// kernel's TCP state of a socket (reset, half-closed, bytes acknowledged),
// writes with MSG_MORE, a write of what a socket takes at once without
// waiting, and a read that gives its buffer back before it waits, with how
// many bytes the socket holds (SIOCINQ).
//
// Each takes the *net.TCPConn to act on, nil when there is none (TLS
// over it, a pipe in tests), and plain byte slices; it knows nothing of
// the connections, requests or memory of the proxy that calls it. Where the
// platform cannot do a thing, the constructor returns nil or the query
// says it cannot tell, and the caller falls back to package net (the
// _other files).
//
// The calls made per request allocate nothing: each type binds its
// callback for the raw socket once, when it is made. Those made per
// large frame (PeekAll, PeekFrom and its PeekOffset, Splicer.Move,
// Pipe.From and To), each moving at least 16 KiB, allocate a few small
// objects.
package sockio

import (
	"net"
	"syscall"
)

// rawConn returns tc's raw socket for the system calls the net package
// does not make, or nil when tc is nil or closed.
func rawConn(tc *net.TCPConn) syscall.RawConn {
	if tc == nil {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
