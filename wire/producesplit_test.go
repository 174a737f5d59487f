package wire

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceLayout: on Produce bodies of every version, the layout finds
// the partitions ProduceScan finds, each span reads as that entry, the
// whole body is its pieces in order, a part of every entry is the body
// itself (no topic empty), and a cut body does not lay out.
func TestProduceLayout(t *testing.T) {
	maxV, _ := MaxVersion(produceKey)
	rng := rand.New(rand.NewSource(2))
	var l ProduceLayout
	for v := int16(3); v <= maxV; v++ {
		for i := range 100 {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks = v, -1
			for ti := range 1 + rng.Intn(4) {
				tp := kmsg.NewProduceRequestTopic()
				tp.Topic, tp.TopicID[0] = fmt.Sprintf("t%d", ti), byte(ti)
				for p := range rng.Intn(5) {
					e := kmsg.ProduceRequestTopicPartition{Partition: int32(p), Records: make([]byte, rng.Intn(50))}
					if Flexible(produceKey, v) && i%2 == 0 {
						e.UnknownTags.Set(4, []byte("x"))
						tp.UnknownTags.Set(1, nil)
					}
					tp.Partitions = append(tp.Partitions, e)
				}
				req.Topics = append(req.Topics, tp)
			}
			body := req.AppendTo(nil)
			if err := l.Scan(body, v); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			var s ProduceScan
			if err := s.Reset(body, v); err != nil {
				t.Fatal(err)
			}
			n := 0
			for p, ok := s.Next(); ok; p, ok = s.Next() {
				if n >= len(l.P) || l.P[n].Partition != p.Partition {
					t.Fatalf("v%d: partition %d: layout %+v, scan %d", v, n, l.P, p.Partition)
				}
				span := body[l.P[n].Start:l.P[n].End]
				if p.Records != nil && !bytes.Contains(span, p.Records) {
					t.Fatalf("v%d: partition %d's span does not hold its records", v, n)
				}
				n++
			}
			if n != len(l.P) || l.End != len(body) {
				t.Fatalf("v%d: %d partitions scanned, %d laid out; end %d of %d", v, n, len(l.P), l.End, len(body))
			}
			cut := body[:rng.Intn(len(body)-1)]
			empty := false
			for _, tl := range l.T {
				empty = empty || tl.N == 0
			}
			if empty {
				// A part leaves out a topic with none of its entries.
				continue
			}
			frame := append([]byte{0, 0, 0, 0}, body...)
			head := make([]byte, 0, l.HeadSize(4, len(body)))
			head, vec, at := l.Part(frame, 4, head, nil, nil, 0, func(int) int { return 0 })
			if len(at) != len(vec) {
				t.Fatalf("v%d: %d places for %d pieces", v, len(at), len(vec))
			}
			for i, piece := range vec {
				switch {
				case at[i] < 0 && len(piece) > 0 && !inside(head, piece):
					t.Fatalf("v%d: piece %d is said to be the head's and is not", v, i)
				case at[i] >= 0 && (at[i]+len(piece) > len(frame) || !aliases(frame[at[i]:], piece)):
					t.Fatalf("v%d: piece %d is not frame[%d:]", v, i, at[i])
				}
			}
			if got := bytes.Join(vec, nil); !bytes.Equal(got[4:], body) || int(uint32(got[0])<<24|uint32(got[1])<<16|uint32(got[2])<<8|uint32(got[3])) != len(body) {
				t.Fatalf("v%d: the part of every entry is not the body", v)
			}
			if cap(head) != l.HeadSize(4, len(body)) {
				t.Fatalf("v%d: the head outgrew HeadSize", v)
			}
			if l.Scan(cut, v) == nil {
				t.Fatalf("v%d: a body cut to %d of %d bytes laid out", v, len(cut), len(body))
			}
		}
	}
}

// aliases reports whether piece starts where b does, in b's memory.
func aliases(b, piece []byte) bool {
	return len(piece) <= len(b) && len(piece) > 0 && &b[0] == &piece[0]
}

// inside reports whether piece lies in b's memory.
func inside(b, piece []byte) bool {
	b = b[:cap(b)]
	for i := range b {
		if &b[i] == &piece[0] {
			return i+len(piece) <= len(b)
		}
	}
	return false
}
