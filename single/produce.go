package single

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// A Produce split over brokers is written as slices of the client's own
// frame: each part's frame is a small head of its own (the header, the
// fields before the topics, the counts and topic names) between the
// client's partition entries, so the records are never copied. The plan
// (which entry goes where, the answers merged) is still made from the
// decoded request; the frame is laid out by wire.ProduceLayout, and each
// part's entries are found in it by matching the part's entries, in
// order, with the client's. Whatever does not lay out or match is
// encoded as any other part is (encodePart).

// vecFrame is a part's frame made before it is sent (a Produce part's,
// or a long poll's): vec joined, vec[0] starting it
// (its correlation id is set there). head holds the bytes of vec that
// are not the client's; the zero value is no vector.
type vecFrame struct {
	head *wire.Buf
	vec  [][]byte
	at   []int // where each piece of vec lies in the client's frame; -1: in head
}

// put returns v's head to the pool once v is written or dropped.
func (v vecFrame) put() {
	wire.Put(v.head)
}

// vecFrametors returns the frame of each part of plan as a vector of
// r's frame, or nil when r's body does not lay out as its decoded value
// says, or the parts do not match it. r's frame must outlive the vectors
// until they are written. Flusher only.
func (s *Conn) vecFrametors(r Request, req kmsg.Request, parts []splitmerge.Part) []vecFrame {
	pr, ok := req.(*kmsg.ProduceRequest)
	hdr, frame := r.Header(), r.Frame()
	if !ok || frame == nil || len(parts) == 0 {
		return nil
	}
	l := &s.layout
	body := frame.B[hdr.Body:]
	if l.Scan(body, hdr.Version) != nil || len(l.T) != len(pr.Topics) {
		return nil
	}
	of, ok := placeEntries(s.of[:0], l, pr, parts)
	s.of = of
	if !ok {
		return nil
	}
	out := make([]vecFrame, len(parts))
	size := l.HeadSize(hdr.Body, len(body))
	placed := func(i int) int { return of[i] }
	for k := range parts {
		h := wire.Get(size)
		h.B, out[k].vec, out[k].at = l.Part(frame.B, hdr.Body, h.B[:0], make([][]byte, 0, 4), nil, k, placed)
		out[k].head = h
	}
	return out
}

// placeEntries appends to of, for each partition entry of pr in order,
// the part it went to (-1: none, the proxy answers it), and reports
// whether every part's entries are, in order, the client's: the same
// topic, partition and records, each topic entry of a part one topic of
// the client's, as the split makes them.
func placeEntries(of []int, l *wire.ProduceLayout, pr *kmsg.ProduceRequest, parts []splitmerge.Part) ([]int, bool) {
	type cursor struct {
		req      *kmsg.ProduceRequest
		t, p     int
		clientAt int // the client topic of its topic entry t
	}
	var small [8]cursor
	cur := small[:0]
	for _, part := range parts {
		q, ok := part.Request.(*kmsg.ProduceRequest)
		if !ok {
			return of, false
		}
		cur = append(cur, cursor{req: q, clientAt: -1})
	}
	for ti := range pr.Topics {
		ct := &pr.Topics[ti]
		lt := &l.T[ti]
		if len(ct.Partitions) != lt.N {
			return of, false
		}
		for pj := range ct.Partitions {
			e := &ct.Partitions[pj]
			if e.Partition != l.P[lt.First+pj].Partition {
				return of, false
			}
			k := -1
			for i := range cur {
				c := &cur[i]
				if c.t >= len(c.req.Topics) {
					continue
				}
				pt := &c.req.Topics[c.t]
				if c.p >= len(pt.Partitions) || !sameEntry(pt, &pt.Partitions[c.p], ct, e) {
					continue
				}
				if c.p == 0 && c.clientAt == ti || c.p > 0 && c.clientAt != ti {
					return of, false
				}
				c.clientAt = ti
				if c.p++; c.p == len(pt.Partitions) {
					c.t, c.p = c.t+1, 0
				}
				k = i
				break
			}
			of = append(of, k)
		}
	}
	for _, c := range cur {
		if c.t != len(c.req.Topics) {
			return of, false
		}
	}
	return of, true
}

// sameEntry reports whether a part's entry p of topic t is the client's
// entry e of topic ct: the split copies entries, so their records are
// the same bytes.
func sameEntry(t *kmsg.ProduceRequestTopic, p *kmsg.ProduceRequestTopicPartition, ct *kmsg.ProduceRequestTopic, e *kmsg.ProduceRequestTopicPartition) bool {
	if t.Topic != ct.Topic || t.TopicID != ct.TopicID || p.Partition != e.Partition ||
		len(p.Records) != len(e.Records) || (p.Records == nil) != (e.Records == nil) {
		return false
	}
	return len(p.Records) == 0 || &p.Records[0] == &e.Records[0]
}

// sendVec sends a Produce part as its vector v (which it owns) on u, or
// has it wait for u's dial, as sendPart does.
func (u *upstream) sendVec(st *Split, req kmsg.Request, v vecFrame, ref *partRef) error {
	if u.queueIfDialing(queuedPart{st: st, req: req, ref: ref, vec: v}) {
		return nil
	}
	err := u.sendv(v.vec[:1], v.vec, []*partRef{ref})
	v.put()
	return err
}

// writeVector writes bufs to nc: at once where the socket takes a
// vector, else (TLS) joined first when vector says they are pieces of
// frames, so that each frame goes in as few records as when encoded.
func writeVector(nc net.Conn, bufs net.Buffers, vector bool) error {
	if _, ok := nc.(*net.TCPConn); ok || !vector {
		_, err := bufs.WriteTo(nc)
		return err
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	j := wire.Get(n)
	j.B = j.B[:0]
	for _, b := range bufs {
		j.B = append(j.B, b...)
	}
	_, err := nc.Write(j.B)
	wire.Put(j)
	return err
}
