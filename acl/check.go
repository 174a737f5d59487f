package acl

import (
	"encoding/binary"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's error codes for a denial, and for a topic id no name is known
// for.
const (
	TopicAuthorizationFailed           int16 = 29
	GroupAuthorizationFailed           int16 = 30
	ClusterAuthorizationFailed         int16 = 31
	TransactionalIDAuthorizationFailed int16 = 53
	UnknownTopicID                     int16 = 100
)

// Client is who sends a request, as a decision needs it.
type Client struct {
	Principal string // "User:alice"
	Host      netip.Addr
	// TopicName gives a topic's name by its id, for the requests that
	// name topics by id (Fetch v13+, Produce v13+, Metadata, DeleteTopics
	// v6+, OffsetFetch v10+, ShareFetch). Nil: no id is known, and a topic
	// named by id alone is answered UNKNOWN_TOPIC_ID, as Kafka answers an
	// id it does not know; it is never let through unchecked.
	TopicName func(id [16]byte) (string, bool)
	// Kept, when not nil, answers Check's decisions in the Authorizer's
	// place: a connection's last decisions, each as the Authorizer
	// answered it. Nil: the Authorizer decides every time.
	Kept Kept
}

// Kept answers a decision as a's Authorize would, from what it kept of
// a's earlier answers or else by asking a.
type Kept interface {
	Authorize(a *Authorizer, principal string, host netip.Addr, op Operation, rt ResourceType, name string) bool
}

// Verdict is a request's authorization, as a broker would decide it
// before doing anything.
type Verdict struct {
	// Code, when not zero, refuses the whole request with this error code.
	Code int16
	// Denied lists the resources the request names that are refused while
	// the rest of it proceeds: each is answered with its code in its place
	// in the response, and left out of what is forwarded.
	Denied []Denial
	// Listed holds what the answer's resources each need: those denied
	// are left out of the answer (all-topics Metadata, ListGroups without
	// Describe on the cluster, ListTransactions).
	Listed []Need
	// Unhandled is true for a key whose needs depend on more than its
	// request (delegation tokens): the caller decides from RuleFor.
	Unhandled bool
}

// Denial is one resource refused within a request.
type Denial struct {
	Resource ResourceType
	Name     string
	// TopicID is the id a topic was named by, when it was.
	TopicID [16]byte
	Code    int16
}

// Allowed reports whether the whole request may proceed untouched.
func (v Verdict) Allowed() bool {
	return v.Code == 0 && len(v.Denied) == 0 && len(v.Listed) == 0 && !v.Unhandled
}

// Denies reports whether the resource of type rt named name is refused.
func (v Verdict) Denies(rt ResourceType, name string) bool {
	for _, d := range v.Denied {
		if d.Resource == rt && d.Name == name {
			return true
		}
	}
	return false
}

// checker gathers one request's verdict; a decision per distinct name.
type checker struct {
	a    *Authorizer
	c    Client
	v    Verdict
	seen map[Denial]struct{}
}

func (k *checker) allowed(op Operation, rt ResourceType, name string) bool {
	if k.c.Kept != nil {
		return k.c.Kept.Authorize(k.a, k.c.Principal, k.c.Host, op, rt, name)
	}
	return k.a.Authorize(k.c.Principal, k.c.Host, op, rt, name)
}

// whole refuses the request unless op on the resource is allowed.
func (k *checker) whole(op Operation, rt ResourceType, name string, code int16) bool {
	if k.v.Code != 0 {
		return false
	}
	if !k.allowed(op, rt, name) {
		k.v.Code = code
		return false
	}
	return true
}

// each refuses one named resource unless op on it is allowed.
func (k *checker) each(op Operation, rt ResourceType, name string, code int16) {
	k.deny(Denial{Resource: rt, Name: name, Code: code}, !k.allowed(op, rt, name))
}

func (k *checker) deny(d Denial, denied bool) {
	if !denied {
		return
	}
	if k.seen == nil {
		k.seen = map[Denial]struct{}{}
	}
	if _, ok := k.seen[d]; ok {
		return
	}
	k.seen[d] = struct{}{}
	k.v.Denied = append(k.v.Denied, d)
}

// topic checks op on a topic named by name or, when name is empty, by id.
func (k *checker) topic(op Operation, name string, id [16]byte) {
	if name == "" && id != ([16]byte{}) {
		var ok bool
		if k.c.TopicName != nil {
			name, ok = k.c.TopicName(id)
		}
		if !ok {
			k.deny(Denial{Resource: Topic, TopicID: id, Code: UnknownTopicID}, true)
			return
		}
		k.deny(Denial{Resource: Topic, Name: name, TopicID: id, Code: TopicAuthorizationFailed}, !k.allowed(op, Topic, name))
		return
	}
	k.each(op, Topic, name, TopicAuthorizationFailed)
}

// listed asks for the answer to be filtered by n, once.
func (k *checker) listed(n Need) {
	for _, l := range k.v.Listed {
		if l.Operation == n.Operation && l.Resource == n.Resource {
			return
		}
	}
	k.v.Listed = append(k.v.Listed, n)
}

// allOrNothing refuses the whole request with TOPIC_AUTHORIZATION_FAILED
// unless op is allowed on every topic named, as Kafka checks a consumer's
// subscription and a streams topology.
func (k *checker) allOrNothing(op Operation, topics []string) {
	for _, t := range topics {
		if !k.allowed(op, Topic, t) {
			k.v.Code = TopicAuthorizationFailed
			return
		}
	}
}

// allTopics denies every topic the request names, as Kafka answers a
// follower's fetch without ClusterAction.
func (k *checker) allTopics(name string, id [16]byte) {
	k.deny(Denial{Resource: Topic, Name: name, TopicID: id, Code: TopicAuthorizationFailed}, true)
}

// Config resource types (ConfigResource.Type) and where Kafka checks them.
const (
	configTopic         = 2
	configBroker        = 4
	configBrokerLogger  = 8
	configClientMetrics = 16
	configGroup         = 32
)

func (k *checker) config(op Operation, typ int8, name string) {
	switch typ {
	case configTopic:
		k.each(op, Topic, name, TopicAuthorizationFailed)
	case configGroup:
		k.each(op, Group, name, GroupAuthorizationFailed)
	case configBroker, configBrokerLogger, configClientMetrics:
		k.deny(Denial{Resource: Cluster, Name: name, Code: ClusterAuthorizationFailed}, !k.allowed(op, Cluster, ClusterName))
	}
}

// Check decides a decoded request as Kafka's broker does before acting on
// it: refused whole (a group, a transactional id, the cluster), or with
// the topics, groups or other resources it names that are refused, or
// with the answer to filter. A nil Authorizer allows everything.
func (a *Authorizer) Check(c Client, req kmsg.Request) Verdict {
	if a == nil {
		return Verdict{}
	}
	k := &checker{a: a, c: c}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if transactional(r) {
			if r.TransactionID == nil {
				k.v.Code = TransactionalIDAuthorizationFailed
				break
			}
			if !k.whole(Write, TransactionalID, *r.TransactionID, TransactionalIDAuthorizationFailed) {
				break
			}
		}
		for _, t := range r.Topics {
			k.topic(Write, t.Topic, t.TopicID)
		}
	case *kmsg.FetchRequest:
		replica := r.ReplicaID
		if r.Version >= 15 {
			replica = r.ReplicaState.ID
		}
		follower := replica >= 0
		clusterOK := follower && k.allowed(ClusterAction, Cluster, ClusterName)
		for _, t := range r.Topics {
			switch {
			case clusterOK:
			case follower:
				k.allTopics(t.Topic, t.TopicID)
			default:
				k.topic(Read, t.Topic, t.TopicID)
			}
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			k.topic(Describe, t.Topic, [16]byte{})
		}
	case *kmsg.MetadataRequest:
		if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
			k.listed(need(Describe, Topic, Listed))
			break
		}
		for _, t := range r.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			k.topic(Describe, name, t.TopicID)
		}
	case *kmsg.OffsetCommitRequest:
		if k.whole(Read, Group, r.Group, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, t.Topic, t.TopicID)
			}
		}
	case *kmsg.OffsetFetchRequest:
		// A group's topics left null ask for all of them: the answer is
		// filtered instead (FilterOffsetFetch).
		if r.Version < 8 {
			if k.whole(Describe, Group, r.Group, GroupAuthorizationFailed) {
				if r.Topics == nil {
					k.listed(need(Describe, Topic, Listed))
				}
				for _, t := range r.Topics {
					k.topic(Describe, t.Topic, [16]byte{})
				}
			}
			break
		}
		for _, g := range r.Groups {
			if !k.allowed(Describe, Group, g.Group) {
				k.deny(Denial{Resource: Group, Name: g.Group, Code: GroupAuthorizationFailed}, true)
				continue
			}
			if g.Topics == nil {
				k.listed(need(Describe, Topic, Listed))
			}
			for _, t := range g.Topics {
				k.topic(Describe, t.Topic, t.TopicID)
			}
		}
	case *kmsg.FindCoordinatorRequest:
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		for _, key := range keys {
			var code int16
			switch r.CoordinatorType {
			case 0:
				if !k.allowed(Describe, Group, key) {
					code = GroupAuthorizationFailed
				}
			case 1:
				if !k.allowed(Describe, TransactionalID, key) {
					code = TransactionalIDAuthorizationFailed
				}
			default:
				// A share coordinator: Kafka checks the cluster and
				// fails the whole request.
				k.whole(ClusterAction, Cluster, ClusterName, ClusterAuthorizationFailed)
			}
			if code == 0 {
				continue
			}
			if r.Version < 4 {
				k.v.Code = code
				break
			}
			rt := Group
			if r.CoordinatorType == 1 {
				rt = TransactionalID
			}
			k.deny(Denial{Resource: rt, Name: key, Code: code}, true)
		}
	case *kmsg.JoinGroupRequest:
		k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
	case *kmsg.HeartbeatRequest:
		k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
	case *kmsg.LeaveGroupRequest:
		k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
	case *kmsg.SyncGroupRequest:
		k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if k.whole(Read, Group, r.Group, GroupAuthorizationFailed) {
			k.allOrNothing(Describe, r.SubscribedTopicNames)
		}
	case *kmsg.DescribeGroupsRequest:
		for _, g := range r.Groups {
			k.each(Describe, Group, g, GroupAuthorizationFailed)
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		for _, g := range r.Groups {
			k.each(Describe, Group, g, GroupAuthorizationFailed)
		}
	case *kmsg.DeleteGroupsRequest:
		for _, g := range r.Groups {
			k.each(Delete, Group, g, GroupAuthorizationFailed)
		}
	case *kmsg.ListGroupsRequest:
		if !k.allowed(Describe, Cluster, ClusterName) {
			k.listed(need(Describe, Group, Listed))
		}
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			k.whole(Write, TransactionalID, *r.TransactionalID, TransactionalIDAuthorizationFailed)
		} else if !k.allowed(IdempotentWrite, Cluster, ClusterName) && !a.AuthorizeByResourceType(c.Principal, c.Host, Write, Topic) {
			k.v.Code = ClusterAuthorizationFailed
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			k.whole(ClusterAction, Cluster, ClusterName, ClusterAuthorizationFailed)
			break
		}
		if k.whole(Write, TransactionalID, r.TransactionalID, TransactionalIDAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Write, t.Topic, [16]byte{})
			}
		}
	case *kmsg.AddOffsetsToTxnRequest:
		if k.whole(Write, TransactionalID, r.TransactionalID, TransactionalIDAuthorizationFailed) {
			k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
		}
	case *kmsg.EndTxnRequest:
		k.whole(Write, TransactionalID, r.TransactionalID, TransactionalIDAuthorizationFailed)
	case *kmsg.TxnOffsetCommitRequest:
		if k.whole(Write, TransactionalID, r.TransactionalID, TransactionalIDAuthorizationFailed) &&
			k.whole(Read, Group, r.Group, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, t.Topic, [16]byte{})
			}
		}
	case *kmsg.CreateTopicsRequest:
		if !k.allowed(Create, Cluster, ClusterName) {
			for _, t := range r.Topics {
				k.topic(Create, t.Topic, [16]byte{})
			}
		}
	case *kmsg.DeleteTopicsRequest:
		clusterOK := k.allowed(Delete, Cluster, ClusterName)
		for _, n := range r.TopicNames {
			if !clusterOK {
				k.topic(Delete, n, [16]byte{})
			}
		}
		for _, t := range r.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if clusterOK && (name != "" || k.c.TopicName != nil) {
				continue
			}
			k.topic(Delete, name, t.TopicID)
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			k.topic(Delete, t.Topic, [16]byte{})
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			k.topic(Alter, t.Topic, [16]byte{})
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		if !k.allowed(ClusterAction, Cluster, ClusterName) {
			for _, t := range r.Topics {
				k.topic(Describe, t.Topic, [16]byte{})
			}
		}
	case *kmsg.DescribeConfigsRequest:
		for _, res := range r.Resources {
			k.config(DescribeConfigs, int8(res.ResourceType), res.ResourceName)
		}
	case *kmsg.AlterConfigsRequest:
		for _, res := range r.Resources {
			k.config(AlterConfigs, int8(res.ResourceType), res.ResourceName)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, res := range r.Resources {
			k.config(AlterConfigs, int8(res.ResourceType), res.ResourceName)
		}
	case *kmsg.OffsetDeleteRequest:
		if k.whole(Delete, Group, r.Group, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, t.Topic, [16]byte{})
			}
		}
	case *kmsg.DescribeProducersRequest:
		for _, t := range r.Topics {
			k.topic(Read, t.Topic, [16]byte{})
		}
	case *kmsg.DescribeTransactionsRequest:
		for _, id := range r.TransactionalIDs {
			k.each(Describe, TransactionalID, id, TransactionalIDAuthorizationFailed)
		}
		k.listed(need(Describe, Topic, Listed))
	case *kmsg.ListTransactionsRequest:
		k.listed(need(Describe, TransactionalID, Listed))
	case *kmsg.DescribeTopicPartitionsRequest:
		for _, t := range r.Topics {
			k.topic(Describe, t.Topic, [16]byte{})
		}
	case *kmsg.ShareGroupHeartbeatRequest:
		k.whole(Read, Group, r.GroupID, GroupAuthorizationFailed)
	case *kmsg.ShareGroupDescribeRequest:
		for _, g := range r.GroupIDs {
			k.each(Describe, Group, g, GroupAuthorizationFailed)
		}
	case *kmsg.ShareFetchRequest:
		if r.GroupID != nil && k.whole(Read, Group, *r.GroupID, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, "", t.TopicID)
			}
		}
	case *kmsg.ShareAcknowledgeRequest:
		if r.GroupID != nil && k.whole(Read, Group, *r.GroupID, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, "", t.TopicID)
			}
		}
	case *kmsg.StreamsGroupHeartbeatRequest:
		if k.whole(Read, Group, r.Group, GroupAuthorizationFailed) && r.Topology != nil {
			var names []string
			for _, st := range r.Topology.Subtopologies {
				names = append(names, st.SourceTopics...)
				names = append(names, st.RepartitionSinkTopics...)
				for _, t := range st.RepartitionSourceTopics {
					names = append(names, t.Topic)
				}
				for _, t := range st.StateChangelogTopics {
					names = append(names, t.Topic)
				}
			}
			k.allOrNothing(Describe, names)
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for _, g := range r.Groups {
			if !k.allowed(Describe, Group, g.GroupID) {
				k.deny(Denial{Resource: Group, Name: g.GroupID, Code: GroupAuthorizationFailed}, true)
				continue
			}
			for _, t := range g.Topics {
				k.topic(Describe, t.Topic, [16]byte{})
			}
		}
	case *kmsg.AlterShareGroupOffsetsRequest:
		if k.whole(Read, Group, r.GroupID, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, t.Topic, [16]byte{})
			}
		}
	case *kmsg.DeleteShareGroupOffsetsRequest:
		if k.whole(Delete, Group, r.GroupID, GroupAuthorizationFailed) {
			for _, t := range r.Topics {
				k.topic(Read, t.Topic, [16]byte{})
			}
		}
	case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
		k.whole(Read, Group, r.Group, GroupAuthorizationFailed)
	case *kmsg.StreamsGroupDescribeRequest:
		for _, g := range r.Groups {
			k.each(Describe, Group, g, GroupAuthorizationFailed)
		}
	default:
		k.byTable(req.Key())
	}
	return k.v
}

// byTable decides the keys whose needs are on the cluster alone, or
// nothing, from the rules; any other is left to the caller.
func (k *checker) byTable(key int16) {
	r, ok := RuleFor(key)
	if !ok {
		k.v.Unhandled = true
		return
	}
	for _, n := range r.Needs {
		if n.Scope != TheCluster || n.When != "" {
			k.v.Unhandled = true
			return
		}
	}
	for _, n := range r.Needs {
		ok := k.allowed(n.Operation, Cluster, ClusterName)
		for _, o := range n.Or {
			ok = ok || k.allowed(o.Operation, Cluster, ClusterName)
		}
		if !ok {
			k.v.Code = ClusterAuthorizationFailed
			return
		}
	}
}

// transactional reports whether a Produce carries transactional records,
// as Kafka asks it: the first batch of any partition marked so (a v2
// batch's attributes, bit 4).
func transactional(r *kmsg.ProduceRequest) bool {
	const magicAt, attrsAt = 16, 21
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			rec := p.Records
			if len(rec) >= attrsAt+2 && rec[magicAt] >= 2 && binary.BigEndian.Uint16(rec[attrsAt:])&0x10 != 0 {
				return true
			}
		}
	}
	return false
}
