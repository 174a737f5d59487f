package audit

import (
	"slices"
	"time"
)

// summary is one connection's data path over one interval: per API key
// and resource the requests, and per partition the records, bytes, first
// and last offsets and last committed offset. Its entries (resources and
// partitions) are bounded; partitions beyond the bound are counted in
// omitted, so a client touching many partitions costs its connection a
// fixed amount of memory.
type summary struct {
	since     time.Time
	resources []*sumResource
	index     map[sumKey]*sumResource
	entries   int
	omitted   int64
}

type sumKey struct {
	api       int16
	typ, name string
	operation string
}

type sumResource struct {
	Resource
	parts map[int32]int // index in Partitions
}

// add merges r's resources into s, within limit entries.
func (s *summary) add(r *Request, limit int) {
	if s.index == nil {
		s.index = map[sumKey]*sumResource{}
	}
	s.omitted += r.PartitionsOmitted
	for i := range r.Resources {
		in := &r.Resources[i]
		k := sumKey{r.APIKey, in.Type, in.Name, in.Operation}
		sr := s.index[k]
		if sr == nil {
			if s.entries >= limit {
				s.omitted += int64(max(1, len(in.Partitions)))
				continue
			}
			// The key's strings come from the request, whose memory the
			// proxy reuses: copy them.
			k.typ, k.name, k.operation = clone(k.typ), clone(k.name), clone(k.operation)
			sr = &sumResource{Resource: Resource{Type: k.typ, Name: k.name, Operation: k.operation, APIKey: r.APIKey}, parts: map[int32]int{}}
			s.index[k] = sr
			s.resources = append(s.resources, sr)
			s.entries++
		}
		sr.Requests++
		if sr.ErrorCode == 0 {
			sr.ErrorCode = in.ErrorCode
		}
		for j := range in.Partitions {
			p := &in.Partitions[j]
			at, ok := sr.parts[p.Partition]
			if !ok {
				if s.entries >= limit {
					s.omitted++
					continue
				}
				s.entries++
				at = len(sr.Partitions)
				sr.parts[p.Partition] = at
				sr.Partitions = append(sr.Partitions, Partition{Partition: p.Partition, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: NoOffset, FetchOffset: NoOffset})
			}
			merge(&sr.Partitions[at], p)
		}
	}
}

func clone(s string) string { return string([]byte(s)) }

// merge adds one request's report of a partition to the summary's: the
// lowest first offset, the highest last, the latest commit, the sums, and
// the first error.
func merge(into, p *Partition) {
	if p.FirstOffset != NoOffset && (into.FirstOffset == NoOffset || p.FirstOffset < into.FirstOffset) {
		into.FirstOffset = p.FirstOffset
	}
	if p.LastOffset != NoOffset && p.LastOffset > into.LastOffset {
		into.LastOffset = p.LastOffset
	}
	if p.Committed != NoOffset {
		into.Committed = p.Committed
	}
	into.Records += p.Records
	into.Bytes += p.Bytes
	if into.ErrorCode == 0 {
		into.ErrorCode = p.ErrorCode
	}
}

// event returns the summary's resources in the order first seen, their
// partitions by number.
func (s *summary) event() []Resource {
	out := make([]Resource, len(s.resources))
	for i, sr := range s.resources {
		out[i] = sr.Resource
		slices.SortFunc(out[i].Partitions, func(a, b Partition) int { return int(a.Partition) - int(b.Partition) })
	}
	return out
}

// reset starts the next interval at now.
func (s *summary) reset(now time.Time) {
	*s = summary{since: now}
}
