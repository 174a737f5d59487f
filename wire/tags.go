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
// Fillers take tag numbers no Kafka message defines, which are numbered
// from 0 up: the largest a varint of two bytes holds, or of three where
// two cannot make the length exact.
var fillerTags = [...]uint32{1<<14 - 1, 1<<21 - 1}

// PadTags returns section, a tag section as kmsg encodes it (the count of
// tags first), grown to exactly n bytes by one filler field; section
// itself if it has n bytes already. It reports false when no filler makes
// it exactly n bytes: it is longer, or one or two bytes shorter (the
// smallest filler takes three).
func PadTags(section []byte, n int) ([]byte, bool) {
	if len(section) == n {
		return section, true
	}
	count, w := kbin.Uvarint(section)
	if w <= 0 || len(section) > n {
		return nil, false
	}
	// The count grows by one, and may take another byte.
	room := n - len(section) - (kbin.UvarintLen(count+1) - w)
	for _, tag := range fillerTags {
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

// FillerTags returns a tag section of exactly n bytes that holds no field
// but a filler (none at one byte), or false if n is 0, 2 or 3.
func FillerTags(n int) ([]byte, bool) {
	return PadTags([]byte{0}, n)
}
