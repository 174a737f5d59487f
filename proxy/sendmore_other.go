//go:build !linux

package proxy

import "net"

// moreWriter has no MSG_MORE here: a frame's head goes in a write of its
// own.
type moreWriter struct{ nc net.Conn }

func newMoreWriter(nc net.Conn) *moreWriter { return &moreWriter{nc: nc} }

func (w *moreWriter) write(bufs [][]byte) error {
	b := net.Buffers(bufs)
	_, err := b.WriteTo(w.nc)
	return err
}
