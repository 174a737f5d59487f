//go:build !linux

package proxy

import "net"

// sendQueue cannot read a socket's send queue here: known is false, and a
// client write is bounded as a whole.
func sendQueue(net.Conn) (acked uint64, waiting, known bool) { return 0, false, false }
