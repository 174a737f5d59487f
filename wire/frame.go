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
	// ErrNotKafka: the length prefix is the start of another protocol,
	// an HTTP message or a TLS record; the error that matches it is a
	// *NotKafkaError saying which (stranger.go).
	ErrNotKafka = errors.New("not Kafka")
)

const (
	// MinRequestFrame is the smallest request after the length prefix:
	// api key, version, correlation id and a null client id.
	MinRequestFrame = 2 + 2 + 4 + 2
	// MinResponseFrame is the smallest response after the length prefix:
	// the correlation id.
	MinResponseFrame = 4
)

// Account is charged for the memory of frame buffers as they grow, so that
// a process-wide bound sees every byte before it is allocated.
type Account interface {
	// Reserve is called before n more bytes are allocated. It may block
	// until memory is available; an error aborts the read.
	Reserve(n int) error
	// Release returns n bytes reserved earlier.
	Release(n int)
}

// Frame buffers start at FirstChunk bytes (or the frame's size if smaller)
// and grow by a factor as bytes arrive, never beyond the declared size: a
// length prefix alone allocates nothing large, and a peer holds at most
// twice that factor times what it has sent (the last step takes the whole
// frame once it is within twice a step, so no step ends just short of it). Every growth copies what has arrived,
// so the factor trades memory a silent peer can claim against copies:
// GrowFactor (8) suits peers that may be hostile and numerous (clients);
// TrustedGrowFactor (256) reads a 1 MiB frame with one copy of its first
// 4 KiB, and suits a peer that answers only what the proxy asked (the
// upstream).
const (
	FirstChunk        = 4 << 10
	GrowFactor        = 8
	TrustedGrowFactor = 256
)

// ReadFrame reads one frame from r: the length prefix into lenBuf, checked
// against [min, max] before allocating, then the message into a buffer that
// grows as it arrives. The returned buffer holds the prefix and the
// message. A clean EOF before the first byte returns io.EOF; an EOF later
// returns ErrTruncated.
func ReadFrame(r io.Reader, lenBuf *[4]byte, min, max int32) (*Buf, error) {
	return ReadFrameAccount(r, lenBuf, min, max, nil)
}

// ReadFrameAccount is ReadFrame charging acct (if not nil) for the buffer:
// on success cap(b.B) bytes stay reserved for the caller to release when
// it puts the buffer back; on error nothing stays reserved.
func ReadFrameAccount(r io.Reader, lenBuf *[4]byte, min, max int32, acct Account) (*Buf, error) {
	size, err := ReadLength(r, lenBuf, min, max)
	if err != nil {
		return nil, err
	}
	b, err := Start(lenBuf[:], 4+int(size), acct)
	if err != nil {
		return nil, err
	}
	return Grow(r, b, 4+int(size), acct, GrowFactor)
}

// Start returns a buffer holding head, the first bytes of a frame of total
// bytes, with room for the first chunk of what follows, charged to acct.
func Start(head []byte, total int, acct Account) (*Buf, error) {
	n := max(min(total, FirstChunk), len(head))
	if err := reserve(acct, Cap(n)); err != nil {
		return nil, err
	}
	b := Get(n)
	b.B = b.B[:copy(b.B, head)]
	return b, nil
}

// Queued is a reader that knows how many bytes it can return now without
// waiting: those it holds and those its socket has received.
type Queued interface {
	Queued() int
}

// Grow reads from r into b, whose B holds the first bytes of a frame, until
// it holds total bytes, moving to a larger buffer (factor times, or the
// whole frame when that is at most twice as much) each time the current
// one fills; a reader that is Queued has the buffer grow at once to hold
// what has arrived, or the whole frame when that is at most twice factor
// times what has. acct, if not nil, has been
// charged cap(b.B) and is charged for every larger buffer before it is
// allocated. On error b is put back and its charge released.
func Grow(r io.Reader, b *Buf, total int, acct Account, factor int) (*Buf, error) {
	filled := len(b.B)
	b.B = b.B[:min(cap(b.B), total)]
	for filled < total {
		if filled == len(b.B) {
			n := factor * len(b.B)
			if q, ok := r.(Queued); ok {
				// What has arrived is what the peer has sent: the
				// buffer takes it all at once, or the whole frame
				// when that is within the bound on what was sent,
				// rather than a step at a time, each a read and a
				// copy of what came before.
				sent := filled + q.Queued()
				if Cap(total) <= 2*factor*sent {
					n = total
				}
				n = max(n, min(sent, total))
			}
			if n >= total/2 {
				// One more step would copy nearly the whole
				// frame; take it all now.
				n = total
			}
			if err := reserve(acct, Cap(n)); err != nil {
				release(acct, b)
				return nil, err
			}
			nb := Get(n)
			nb.B = nb.B[:min(cap(nb.B), total)]
			copy(nb.B, b.B[:filled])
			release(acct, b)
			b = nb
		}
		k, err := r.Read(b.B[filled:])
		filled += k
		if err != nil && filled < total {
			release(acct, b)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, ErrTruncated
			}
			return nil, err
		}
	}
	return b, nil
}

func reserve(acct Account, n int) error {
	if acct == nil {
		return nil
	}
	return acct.Reserve(n)
}

// release puts b back and returns its charge.
func release(acct Account, b *Buf) {
	if acct != nil {
		acct.Release(cap(b.B))
	}
	Put(b)
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
	return CheckLength(lenBuf, min, max)
}

// CheckLength reads the length prefix in lenBuf and checks it against
// [min, max]. A prefix above max that is the start of another protocol
// (Sniff) is a *NotKafkaError, not ErrFrameTooLarge: what it needs is
// another port or another client setting, not a larger limit.
func CheckLength(lenBuf *[4]byte, min, max int32) (int32, error) {
	size := int32(binary.BigEndian.Uint32(lenBuf[:]))
	if size < 0 || size > max {
		if e := Sniff(*lenBuf); e != nil {
			return 0, e
		}
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
