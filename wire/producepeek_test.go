package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sliceSource is a PeekSource over a frame in memory that notes what it
// was asked to skip.
type sliceSource struct {
	frame   []byte
	at      int
	skipped [][2]int
}

func (s *sliceSource) Fill(dst []byte) error {
	if s.at+len(dst) > len(s.frame) {
		return fmt.Errorf("fill past the frame")
	}
	s.at += copy(dst, s.frame[s.at:])
	return nil
}

func (s *sliceSource) Skip(n int) error {
	if s.at+n > len(s.frame) {
		return fmt.Errorf("skip past the frame")
	}
	s.skipped = append(s.skipped, [2]int{s.at, s.at + n})
	s.at += n
	return nil
}

// TestPeekProduce: on Produce frames of every version, with record sets
// of every size, PeekProduce copies every byte but those of the record
// sets of skipFrom bytes or more, which it skips, each skip within one
// such record set and ending with it; it takes the whole frame from its
// source; and on frames cut short or with a length beyond the frame it
// fails, as the layout does.
func TestPeekProduce(t *testing.T) {
	maxV, _ := MaxVersion(produceKey)
	rng := rand.New(rand.NewSource(3))
	var l ProduceLayout
	const skipFrom = peekAhead + 36
	for v := int16(0); v <= maxV; v++ {
		for i := range 200 {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks = v, -1
			if v >= 3 && i%3 == 0 {
				id := "txn"
				req.TransactionID = &id
			}
			for ti := range rng.Intn(4) {
				tp := kmsg.NewProduceRequestTopic()
				tp.Topic, tp.TopicID[0] = fmt.Sprintf("topic-%d", ti), byte(ti)
				for p := range rng.Intn(5) {
					e := kmsg.ProduceRequestTopicPartition{Partition: int32(p), Records: make([]byte, rng.Intn(3*skipFrom))}
					rng.Read(e.Records)
					if i%7 == 0 {
						e.Records = nil
					}
					if Flexible(produceKey, v) && i%2 == 0 {
						e.UnknownTags.Set(4, []byte("x"))
						tp.UnknownTags.Set(1, nil)
					}
					tp.Partitions = append(tp.Partitions, e)
				}
				req.Topics = append(req.Topics, tp)
			}
			frame := produceFrame(v, req.AppendTo(nil))
			hdr, err := ParseRequestHeader(frame)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Scan(frame[hdr.Body:], v); err != nil {
				t.Fatalf("v%d: the layout: %v", v, err)
			}
			src := &sliceSource{frame: frame}
			got := bytes.Repeat([]byte{0xee}, len(frame))
			if err := PeekProduce(got, hdr.Body, v, skipFrom, src); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			if src.at != len(frame) {
				t.Fatalf("v%d: %d of %d bytes taken", v, src.at, len(frame))
			}
			holes := make([]bool, len(frame))
			for _, s := range src.skipped {
				inside := false
				for _, p := range l.P {
					start, end := hdr.Body+p.Start, hdr.Body+p.End
					if s[0] >= start && s[1] <= end && recordsEnd(frame[start:end], Flexible(produceKey, v)) == s[1]-start && s[1]-s[0] <= recordsLen(frame[start:end], Flexible(produceKey, v)) && recordsLen(frame[start:end], Flexible(produceKey, v)) >= skipFrom {
						inside = true
					}
				}
				if !inside {
					t.Fatalf("v%d: skipped %v, not the end of a large record set", v, s)
				}
				for k := s[0]; k < s[1]; k++ {
					holes[k] = true
				}
			}
			for k := range frame {
				if !holes[k] && got[k] != frame[k] {
					t.Fatalf("v%d: byte %d not copied", v, k)
				}
			}
			for _, p := range l.P {
				span := frame[hdr.Body+p.Start : hdr.Body+p.End]
				n := recordsLen(span, Flexible(produceKey, v))
				if n >= skipFrom && !holes[hdr.Body+p.Start+recordsEnd(span, Flexible(produceKey, v))-1] {
					t.Fatalf("v%d: a record set of %d bytes was copied", v, n)
				}
			}
			if len(frame) > hdr.Body+10 {
				cut := frame[:hdr.Body+rng.Intn(len(frame)-hdr.Body)]
				binary.BigEndian.PutUint32(cut, uint32(len(cut)-4))
				if l.Scan(cut[hdr.Body:], v) != nil && PeekProduce(make([]byte, len(cut)), hdr.Body, v, skipFrom, &sliceSource{frame: cut}) == nil {
					t.Fatalf("v%d: a frame cut to %d of %d bytes was peeked", v, len(cut), len(frame))
				}
			}
		}
	}
}

// recordsLen and recordsEnd read a partition entry span: its record set's
// length (-1: null), and where the set ends in the span.
func recordsLen(span []byte, flexible bool) int {
	n, _ := recordsAt(span, flexible)
	return n
}

func recordsEnd(span []byte, flexible bool) int {
	n, at := recordsAt(span, flexible)
	return at + max(n, 0)
}

func recordsAt(span []byte, flexible bool) (n, at int) {
	if flexible {
		v, k := binary.Uvarint(span[4:])
		return int(v) - 1, 4 + k
	}
	return int(int32(binary.BigEndian.Uint32(span[4:]))), 8
}

// produceFrame frames body as a Produce request of version v from client
// "peek".
func produceFrame(v int16, body []byte) []byte {
	f := []byte{0, 0, 0, 0, 0, produceKey, byte(v >> 8), byte(v), 0, 0, 0, 7, 0, 4, 'p', 'e', 'e', 'k'}
	if Flexible(produceKey, v) {
		f = append(f, 0)
	}
	f = append(f, body...)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// FuzzPeekProduce: for every body that kmsg reads as a Produce request,
// PeekProduce copies every byte but within the record sets kmsg finds,
// skipping only within sets of at least skipFrom bytes, and takes the
// whole frame; whatever kmsg reads is read the same from the copy.
func FuzzPeekProduce(f *testing.F) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "t"
	tp.Partitions = append(tp.Partitions, kmsg.ProduceRequestTopicPartition{Records: bytes.Repeat([]byte{1}, 20)})
	req.Topics = append(req.Topics, tp)
	f.Add(req.AppendTo(nil), int16(9), uint8(8))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int16(2), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, version int16, skip uint8) {
		v := versionIn(version, kmsg.NewPtrProduceRequest().MaxVersion())
		skipFrom := int(skip) + 1
		frame := produceFrame(v, body)
		hdr, err := ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		want := kmsg.NewPtrProduceRequest()
		want.Version = v
		if want.ReadFrom(frame[hdr.Body:]) != nil {
			return
		}
		// Where kmsg found each record set in the frame.
		var sets [][2]int
		base := &frame[0]
		for _, tp := range want.Topics {
			for _, p := range tp.Partitions {
				if len(p.Records) > 0 {
					off := int(uintptrOf(&p.Records[0]) - uintptrOf(base))
					sets = append(sets, [2]int{off, off + len(p.Records)})
				}
			}
		}
		src := &sliceSource{frame: frame}
		got := bytes.Repeat([]byte{0xee}, len(frame))
		if err := PeekProduce(got, hdr.Body, v, skipFrom, src); err != nil {
			t.Fatalf("v%d: kmsg reads the body, the peek: %v", v, err)
		}
		if src.at != len(frame) {
			t.Fatalf("v%d: %d of %d bytes taken", v, src.at, len(frame))
		}
		holes := make([]bool, len(frame))
		for _, s := range src.skipped {
			inside := false
			for _, set := range sets {
				inside = inside || s[0] >= set[0] && s[1] <= set[1] && set[1]-set[0] >= skipFrom
			}
			if !inside {
				t.Fatalf("v%d: skipped %v, in no record set of %d bytes or more (%v)", v, s, skipFrom, sets)
			}
			for k := s[0]; k < s[1]; k++ {
				holes[k] = true
			}
		}
		for k := range frame {
			if !holes[k] && got[k] != frame[k] {
				t.Fatalf("v%d: byte %d not copied", v, k)
			}
		}
	})
}

// uintptrOf is where b lies in memory.
func uintptrOf(b *byte) uintptr { return uintptr(unsafe.Pointer(b)) }
