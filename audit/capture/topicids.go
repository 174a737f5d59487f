package capture

import (
	"encoding/base64"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/wire"
)

// TopicIDs names topics by their ids, as the Metadata answers the proxy
// passed on to its clients taught them, so that the event of a request
// that names its topics by id (Produce and Fetch v13 and later,
// OffsetCommit v10 and later) names them as the people who read the
// trail know them. A client reads a topic's id from a Metadata answer
// before it names the id, so an id is nearly always known by then; one
// that is not (the client read its metadata through another proxy) stays
// the id, as Kafka prints it. One per proxy, shared by its connections;
// the zero value is empty and ready.
type TopicIDs struct {
	mu sync.RWMutex
	m  map[[16]byte]string
}

// maxTopicIDs bounds the ids kept: past it (topics created and deleted
// for long enough, or an upstream that lists millions) every id is
// forgotten and learned again from the next answers.
const maxTopicIDs = 100_000

// Learn keeps the id of every topic resp names without an error.
func (t *TopicIDs) Learn(resp *kmsg.MetadataResponse) {
	if t == nil || !t.news(resp) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if !learnable(rt) {
			continue
		}
		if _, ok := t.m[rt.TopicID]; !ok && len(t.m) >= maxTopicIDs {
			clear(t.m)
		}
		if t.m == nil {
			t.m = make(map[[16]byte]string, len(resp.Topics))
		}
		t.m[rt.TopicID] = *rt.Topic
	}
}

// news reports whether resp names a topic t does not know, or by another
// name: most answers repeat what t knows, and take only the read lock.
func (t *TopicIDs) news(resp *kmsg.MetadataResponse) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if learnable(rt) && t.m[rt.TopicID] != *rt.Topic {
			return true
		}
	}
	return false
}

func learnable(rt *kmsg.MetadataResponseTopic) bool {
	return rt.ErrorCode == 0 && rt.Topic != nil && *rt.Topic != "" && rt.TopicID != [16]byte{}
}

// name is the topic named by id, if learned.
func (t *TopicIDs) name(id [16]byte) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.m[id]
	return n, ok
}

// namesByID reports whether a request with header h names its topics by
// id, and its event then names them so until rename.
func namesByID(h wire.RequestHeader) bool {
	switch kmsg.Key(h.Key) {
	case kmsg.Produce, kmsg.Fetch:
		return h.Version >= 13
	case kmsg.OffsetCommit:
		return h.Version >= 10
	}
	return false
}

// rename names by their topics' names the topic resources of res that an
// id names (topicName's form), where t learned them.
func (t *TopicIDs) rename(res []audit.Resource) {
	if t == nil {
		return
	}
	for i := range res {
		r := &res[i]
		var src [22]byte // 16 bytes in unpadded base64
		if r.Type != "Topic" || len(r.Name) != len(src) {
			continue
		}
		copy(src[:], r.Name)
		var id [16]byte
		if n, err := base64.RawURLEncoding.Decode(id[:], src[:]); err != nil || n != len(id) {
			continue
		}
		if name, ok := t.name(id); ok {
			r.Name = name
		}
	}
}
