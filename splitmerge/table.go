package splitmerge

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Table is a View kept from what the upstream says: Metadata responses
// for brokers and leaders, the proxy's own FindCoordinator lookups for
// coordinators, and the leaders that Produce and Fetch responses name
// (KIP-951). The zero value knows nothing. A Table is not safe for
// concurrent use: the proxy shares one by copy on write (Clone), so that
// a split reads a table nobody changes.
type Table struct {
	brokers      []int32
	topics       map[string]*topicInfo
	ids          map[[16]byte]string
	coordinators map[coordKey]int32
	// known: the topics of the table an answer for every topic replaces
	// (KeepIDs), whose ids the answer may not name.
	known map[string]*topicInfo
}

type topicInfo struct {
	id      [16]byte
	leaders []int32 // by partition; NoLeader where none
}

type coordKey struct {
	typ int8
	key string
}

var _ View = (*Table)(nil)

// Leader implements View.
func (t *Table) Leader(topic string, id [16]byte, partition int32) int32 {
	if topic == "" {
		topic = t.ids[id]
	}
	ti := t.topics[topic]
	if ti == nil || partition < 0 || int(partition) >= len(ti.leaders) {
		return UnknownPartition
	}
	return ti.leaders[partition]
}

// Coordinator implements View.
func (t *Table) Coordinator(typ int8, key string) int32 {
	if n, ok := t.coordinators[coordKey{typ, key}]; ok {
		return n
	}
	return NoCoordinator
}

// Brokers implements View.
func (t *Table) Brokers() []int32 { return t.brokers }

// Topic returns the name and the id of the topic named topic, or, when
// topic is empty, of the topic with that id: the one given and the other
// as far as the table knows it (empty or zero when it does not). Requests
// of one connection may name a topic either way (Produce by name before
// v13, Fetch by id from v13 on), so the proxy compares topics by both.
func (t *Table) Topic(topic string, id [16]byte) (string, [16]byte) {
	if topic == "" {
		topic = t.ids[id]
	}
	if ti := t.topics[topic]; ti != nil && id == ([16]byte{}) {
		id = ti.id
	}
	return topic, id
}

// Clone returns a copy that changes independently of t.
func (t *Table) Clone() *Table {
	c := &Table{
		brokers:      slices.Clone(t.brokers),
		topics:       make(map[string]*topicInfo, len(t.topics)),
		ids:          make(map[[16]byte]string, len(t.ids)),
		coordinators: make(map[coordKey]int32, len(t.coordinators)),
	}
	for name, ti := range t.topics {
		c.topics[name] = &topicInfo{id: ti.id, leaders: slices.Clone(ti.leaders)}
	}
	for id, name := range t.ids {
		c.ids[id] = name
	}
	for k, n := range t.coordinators {
		c.coordinators[k] = n
	}
	return c
}

// ApplyMetadata learns the brokers and the topics of a Metadata response,
// before it is reshaped. all says the request asked for every topic, so
// that topics the response does not list are gone; otherwise only the
// topics listed change. A topic listed with an error that says it does
// not exist is forgotten; with another error, what was known of it stays.
func (t *Table) ApplyMetadata(m *kmsg.MetadataResponse, all bool) {
	t.brokers = t.brokers[:0]
	for _, b := range m.Brokers {
		t.brokers = append(t.brokers, b.NodeID)
	}
	slices.Sort(t.brokers)
	t.brokers = slices.Compact(t.brokers)
	known := t.topics
	if t.known != nil {
		known, t.known = t.known, nil
	}
	if t.topics == nil || all {
		t.topics = make(map[string]*topicInfo, len(m.Topics))
		t.ids = make(map[[16]byte]string, len(m.Topics))
	}
	for i := range m.Topics {
		mt := &m.Topics[i]
		if mt.Topic == nil {
			continue
		}
		name := *mt.Topic
		old := known[name]
		if mt.ErrorCode != 0 && len(mt.Partitions) == 0 {
			switch {
			case gone(mt.ErrorCode):
				delete(t.topics, name)
				if old != nil && t.ids[old.id] == name {
					delete(t.ids, old.id)
				}
			case old != nil && all:
				// Not described to this client (its authorization),
				// or not led yet: what was known stays.
				t.topics[name] = &topicInfo{id: old.id, leaders: slices.Clone(old.leaders)}
				if old.id != ([16]byte{}) {
					t.ids[old.id] = name
				}
			}
			continue
		}
		id := mt.TopicID
		if old != nil {
			if t.ids[old.id] == name {
				delete(t.ids, old.id)
			}
			// An answer before v10 names no topic id, a client's as
			// much as the view's: the id known stays, so that one
			// old client does not leave the others' requests by id
			// (Fetch v13 and up) without a broker.
			if id == ([16]byte{}) {
				id = old.id
			}
		}
		ti := &topicInfo{id: id}
		for _, p := range mt.Partitions {
			if p.Partition < 0 {
				continue
			}
			for int(p.Partition) >= len(ti.leaders) {
				ti.leaders = append(ti.leaders, NoLeader)
			}
			if p.Leader >= 0 {
				ti.leaders[p.Partition] = p.Leader
			}
		}
		t.topics[name] = ti
		if id != ([16]byte{}) {
			t.ids[id] = name
		}
	}
}

// gone reports whether a topic's error in a Metadata answer says it does
// not exist; another (TOPIC_AUTHORIZATION_FAILED for the client that
// asked, LEADER_NOT_AVAILABLE while it is created) says nothing of it.
func gone(code int16) bool {
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.InvalidTopicException.Code:
		return true
	}
	return false
}

// KeepIDs has the next answer applied (ApplyMetadata), to a table that
// starts anew from it, keep the topic ids prev knew of the topics it
// lists where it names none: an answer before v10 names no id. Nothing
// else of prev is kept; prev is not changed.
func (t *Table) KeepIDs(prev *Table) {
	if prev != nil {
		t.known = prev.topics
	}
}

// SetLeader records node as the leader of a partition the table knows,
// as a KIP-951 answer names it; NoLeader forgets the leader, after
// NOT_LEADER_OR_FOLLOWER without a new one. It changes nothing for a
// partition the table does not know.
func (t *Table) SetLeader(topic string, id [16]byte, partition, node int32) {
	if topic == "" {
		topic = t.ids[id]
	}
	ti := t.topics[topic]
	if ti == nil || partition < 0 || int(partition) >= len(ti.leaders) {
		return
	}
	ti.leaders[partition] = node
}

// SetCoordinator records the coordinator of key, or forgets it for
// NoCoordinator (after NOT_COORDINATOR).
func (t *Table) SetCoordinator(typ int8, key string, node int32) {
	if node < 0 {
		delete(t.coordinators, coordKey{typ, key})
		return
	}
	if t.coordinators == nil {
		t.coordinators = make(map[coordKey]int32)
	}
	t.coordinators[coordKey{typ, key}] = node
}
