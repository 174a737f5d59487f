package splitmerge

import "github.com/twmb/franz-go/pkg/kmsg"

// shape describes a request keyed by topic and partition (T topics of P
// entries) and its response (RT topics of RP entries), so that one split
// and one merge serve every such key.
type shape[T, P, RT, RP any] struct {
	topic func(*T) (string, [16]byte)
	parts func(*T) *[]P
	num   func(*P) int32
	shell func(*T) T // the topic with no entries

	rTopic func(*RT) (string, [16]byte)
	rParts func(*RT) *[]RP
	rNum   func(*RP) int32
	rShell func(*T) RT // the response topic for a client topic, no entries

	errEntry func(num int32, code int16) RP

	// rTopics reads the topics of a part's response.
	rTopics func(kmsg.Response) []RT
	// fix adjusts an entry taken from a part's response, and reports
	// whether it named a new leader (KIP-951); nil leaves entries as
	// they are.
	fix func(e *RP, self Self) (moved bool)
	// respond builds the merged response from its topics.
	respond func(version int16, throttle int32, topics []RT, moved bool, self Self) kmsg.Response
}

// splitByLeader makes p the plan of a request of shape s: topics split
// by leader, each part built by part from its topics, and a merge that
// answers every entry in the client's order.
func splitByLeader[T, P, RT, RP any](p *Plan, s *shape[T, P, RT, RP], v View, version int16, topics []T, byID bool, part func([]T) kmsg.Request) {
	rt := new(router)
	for k, ts := range s.split(rt, v, topics, byID) {
		p.addPart(rt.nodes[k], part(ts))
	}
	p.Stale = rt.stale
	p.merge = func(results []Result, self Self) (kmsg.Response, error) {
		moved := false
		var fix func(*RP)
		if s.fix != nil {
			fix = func(e *RP) {
				if s.fix(e, self) {
					moved = true
				}
			}
		}
		merged := s.merge(rt, topics, byID, results, notLeader, fix)
		return s.respond(version, maxThrottle(results), merged, moved, self), nil
	}
}

// split places every entry of topics by its leader and returns the
// topics of each part, in part order; entries are copied by value, so
// their byte fields stay aliased.
func (s *shape[T, P, RT, RP]) split(rt *router, v View, topics []T, byID bool) [][]T {
	var out [][]T
	for i := range topics {
		t := &topics[i]
		name, id := s.topic(t)
		ps := *s.parts(t)
		for j := range ps {
			node := v.Leader(name, id, s.num(&ps[j]))
			k, newTopic, newPart, ok := rt.place(node, i, byID)
			if !ok {
				continue
			}
			if newPart {
				out = append(out, nil)
			}
			if newTopic {
				out[k] = append(out[k], s.shell(t))
			}
			last := &out[k][len(out[k])-1]
			dst := s.parts(last)
			*dst = append(*dst, ps[j])
			rt.at(len(out[k])-1, len(*dst)-1)
		}
	}
	return out
}

// merge answers every entry of the client's topics, in their order, from
// the parts' responses, with
// code for entries the proxy answered and failed for those whose part
// failed or left them out. fix adjusts each entry taken from a response.
func (s *shape[T, P, RT, RP]) merge(rt *router, topics []T, byID bool, results []Result, failed int16, fix func(*RP)) []RT {
	idx := make([]*index[RT, RP], len(results))
	out := make([]RT, 0, len(topics))
	n := 0
	for i := range topics {
		t := &topics[i]
		name, id := s.topic(t)
		ps := *s.parts(t)
		ot := s.rShell(t)
		dst := s.rParts(&ot)
		*dst = make([]RP, 0, len(ps))
		for j := range ps {
			sp := rt.spots[n]
			n++
			num := s.num(&ps[j])
			switch {
			case sp.part < 0:
				*dst = append(*dst, s.errEntry(num, sp.code))
				continue
			case results[sp.part].Err != nil:
				*dst = append(*dst, s.errEntry(num, failed))
				continue
			}
			x := idx[sp.part]
			if x == nil {
				x = newIndex(s.rTopics(results[sp.part].Response), byID, s.rParts0, s.rTopic, s.rNum)
				idx[sp.part] = x
			}
			got := x.take(clientKey(name, id, num, byID), pos{sp.topic, sp.idx})
			if got == nil {
				*dst = append(*dst, s.errEntry(num, failed))
				continue
			}
			// Fixed where it lands: a copy handed to fix would
			// escape, one allocation per entry.
			*dst = append(*dst, *got)
			if fix != nil {
				fix(&(*dst)[len(*dst)-1])
			}
		}
		out = append(out, ot)
	}
	return out
}

// answerAll answers every entry of topics with code, in their order.
func (s *shape[T, P, RT, RP]) answerAll(topics []T, code int16) []RT {
	out := make([]RT, 0, len(topics))
	for i := range topics {
		t := &topics[i]
		ps := *s.parts(t)
		ot := s.rShell(t)
		dst := s.rParts(&ot)
		for j := range ps {
			*dst = append(*dst, s.errEntry(s.num(&ps[j]), code))
		}
		out = append(out, ot)
	}
	return out
}

func (s *shape[T, P, RT, RP]) rParts0(t *RT) []RP { return *s.rParts(t) }
