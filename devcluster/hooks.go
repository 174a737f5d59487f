package devcluster

import (
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// installHooks makes kfake answer as Apache Kafka does where a client
// would notice the difference: topics created on first use whatever the
// Metadata version, and topic names Kafka refuses refused.
func installHooks(kc *kfake.Cluster) {
	names := &topicGuard{kc: kc}
	hook(kc, kmsg.Metadata, func(req kmsg.Request) {
		m := req.(*kmsg.MetadataRequest)
		// Metadata v0-v3 have no AllowAutoTopicCreation field, and Kafka
		// treats them as asking for it (auto.create.topics.enable defaults
		// to true); kfake reads the absent field as false and answers
		// UNKNOWN_TOPIC_OR_PARTITION, so a client such as kafka-python,
		// which sends Metadata v1, waits for a topic that never comes.
		if m.Version < 4 {
			m.AllowAutoTopicCreation = true
		}
		var topics []string
		for _, t := range m.Topics {
			if t.Topic != nil && t.TopicID == [16]byte{} {
				topics = append(topics, *t.Topic)
			}
		}
		names.refuse(req, kmsg.Metadata, topics)
	})
	hook(kc, kmsg.CreateTopics, func(req kmsg.Request) {
		c := req.(*kmsg.CreateTopicsRequest)
		topics := make([]string, len(c.Topics))
		for i, t := range c.Topics {
			topics[i] = t.Topic
		}
		names.refuse(req, kmsg.CreateTopics, topics)
	})
}

// hook runs fn on every request of key before kfake handles it; fn may
// change the request. kfake keeps, per control function, one entry per
// connection that ever reached it; replacing the function every
// controlRenewEvery requests bounds that table on a long-running cluster.
func hook(kc *kfake.Cluster, key kmsg.Key, fn func(kmsg.Request)) {
	var seen atomic.Int64
	var control func(kmsg.Request) (kmsg.Response, error, bool)
	control = func(req kmsg.Request) (kmsg.Response, error, bool) {
		fn(req)
		if seen.Add(1)%controlRenewEvery == 0 {
			kc.DropControl()
			kc.ControlKey(int16(key), control)
		}
		return nil, nil, false
	}
	kc.ControlKey(int16(key), control)
}

// controlRenewEvery is how many requests one control function sees before
// it is replaced by a fresh one.
const controlRenewEvery = 4096

// topicGuard answers topic names that Kafka refuses with
// INVALID_TOPIC_EXCEPTION, as Kafka does for CreateTopics and for
// Metadata (whether or not it asks for auto-creation); kfake would create
// them. A suite that passes against dev must not fail against Kafka.
//
// The answer is a kfake fault for that name and that one request, installed
// by the control function just before kfake handles the request. kfake
// handles requests one at a time, so each control call finds the previous
// request answered; a fault it never reached (a request kfake refused as a
// whole) is removed then.
type topicGuard struct {
	kc   *kfake.Cluster
	last map[kmsg.Key]*kfake.FaultHandle // touched only by control functions, which kfake runs one at a time
}

func (g *topicGuard) refuse(req kmsg.Request, key kmsg.Key, topics []string) {
	if h := g.last[key]; h != nil {
		h.Remove()
		delete(g.last, key)
	}
	var faults []kfake.Fault
	for _, t := range topics {
		if invalidTopic(t) == "" {
			continue
		}
		// A fault's empty Topic selects every topic: a request that names
		// the empty topic has all its topics refused, where Kafka refuses
		// that one alone. No client mixes it with others.
		faults = append(faults, kfake.Fault{
			Keys:  []kmsg.Key{key},
			Topic: t,
			Err:   kerr.InvalidTopicException,
			When:  func(r kmsg.Request) bool { return r == req },
		})
	}
	if len(faults) == 0 {
		return
	}
	if g.last == nil {
		g.last = make(map[kmsg.Key]*kfake.FaultHandle)
	}
	g.last[key] = g.kc.Fault(faults...)
}

// maxTopicLength is the longest topic name Kafka accepts.
const maxTopicLength = 249

// invalidTopic says why Apache Kafka refuses name as a topic name, or ""
// when it accepts it: the rules of Kafka's Topic.validate (at most 249
// characters, only ASCII letters, digits, '.', '_' and '-', neither "."
// nor "..").
func invalidTopic(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "." || name == "..":
		return "is not allowed"
	case len(name) > maxTopicLength:
		return "is longer than 249 characters"
	case strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0:
		return "has characters other than ASCII letters, digits, '.', '_' and '-'"
	}
	return ""
}
