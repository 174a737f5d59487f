//go:build !linux

package sockio

import (
	"errors"
	"net"
)

// MoreWriter has no MSG_MORE here: NewMoreWriter returns nil, and the
// caller writes a frame's head in a write of its own.
type MoreWriter struct{}

func NewMoreWriter(*net.TCPConn) *MoreWriter { return nil }

func (*MoreWriter) Write([][]byte) error { return errors.ErrUnsupported }
