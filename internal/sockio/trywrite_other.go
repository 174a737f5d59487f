//go:build !linux

package sockio

import "net"

// TryWriter is not made here: NewTryWriter returns nil, and the caller
// leaves the write to a goroutine that may wait.
type TryWriter struct{}

func NewTryWriter(*net.TCPConn) *TryWriter { return nil }

func (*TryWriter) Write(bufs [][]byte) ([][]byte, error) { return bufs, nil }
