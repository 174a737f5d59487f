package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Errors for frames that cannot be read. Each closes the one connection.
var (
	// ErrFrameTooLarge: the length prefix exceeds the configured limit.
	ErrFrameTooLarge = errors.New("frame length above the limit")
	// ErrFrameTooSmall: the length prefix is below the smallest header.
	ErrFrameTooSmall = errors.New("frame length below the minimum")
	// ErrTruncated: the peer closed the connection inside a frame.
	ErrTruncated = errors.New("connection closed inside a frame")
)

const (
	// MinRequestFrame is the smallest request after the length prefix:
	// api key, version, correlation id and a null client id.
	MinRequestFrame = 2 + 2 + 4 + 2
	// MinResponseFrame is the smallest response after the length prefix:
	// the correlation id.
	MinResponseFrame = 4
)

// ReadFrame reads one frame from r: the length prefix into lenBuf, checked
// against [min, max] before allocating, then the message. The returned
// buffer holds the prefix and the message. A clean EOF before the first
// byte returns io.EOF; an EOF later returns ErrTruncated.
func ReadFrame(r io.Reader, lenBuf *[4]byte, min, max int32) (*Buf, error) {
	size, err := ReadLength(r, lenBuf, min, max)
	if err != nil {
		return nil, err
	}
	b := Get(4 + int(size))
	copy(b.B, lenBuf[:])
	if err := ReadBody(r, b.B[4:]); err != nil {
		Put(b)
		return nil, err
	}
	return b, nil
}

// ReadLength reads a length prefix into lenBuf and checks it against
// [min, max]. A clean EOF returns io.EOF; an EOF inside the prefix returns
// ErrTruncated.
func ReadLength(r io.Reader, lenBuf *[4]byte, min, max int32) (int32, error) {
	if n, err := io.ReadFull(r, lenBuf[:]); err != nil {
		if err == io.ErrUnexpectedEOF || (err == io.EOF && n > 0) {
			return 0, ErrTruncated
		}
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(lenBuf[:]))
	if size < 0 || size > max {
		return 0, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, uint32(size), max)
	}
	if size < min {
		return 0, fmt.Errorf("%w: %d < %d", ErrFrameTooSmall, size, min)
	}
	return size, nil
}

// ReadBody fills b from r; an EOF before b is full returns ErrTruncated.
func ReadBody(r io.Reader, b []byte) error {
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return ErrTruncated
		}
		return err
	}
	return nil
}

// SetLength writes the length prefix of frame from its size.
func SetLength(frame []byte) {
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
}
