//go:build !linux

package sockio

import "net"

// PeerGone cannot tell here: a caller takes a failed splice for the other
// side's failure, and notices a peer's going when it reads again.
func PeerGone(*net.TCPConn) (reset, closed bool) { return false, false }

// SendQueue cannot read a socket's send queue here: known is false, and a
// caller bounds a write as a whole.
func SendQueue(*net.TCPConn) (acked uint64, waiting, known bool) { return 0, false, false }
