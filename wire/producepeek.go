package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
)

// PeekSource is a frame still in a socket, copied out piece by piece in
// order: Fill copies its next len(dst) bytes into dst, Skip passes its
// next n bytes without copying them. Neither takes the bytes from the
// socket.
type PeekSource interface {
	Fill(dst []byte) error
	Skip(n int) error
}

// peekAhead is how far past a field a fill reaches: the small fields of
// a partition entry come in one copy, not one per field.
const peekAhead = 64

// PeekProduce copies a Produce request frame of version, its body at
// body, from src into frame (which is as long as the frame), all but the
// record sets of at least skipFrom bytes, which it skips: frame's bytes
// there are not the frame's, every other byte is. It reads every field as
// ProduceLayout.Scan does; ErrCannotScan when they do not lay out. An
// error from src is returned as it is. Either way src is then at an
// unknown place in the frame, and the frame must be read.
func PeekProduce(frame []byte, body int, version int16, skipFrom int, src PeekSource) error {
	w := producePeek{frame: frame, src: src, pos: body, skipFrom: skipFrom, flexible: Flexible(produceKey, version)}
	w.walk(version)
	if w.err == nil && w.at < len(frame) {
		// What follows the fields, which kmsg ignores.
		w.fill(len(frame))
	}
	return w.err
}

// producePeek is PeekProduce's walk: frame[:at] is copied or skipped,
// and the next field starts at pos.
type producePeek struct {
	frame    []byte
	src      PeekSource
	at, pos  int
	skipFrom int
	flexible bool
	err      error
}

func (w *producePeek) walk(version int16) {
	w.skipFrom = max(w.skipFrom, 1)
	if version >= 3 {
		w.skipString() // transactional id
	}
	w.need(6) // acks, timeout
	w.pos += 6
	for topics := w.arrayLen(); topics > 0 && w.err == nil; topics-- {
		if version >= topicIDFrom {
			w.need(16)
			w.pos += 16
		} else {
			w.skipString()
		}
		for parts := w.arrayLen(); parts > 0 && w.err == nil; parts-- {
			w.need(4)
			w.pos += 4
			w.records()
			w.tags()
		}
		w.tags()
	}
	w.tags()
}

// fill copies the frame up to upto.
func (w *producePeek) fill(upto int) {
	if w.err != nil || upto <= w.at {
		return
	}
	if err := w.src.Fill(w.frame[w.at:upto]); err != nil {
		w.err = err
		return
	}
	w.at = upto
}

// need makes frame[pos:pos+n] the frame's.
func (w *producePeek) need(n int) bool {
	end := w.pos + n
	if w.err != nil || n < 0 || end > len(w.frame) {
		w.fail()
		return false
	}
	if end > w.at {
		w.fill(min(len(w.frame), end+peekAhead))
	}
	return w.err == nil
}

func (w *producePeek) fail() {
	if w.err == nil {
		w.err = ErrCannotScan
	}
}

func (w *producePeek) int16() int {
	if !w.need(2) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(w.frame[w.pos:]))
	w.pos += 2
	return int(v)
}

func (w *producePeek) int32() int {
	if !w.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(w.frame[w.pos:]))
	w.pos += 4
	return int(v)
}

// uvarint reads a uvarint as kbin does: 32 bits in at most 5 bytes.
func (w *producePeek) uvarint() uint32 {
	if !w.need(min(5, len(w.frame)-w.pos)) {
		return 0
	}
	v, n := kbin.Uvarint(w.frame[w.pos:min(w.pos+5, len(w.frame))])
	if n <= 0 {
		w.fail()
		return 0
	}
	w.pos += n
	return v
}

// length reads the length of a string or byte array as the body's
// version writes it: an int16 or int32, or a uvarint of length+1; below
// zero is null.
func (w *producePeek) length(wide bool) int {
	switch {
	case w.flexible:
		return int(w.uvarint()) - 1
	case wide:
		return w.int32()
	}
	return w.int16()
}

// arrayLen reads an array's length as kbin does: a compact one is
// length+1 taken as an int32, so that past 1<<31 it is below zero, and
// an array below zero has no entries.
func (w *producePeek) arrayLen() int {
	if w.flexible {
		return int(max(int32(w.uvarint())-1, 0))
	}
	return w.int32()
}

func (w *producePeek) skipString() {
	if n := w.length(false); n > 0 && w.need(n) {
		w.pos += n
	}
}

// records passes a partition's record set, skipped when it is large.
func (w *producePeek) records() {
	n := w.length(true)
	if n <= 0 || w.err != nil {
		return
	}
	end := w.pos + n
	if end > len(w.frame) {
		w.fail()
		return
	}
	if n < w.skipFrom {
		w.need(n)
		w.pos = end
		return
	}
	if end > w.at {
		if err := w.src.Skip(end - w.at); err != nil {
			w.err = err
			return
		}
		w.at = end
	}
	w.pos = end
}

func (w *producePeek) tags() {
	if !w.flexible {
		return
	}
	for n := w.uvarint(); n > 0 && w.err == nil; n-- {
		w.uvarint()
		if size := int(w.uvarint()); w.need(size) {
			w.pos += size
		}
	}
}
