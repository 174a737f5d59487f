package acl

import "github.com/twmb/franz-go/pkg/kmsg"

// AuthorizedOperations is the bit field a broker answers when a client
// asks what it may do with a resource (Metadata, DescribeGroups,
// DescribeCluster, ConsumerGroupDescribe): bit n set when the operation
// of code n is allowed, among those kafka-acls offers on the type. A nil
// Authorizer allows them all.
func (a *Authorizer) AuthorizedOperations(c Client, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range toolOperations[rt] {
		if a.Authorize(c.Principal, c.Host, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// FilterMetadata leaves out of an all-topics Metadata answer the topics
// the client may not Describe, as Kafka does: silently, not as errors.
func (a *Authorizer) FilterMetadata(c Client, resp *kmsg.MetadataResponse) {
	if a == nil {
		return
	}
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if t.Topic != nil && a.Authorize(c.Principal, c.Host, Describe, Topic, *t.Topic) {
			kept = append(kept, t)
		}
	}
	clear(resp.Topics[len(kept):])
	resp.Topics = kept
}

// FilterListGroups leaves out of a ListGroups answer the groups the
// client may not Describe, unless it may Describe the cluster: an empty
// list, not an error, as Kafka answers.
func (a *Authorizer) FilterListGroups(c Client, resp *kmsg.ListGroupsResponse) {
	if a == nil || a.Authorize(c.Principal, c.Host, Describe, Cluster, ClusterName) {
		return
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if a.Authorize(c.Principal, c.Host, Describe, Group, g.Group) {
			kept = append(kept, g)
		}
	}
	clear(resp.Groups[len(kept):])
	resp.Groups = kept
}

// FilterListTransactions leaves out of a ListTransactions answer the
// transactional ids the client may not Describe.
func (a *Authorizer) FilterListTransactions(c Client, resp *kmsg.ListTransactionsResponse) {
	if a == nil {
		return
	}
	kept := resp.TransactionStates[:0]
	for _, s := range resp.TransactionStates {
		if a.Authorize(c.Principal, c.Host, Describe, TransactionalID, s.TransactionalID) {
			kept = append(kept, s)
		}
	}
	clear(resp.TransactionStates[len(kept):])
	resp.TransactionStates = kept
}

// FilterDescribeTransactions leaves out of each transaction in a
// DescribeTransactions answer the topics the client may not Describe, as
// Kafka lists a transaction's partitions.
func (a *Authorizer) FilterDescribeTransactions(c Client, resp *kmsg.DescribeTransactionsResponse) {
	if a == nil {
		return
	}
	for i := range resp.TransactionStates {
		ts := &resp.TransactionStates[i]
		kept := ts.Topics[:0]
		for _, t := range ts.Topics {
			if a.Authorize(c.Principal, c.Host, Describe, Topic, t.Topic) {
				kept = append(kept, t)
			}
		}
		clear(ts.Topics[len(kept):])
		ts.Topics = kept
	}
}

// MayCreateTopic reports whether the client may create the topic named,
// as Kafka asks when a Metadata request would create a missing topic and
// for CreateTopics: Create on the cluster, or on the topic.
func (a *Authorizer) MayCreateTopic(c Client, topic string) bool {
	return a.Authorize(c.Principal, c.Host, Create, Cluster, ClusterName) ||
		a.Authorize(c.Principal, c.Host, Create, Topic, topic)
}

// FilterCreateTopics hides, in a CreateTopics answer, the configs,
// partition count and replication factor of each topic the client may not
// DescribeConfigs, as Kafka's controller answers: TOPIC_AUTHORIZATION_FAILED
// in the topic's config error code, the counts at their defaults.
func (a *Authorizer) FilterCreateTopics(c Client, resp *kmsg.CreateTopicsResponse) {
	if a == nil {
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode != 0 || a.Authorize(c.Principal, c.Host, DescribeConfigs, Topic, t.Topic) {
			continue
		}
		t.ConfigErrorCode = TopicAuthorizationFailed
		t.Configs = nil
		t.NumPartitions, t.ReplicationFactor = -1, -1
	}
}

// FilterOffsetFetch leaves out of an OffsetFetch answer for all of a
// group's topics the topics the client may not Describe, as Kafka does:
// clients are not shown offsets of topics they may not describe. A topic
// named by id alone is kept only if c.TopicName resolves it to a topic the
// client may Describe.
func (a *Authorizer) FilterOffsetFetch(c Client, resp *kmsg.OffsetFetchResponse) {
	if a == nil {
		return
	}
	describable := func(name string, id [16]byte) bool {
		if name == "" && id != ([16]byte{}) {
			var ok bool
			if c.TopicName != nil {
				name, ok = c.TopicName(id)
			}
			if !ok {
				return false
			}
		}
		return a.Authorize(c.Principal, c.Host, Describe, Topic, name)
	}
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if describable(t.Topic, [16]byte{}) {
			kept = append(kept, t)
		}
	}
	clear(resp.Topics[len(kept):])
	resp.Topics = kept
	for i := range resp.Groups {
		g := &resp.Groups[i]
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if describable(t.Topic, t.TopicID) {
				kept = append(kept, t)
			}
		}
		clear(g.Topics[len(kept):])
		g.Topics = kept
	}
}
