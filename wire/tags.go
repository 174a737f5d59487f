package wire

import (
	"github.com/twmb/franz-go/pkg/kbin"
)

// A streamed response's length prefix has gone to the client before its
// tag section is read, so a rewritten tag section must keep the length it
// arrived with. PadTags grows one to that length with a filler: an unknown
// tagged field, which every client skips by its size (kmsg keeps it as an
// unknown tag, the Java client's generated readers as a raw tagged field,
// librdkafka's skips it; none of them checks the order of tags).
//
// Tagged fields are written in increasing tag order (KIP-482), so a filler
// takes a tag above every tag of the section it pads. Fillers take tag
// numbers no Kafka message defines, which are numbered from 0 up: the
// largest a varint of two bytes holds, else of three, four or five where
// the section already holds a tag that high, or where a shorter one cannot
// make the length exact. The largest stays below 1<<31, since the Java
// client reads a tag into a signed int.
var fillerTags = [...]uint32{1<<14 - 1, 1<<21 - 1, 1<<28 - 1, 1<<31 - 1}

// PadTags returns section, a tag section as kmsg encodes it (the count of
// tags first, then the fields in increasing tag order), grown to exactly n
// bytes by one filler field after the others; section itself if it has n
// bytes already. It reports false when no filler makes it exactly n bytes:
// it is longer, or one or two bytes shorter (the smallest filler takes
// three), or no filler tag above its highest tag fits, or it does not
// read as a tag section.
func PadTags(section []byte, n int) ([]byte, bool) {
	if len(section) == n {
		return section, true
	}
	count, w, highest, ok := tagSection(section)
	if !ok || len(section) > n {
		return nil, false
	}
	// The count grows by one, and may take another byte.
	room := n - len(section) - (kbin.UvarintLen(count+1) - w)
	for _, tag := range fillerTags {
		if count > 0 && tag <= highest {
			continue
		}
		left := room - kbin.UvarintLen(tag)
		for sizeLen := 1; sizeLen <= 5; sizeLen++ {
			size := left - sizeLen
			if size < 0 || kbin.UvarintLen(uint32(size)) != sizeLen {
				continue
			}
			out := make([]byte, 0, n)
			out = kbin.AppendUvarint(out, count+1)
			out = append(out, section[w:]...)
			out = kbin.AppendUvarint(out, tag)
			out = kbin.AppendUvarint(out, uint32(size))
			out = append(out, make([]byte, size)...)
			return out, true
		}
	}
	return nil, false
}

// tagSection reads a tag section: its count of fields, the bytes the count
// takes, and the highest tag it holds (0 with none). It reports false if
// the section does not hold count fields exactly.
func tagSection(section []byte) (count uint32, w int, highest uint32, ok bool) {
	count, w = kbin.Uvarint(section)
	if w <= 0 {
		return 0, 0, 0, false
	}
	rest := section[w:]
	for range count {
		tag, tw := kbin.Uvarint(rest)
		if tw <= 0 {
			return 0, 0, 0, false
		}
		size, sw := kbin.Uvarint(rest[tw:])
		if sw <= 0 || uint64(size) > uint64(len(rest)-tw-sw) {
			return 0, 0, 0, false
		}
		highest = max(highest, tag)
		rest = rest[tw+sw+int(size):]
	}
	return count, w, highest, len(rest) == 0
}

// FillerTags returns a tag section of exactly n bytes that holds no field
// but a filler (none at one byte), or false if n is 0, 2 or 3.
func FillerTags(n int) ([]byte, bool) {
	return PadTags([]byte{0}, n)
}
