package capture

import (
	"slices"

	"github.com/inorder-proxy/inorder/audit"
)

// An answer names its partitions in the request's order nearly always, so
// each is looked for where the last one was found. An answer may also name
// partitions the request did not list (an incremental fetch session's), or
// list them in another order; past searchParts partitions (or topics, to
// group them) such a miss asks a map instead of searching them all, so
// that an answer of n partitions costs O(n) whatever its order, not
// O(n²).
const searchParts = 16

// maxEventParts bounds the partitions an event holds, those its request
// lists and those its answer adds (that the request did not list, or that
// went upstream unread): beyond it they are counted in the event's
// PartitionsOmitted, so that a request or an answer naming millions of
// partitions costs its connection bounded memory. An event
// this large is over the trail's size for one event already (about 9,000
// partitions), which then keeps its resources but none of their
// partitions.
const maxEventParts = 10_000

type partKey struct {
	topic     string
	partition int32
}

// partIndex finds a Req's partitions by topic and partition: in a Fetch's
// fetch, the index of each (indexed as the search first needs them); in
// a Produce's resources, the resource and partition, packed (resKey). Its
// zero value is empty.
type partIndex struct {
	m     map[partKey]int64
	n     int  // Fetch: fetch[:n] are in m
	built bool // Produce: m holds every partition of the resources,
	// res every resource by name
	res map[string]int32
}

// reset empties x for the next request, keeping a small map's room.
func (x *partIndex) reset() {
	if len(x.m) > keepParts || len(x.res) > keepParts {
		x.m, x.res = nil, nil
	}
	clear(x.m)
	clear(x.res)
	x.n, x.built = 0, false
}

// find returns the index in ar.fetch of topic's partition, looking at at
// first, then at every entry where they are few, else in the index; -1 if
// the request did not list it. Of a topic and partition listed twice, the
// entry at at is found, else the first.
func (ar *Req) find(at int, topic string, partition int32) int {
	parts, x := ar.fetch, &ar.index
	ar.work++
	if at < len(parts) && parts[at].Partition.Partition == partition && parts[at].topic == topic {
		return at
	}
	if len(parts) <= searchParts {
		for j := range parts {
			ar.work++
			if parts[j].Partition.Partition == partition && parts[j].topic == topic {
				return j
			}
		}
		return -1
	}
	if x.m == nil {
		x.m = make(map[partKey]int64, len(parts))
	}
	for ; x.n < len(parts); x.n++ {
		ar.work++
		k := partKey{parts[x.n].topic, parts[x.n].Partition.Partition}
		if _, dup := x.m[k]; !dup {
			x.m[k] = int64(x.n)
		}
	}
	if j, ok := x.m[partKey{topic, partition}]; ok {
		return int(j)
	}
	return -1
}

// fetchedInto sets what the response returned of a partition of topic
// (by name or id), got, in ar.fetch, where it is looked for from at on;
// it is added when the request did not list it, while the event holds
// fewer than maxEventParts. It returns where the next partition is looked
// for.
func (c *Conn) fetchedInto(ar *Req, at int, topic []byte, id [16]byte, got audit.Partition) int {
	j := -1
	if at < len(ar.fetch) && ar.fetch[at].Partition.Partition == got.Partition && sameTopic(ar.fetch[at].topic, topic, id) {
		ar.work++
		j = at
	} else {
		name := c.deliverNames.get(topic, id)
		j = ar.find(at, name, got.Partition)
		if j < 0 {
			if !ar.adds() {
				return at
			}
			ar.fetch = append(ar.fetch, fetchPart{topic: name, Partition: audit.Partition{Partition: got.Partition,
				Committed: audit.NoOffset, FetchOffset: audit.NoOffset}})
			j = len(ar.fetch) - 1
		}
	}
	part := &ar.fetch[j].Partition
	part.ErrorCode, part.Bytes = got.ErrorCode, got.Bytes
	part.Records, part.FirstOffset, part.LastOffset = got.Records, got.FirstOffset, got.LastOffset
	return j + 1
}

// producedPartition returns the partition of ar's resources named topic
// and partition: looked for after the last one found (an answer follows
// its request's order), else, where the resources hold few partitions, at
// each, else in the index. It is added when the request did not name it
// (a body streamed upstream as it was read), while the event holds fewer
// than maxEventParts; beyond, it is counted in PartitionsOmitted and nil
// returned.
func (ar *Req) producedPartition(topic string, partition int32) *audit.Partition {
	if p := ar.listedPartition(topic, partition); p != nil {
		return p
	}
	return ar.addProduced(topic, partition)
}

// listedPartition returns the partition of ar's resources named topic and
// partition, found as producedPartition finds it; nil when they do not
// list it.
func (ar *Req) listedPartition(topic string, partition int32) *audit.Partition {
	q, x := &ar.req, &ar.index
	ar.work++
	for ri, pj := ar.last.res, ar.last.part+1; ri <= ar.last.res+1 && ri < len(q.Resources); ri, pj = ri+1, 0 {
		if r := &q.Resources[ri]; r.Name == topic && pj < len(r.Partitions) && r.Partitions[pj].Partition == partition {
			return ar.producedAt(ri, pj)
		}
	}
	if !x.built {
		total := 0
		for i := range q.Resources {
			total += len(q.Resources[i].Partitions)
		}
		ar.work += len(q.Resources)
		if total <= searchParts {
			for ri := range q.Resources {
				r := &q.Resources[ri]
				ar.work++
				if r.Name != topic {
					continue
				}
				for pj := range r.Partitions {
					ar.work++
					if r.Partitions[pj].Partition == partition {
						return ar.producedAt(ri, pj)
					}
				}
			}
			return nil
		}
		ar.indexProduced()
	}
	if v, ok := x.m[partKey{topic, partition}]; ok {
		return ar.producedAt(int(v>>32), int(uint32(v)))
	}
	return nil
}

// indexProduced puts every partition of ar's resources, and every
// resource, in the index.
func (ar *Req) indexProduced() {
	q, x := &ar.req, &ar.index
	if x.m == nil {
		x.m = map[partKey]int64{}
	}
	if x.res == nil {
		x.res = map[string]int32{}
	}
	for ri := range q.Resources {
		r := &q.Resources[ri]
		if _, dup := x.res[r.Name]; !dup {
			x.res[r.Name] = int32(ri)
		}
		for pj := range r.Partitions {
			ar.work++
			k := partKey{r.Name, r.Partitions[pj].Partition}
			if _, dup := x.m[k]; !dup {
				x.m[k] = resKey(ri, pj)
			}
		}
	}
	x.built = true
}

// resKey packs a resource's index and its partition's.
func resKey(ri, pj int) int64 { return int64(ri)<<32 | int64(uint32(pj)) }

// producedAt returns the partition pj of resource ri, where the next is
// looked for first.
func (ar *Req) producedAt(ri, pj int) *audit.Partition {
	ar.last.res, ar.last.part = ri, pj
	return &ar.req.Resources[ri].Partitions[pj]
}

// addProduced adds topic's partition to ar's resources (and to the index,
// once built), or counts it omitted once the event holds maxEventParts.
func (ar *Req) addProduced(topic string, partition int32) *audit.Partition {
	q, x := &ar.req, &ar.index
	if !ar.adds() {
		return nil
	}
	ri := -1
	if x.built {
		if v, ok := x.res[topic]; ok {
			ri = int(v)
		}
	} else {
		ar.work += len(q.Resources)
		ri = slices.IndexFunc(q.Resources, func(r audit.Resource) bool { return r.Name == topic })
	}
	if ri < 0 {
		q.Resources = append(q.Resources, audit.Resource{Type: "Topic", Name: topic, Operation: "Write"})
		ri = len(q.Resources) - 1
		if x.built {
			x.res[topic] = int32(ri)
		}
	}
	r := &q.Resources[ri]
	r.Partitions = append(r.Partitions, audit.Partition{Partition: partition, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: audit.NoOffset})
	pj := len(r.Partitions) - 1
	if x.built {
		x.m[partKey{topic, partition}] = resKey(ri, pj)
	}
	return ar.producedAt(ri, pj)
}

// adds reports whether the answer may add a partition to the event, and
// counts it; a partition it may not add is counted omitted, unless the
// request's own were omitted already (a Produce streamed past the bound),
// which the answer names again.
func (ar *Req) adds() bool {
	if ar.added >= maxEventParts {
		if !ar.full {
			ar.req.PartitionsOmitted++
		}
		return false
	}
	ar.added++
	return true
}

// groupResources groups the partitions of ar.fetch under their topics, in
// the order the topics first appear, into ar's resources with the
// operation op, in time linear in the partitions whatever their order:
// each partition's topic is numbered (the previous partition's, else by a
// search among the topics seen while they are few, else through a map),
// and the partitions are then placed by topic in one pass, a counting
// sort.
func groupResources(ar *Req, op string) {
	out, ends, ords := ar.req.Resources[:0], ar.starts[:0], ar.ords[:0]
	for i := range ar.fetch {
		ar.work++
		name := ar.fetch[i].topic
		o := int32(-1)
		switch {
		case i > 0 && ar.fetch[i-1].topic == name:
			o = ords[i-1]
		case len(out) <= searchParts:
			ar.work += len(out)
			if k := slices.IndexFunc(out, func(r audit.Resource) bool { return r.Name == name }); k >= 0 {
				o = int32(k)
			}
		default:
			if k, ok := ar.topics[name]; ok {
				o = k
			}
		}
		if o < 0 {
			o = int32(len(out))
			out = append(out, audit.Resource{Type: "Topic", Name: name, Operation: op})
			ends = append(ends, 0)
			ar.indexTopics(out)
		}
		ords = append(ords, o)
		ends[o]++
	}
	// ends[o] becomes where topic o's partitions start, and grows to
	// where they end as they are placed.
	base := len(ar.parts)
	at := base
	for o := range ends {
		at, ends[o] = at+ends[o], at
	}
	ar.parts = slices.Grow(ar.parts, len(ar.fetch))[:at]
	for i, o := range ords {
		ar.parts[ends[o]] = ar.fetch[i].Partition
		ends[o]++
	}
	start := base
	for o := range out {
		out[o].Partitions = ar.parts[start:ends[o]:ends[o]]
		start = ends[o]
	}
	clear(ar.topics) // no topic name kept alive
	ar.req.Resources, ar.resources, ar.starts, ar.ords = out, out, ends, ords
}

// indexTopics puts the topic just added to out in ar.topics once out
// holds more than a search covers, every topic when it first does.
func (ar *Req) indexTopics(out []audit.Resource) {
	switch n := len(out); {
	case n <= searchParts:
	case n == searchParts+1:
		if ar.topics == nil {
			ar.topics = make(map[string]int32, n)
		}
		for k := range out {
			ar.topics[out[k].Name] = int32(k)
		}
	default:
		ar.topics[out[n-1].Name] = int32(n - 1)
	}
}
