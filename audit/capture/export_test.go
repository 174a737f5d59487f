package capture

// Work is how many entries placing ar's answer's partitions and grouping
// them looked at.
func (ar *Req) Work() int { return ar.work }

// MaxEventParts is maxEventParts, for the tests of the bound.
const MaxEventParts = maxEventParts

// MaxTopicIDs is maxTopicIDs, for the test of its bound.
const MaxTopicIDs = maxTopicIDs

// Len is how many ids t keeps.
func (t *TopicIDs) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// Name is name, for the tests.
func (t *TopicIDs) Name(id [16]byte) (string, bool) { return t.name(id) }
