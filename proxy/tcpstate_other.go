//go:build !linux

package proxy

import "net"

// peerReset cannot tell a reset socket here: a failed splice is taken for
// the upstream's failure, as the slower and safer guess.
func peerReset(net.Conn) bool { return false }

// peerGone cannot tell here: a paused reader notices its client's going
// when it reads again.
func peerGone(net.Conn) (reset, closed bool) { return false, false }

// sendQueue cannot read a socket's send queue here: known is false, and a
// client write is bounded as a whole.
func sendQueue(net.Conn) (acked uint64, waiting, known bool) { return 0, false, false }
