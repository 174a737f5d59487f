//go:build !linux

package sockio

import "io"

// PeekAll cannot tell here whether the socket can hold buf's bytes at
// once: it fails with ErrNoRoom, and the caller reads instead.
func (p *Peeker) PeekAll(buf []byte) error { return ErrNoRoom }

// CanDiscard says whether Discard drops bytes here.
const CanDiscard = false

// Discard cannot drop bytes unread here; no peek ever leaves any to drop.
func (p *Peeker) Discard(n int) (int, error) { return 0, io.ErrUnexpectedEOF }

// PeekOffset cannot be had here: PeekFrom fails with ErrNoOffset.
type PeekOffset struct{}

func (p *Peeker) PeekFrom(n int) (*PeekOffset, error) { return nil, ErrNoOffset }
func (o *PeekOffset) Fill(dst []byte) error           { return ErrNoRoom }
func (o *PeekOffset) Skip(n int) error                { return ErrNoRoom }
func (o *PeekOffset) Close()                          {}
