package capture

import (
	"encoding/base64"
	"sync"
	"sync/atomic"

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
	// gen counts the changes to m, so that a connection's cache of the
	// names it gave (Conn.rename) knows when to forget them.
	gen atomic.Uint64
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
	t.gen.Add(1)
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

// renamedTopic is a name Conn.rename gave: to, for the id whose text
// (topicName's form) is from.
type renamedTopic struct {
	from, to string
}

// rename names by their topics' names the topic resources of res that an
// id names (topicName's form), where c.IDs learned them. The names it
// gave last are kept while c.IDs does not change: a connection's events
// name the same few topics over and over, and a name kept costs a
// comparison where a lookup costs the id's decoding and the shared lock.
// On the goroutine delivering the responses.
func (c *Conn) rename(res []audit.Resource) {
	t := c.IDs
	if t == nil {
		return
	}
	if g := t.gen.Load(); g != c.renamedGen {
		c.renamed, c.renamedGen = [4]renamedTopic{}, g
	}
	for i := range res {
		r := &res[i]
		if r.Type != "Topic" || len(r.Name) != idTextLen {
			continue
		}
		if name, ok := c.renamedName(r.Name); ok {
			r.Name = name
			continue
		}
		if name, ok := t.byText(r.Name); ok {
			c.renamed[c.renamedNext] = renamedTopic{from: r.Name, to: name}
			c.renamedNext = (c.renamedNext + 1) % len(c.renamed)
			r.Name = name
		}
	}
}

// renamedName is the name rename last gave the id whose text is from.
func (c *Conn) renamedName(from string) (string, bool) {
	for i := range c.renamed {
		if e := &c.renamed[i]; e.from == from {
			return e.to, true
		}
	}
	return "", false
}

// idTextLen is the length of a topic id in topicName's form: 16 bytes in
// unpadded base64.
const idTextLen = 22

// byText is the name of the topic whose id's text (topicName's form) is
// text, if learned.
func (t *TopicIDs) byText(text string) (string, bool) {
	var src [idTextLen]byte
	copy(src[:], text)
	var id [16]byte
	if n, err := base64.RawURLEncoding.Decode(id[:], src[:]); err != nil || n != len(id) {
		return "", false
	}
	return t.name(id)
}
