package acl

import (
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scope says which resources of its type a Need is checked on.
type Scope uint8

// The scopes.
const (
	// TheCluster: the cluster, named kafka-cluster.
	TheCluster Scope = iota + 1
	// The: the one resource the request names (its group, its
	// transactional id); a denial refuses the whole request.
	The
	// Each: each resource the request names; a denial refuses that
	// resource only, in its place in the answer.
	Each
	// AnyOne: at least one resource of the type, as Kafka's
	// authorizeByResourceType decides.
	AnyOne
	// Listed: each resource in the answer; those denied are left out.
	Listed
)

// Need is one check a request needs.
type Need struct {
	Operation Operation
	Resource  ResourceType
	Scope     Scope
	// When says when the need applies; empty: always.
	When string
	// Or lists what also satisfies the need: any one of them allowed is
	// enough.
	Or []Need
}

// Rule is what one API key needs, as Kafka's brokers and controllers
// check it (KafkaApis, ControllerApis, AclApis, ConfigHelper; where
// docs/security and the broker differ, the broker).
type Rule struct {
	Key kmsg.Key
	// Client is false for the keys only brokers and controllers send one
	// another; a client that sends one is held to the same checks.
	Client bool
	// Needs are all required; none: the key needs nothing.
	Needs []Need
	// Note says what the table cannot: how a denial is answered.
	Note string
}

func need(op Operation, rt ResourceType, s Scope) Need {
	return Need{Operation: op, Resource: rt, Scope: s}
}
func cluster(op Operation) Need    { return need(op, Cluster, TheCluster) }
func (n Need) when(w string) Need  { n.When = w; return n }
func (n Need) or(alt ...Need) Need { n.Or = alt; return n }

var (
	clientRule = func(k kmsg.Key, note string, needs ...Need) Rule {
		return Rule{Key: k, Client: true, Needs: needs, Note: note}
	}
	brokerRule = func(k kmsg.Key, needs ...Need) Rule {
		return Rule{Key: k, Needs: needs, Note: "sent between brokers and controllers"}
	}
)

// rules lists every key kmsg knows, in key order.
var rules = []Rule{
	clientRule(kmsg.Produce, "a denied transactional id refuses the request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED; docs/security lists IdempotentWrite on the cluster for an idempotent producer, which the broker checks at InitProducerId only",
		need(Write, Topic, Each), need(Write, TransactionalID, The).when("the records are transactional")),
	clientRule(kmsg.Fetch, "a follower without ClusterAction gets TOPIC_AUTHORIZATION_FAILED for every partition",
		need(Read, Topic, Each).when("a consumer's fetch"), cluster(ClusterAction).when("a follower's fetch")),
	clientRule(kmsg.ListOffsets, "", need(Describe, Topic, Each)),
	clientRule(kmsg.Metadata, "a named topic denied answers TOPIC_AUTHORIZATION_FAILED whether or not it exists; all topics: the denied are left out; cluster and topic authorized operations are filled only when asked",
		need(Describe, Topic, Each).when("topics named"), need(Describe, Topic, Listed).when("all topics"),
		need(Create, Topic, Each).when("a topic to create on first use").or(cluster(Create))),
	brokerRule(kmsg.LeaderAndISR, cluster(ClusterAction)),
	brokerRule(kmsg.StopReplica, cluster(ClusterAction)),
	brokerRule(kmsg.UpdateMetadata, cluster(ClusterAction)),
	brokerRule(kmsg.ControlledShutdown, cluster(ClusterAction)),
	clientRule(kmsg.OffsetCommit, "a denied group refuses the request (GROUP_AUTHORIZATION_FAILED)",
		need(Read, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.OffsetFetch, "per group from v8; all topics: the denied are left out",
		need(Describe, Group, The), need(Describe, Topic, Each)),
	clientRule(kmsg.FindCoordinator, "per key from v4; a share coordinator needs ClusterAction",
		need(Describe, Group, Each).when("a group coordinator"), need(Describe, TransactionalID, Each).when("a transaction coordinator")),
	clientRule(kmsg.JoinGroup, "", need(Read, Group, The)),
	clientRule(kmsg.Heartbeat, "", need(Read, Group, The)),
	clientRule(kmsg.LeaveGroup, "", need(Read, Group, The)),
	clientRule(kmsg.SyncGroup, "", need(Read, Group, The)),
	clientRule(kmsg.DescribeGroups, "", need(Describe, Group, Each)),
	clientRule(kmsg.ListGroups, "without Describe on the cluster, the groups denied Describe are left out: an empty list, not an error",
		need(Describe, Group, Listed).or(cluster(Describe))),
	clientRule(kmsg.SASLHandshake, ""),
	clientRule(kmsg.ApiVersions, ""),
	clientRule(kmsg.CreateTopics, "a topic's configs in the answer need DescribeConfigs on it",
		need(Create, Topic, Each).or(cluster(Create)), need(DescribeConfigs, Topic, Each).when("the answer's configs")),
	clientRule(kmsg.DeleteTopics, "a topic named by id needs Describe too, or its name is not disclosed",
		need(Delete, Topic, Each).or(cluster(Delete))),
	clientRule(kmsg.DeleteRecords, "", need(Delete, Topic, Each)),
	clientRule(kmsg.InitProducerID, "a denial answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or CLUSTER_AUTHORIZATION_FAILED for an idempotent producer",
		need(Write, TransactionalID, The).when("a transactional producer"),
		need(TwoPhaseCommit, TransactionalID, The).when("a transactional producer enabling two-phase commit, v6+"),
		cluster(IdempotentWrite).when("an idempotent producer").or(need(Write, Topic, AnyOne))),
	clientRule(kmsg.OffsetForLeaderEpoch, "", need(Describe, Topic, Each).or(cluster(ClusterAction))),
	clientRule(kmsg.AddPartitionsToTxn, "from v4 only brokers send it",
		need(Write, TransactionalID, The).when("v3 and below"), need(Write, Topic, Each).when("v3 and below"), cluster(ClusterAction).when("v4 and above")),
	clientRule(kmsg.AddOffsetsToTxn, "", need(Write, TransactionalID, The), need(Read, Group, The)),
	clientRule(kmsg.EndTxn, "", need(Write, TransactionalID, The)),
	brokerRule(kmsg.WriteTxnMarkers, cluster(ClusterAction).or(cluster(Alter))),
	clientRule(kmsg.TxnOffsetCommit, "", need(Write, TransactionalID, The), need(Read, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.DescribeACLs, "answered from the ACL file", cluster(Describe)),
	clientRule(kmsg.CreateACLs, "refused: the ACL file holds the bindings", cluster(Alter)),
	clientRule(kmsg.DeleteACLs, "refused: the ACL file holds the bindings", cluster(Alter)),
	clientRule(kmsg.DescribeConfigs, "per resource: broker and client-metrics configs on the cluster",
		need(DescribeConfigs, Topic, Each), need(DescribeConfigs, Group, Each), cluster(DescribeConfigs).when("broker configs")),
	clientRule(kmsg.AlterConfigs, "per resource: broker configs on the cluster",
		need(AlterConfigs, Topic, Each), need(AlterConfigs, Group, Each), cluster(AlterConfigs).when("broker configs")),
	clientRule(kmsg.AlterReplicaLogDirs, "", cluster(Alter)),
	clientRule(kmsg.DescribeLogDirs, "a denial answers CLUSTER_AUTHORIZATION_FAILED with no results", cluster(Describe)),
	clientRule(kmsg.SASLAuthenticate, ""),
	clientRule(kmsg.CreatePartitions, "", need(Alter, Topic, Each)),
	clientRule(kmsg.CreateDelegationToken, "a token for oneself needs nothing", need(CreateTokens, User, The).when("a token for another owner")),
	clientRule(kmsg.RenewDelegationToken, "only the token's owner and renewers, by the token, not by ACL"),
	clientRule(kmsg.ExpireDelegationToken, "only the token's owner and renewers, by the token, not by ACL"),
	clientRule(kmsg.DescribeDelegationToken, "a client's own tokens are always listed",
		need(Describe, DelegationToken, Listed).or(need(DescribeTokens, User, Each))),
	clientRule(kmsg.DeleteGroups, "", need(Delete, Group, Each)),
	clientRule(kmsg.ElectLeaders, "every partition answers CLUSTER_AUTHORIZATION_FAILED; docs/security says ClusterAction, the broker checks Alter", cluster(Alter)),
	clientRule(kmsg.IncrementalAlterConfigs, "per resource: broker configs on the cluster",
		need(AlterConfigs, Topic, Each), need(AlterConfigs, Group, Each), cluster(AlterConfigs).when("broker configs")),
	clientRule(kmsg.AlterPartitionAssignments, "", cluster(Alter)),
	clientRule(kmsg.ListPartitionReassignments, "", cluster(Describe)),
	clientRule(kmsg.OffsetDelete, "", need(Delete, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.DescribeClientQuotas, "", cluster(DescribeConfigs)),
	clientRule(kmsg.AlterClientQuotas, "", cluster(AlterConfigs)),
	clientRule(kmsg.DescribeUserSCRAMCredentials, "", cluster(Describe)),
	clientRule(kmsg.AlterUserSCRAMCredentials, "", cluster(Alter)),
	brokerRule(kmsg.Vote, cluster(ClusterAction)),
	brokerRule(kmsg.BeginQuorumEpoch, cluster(ClusterAction)),
	brokerRule(kmsg.EndQuorumEpoch, cluster(ClusterAction)),
	clientRule(kmsg.DescribeQuorum, "", cluster(Describe)),
	brokerRule(kmsg.AlterPartition, cluster(ClusterAction)),
	clientRule(kmsg.UpdateFeatures, "", cluster(Alter)),
	brokerRule(kmsg.Envelope, cluster(ClusterAction)),
	brokerRule(kmsg.FetchSnapshot, cluster(ClusterAction)),
	clientRule(kmsg.DescribeCluster, "docs/security lists Describe on the cluster; the broker answers anyone and needs it only to fill the cluster's authorized operations when asked"),
	clientRule(kmsg.DescribeProducers, "", need(Read, Topic, Each)),
	brokerRule(kmsg.BrokerRegistration, cluster(ClusterAction)),
	brokerRule(kmsg.BrokerHeartbeat, cluster(ClusterAction)),
	clientRule(kmsg.UnregisterBroker, "", cluster(Alter)),
	clientRule(kmsg.DescribeTransactions, "a transaction's partitions are listed only for the topics the client may Describe",
		need(Describe, TransactionalID, Each), need(Describe, Topic, Listed)),
	clientRule(kmsg.ListTransactions, "", need(Describe, TransactionalID, Listed)),
	brokerRule(kmsg.AllocateProducerIDs, cluster(ClusterAction)),
	clientRule(kmsg.ConsumerGroupHeartbeat, "a subscribed topic denied refuses the request (TOPIC_AUTHORIZATION_FAILED)",
		need(Read, Group, The), need(Describe, Topic, The).when("each subscribed topic")),
	clientRule(kmsg.ConsumerGroupDescribe, "", need(Describe, Group, Each)),
	brokerRule(kmsg.ControllerRegistration, cluster(ClusterAction)),
	clientRule(kmsg.GetTelemetrySubscriptions, ""),
	clientRule(kmsg.PushTelemetry, ""),
	brokerRule(kmsg.AssignReplicasToDirs, cluster(ClusterAction)),
	clientRule(kmsg.ListConfigResources, "", cluster(DescribeConfigs)),
	clientRule(kmsg.DescribeTopicPartitions, "", need(Describe, Topic, Each)),
	clientRule(kmsg.ShareGroupHeartbeat, "", need(Read, Group, The)),
	clientRule(kmsg.ShareGroupDescribe, "", need(Describe, Group, Each)),
	clientRule(kmsg.ShareFetch, "", need(Read, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.ShareAcknowledge, "", need(Read, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.AddRaftVoter, "", cluster(Alter)),
	clientRule(kmsg.RemoveRaftVoter, "", cluster(Alter)),
	brokerRule(kmsg.UpdateRaftVoter, cluster(ClusterAction)),
	brokerRule(kmsg.InitializeShareGroupState, cluster(ClusterAction)),
	brokerRule(kmsg.ReadShareGroupState, cluster(ClusterAction)),
	brokerRule(kmsg.WriteShareGroupState, cluster(ClusterAction)),
	brokerRule(kmsg.DeleteShareGroupState, cluster(ClusterAction)),
	brokerRule(kmsg.ReadShareGroupStateSummary, cluster(ClusterAction)),
	clientRule(kmsg.StreamsGroupHeartbeat, "a topology's topic denied refuses the request (TOPIC_AUTHORIZATION_FAILED); internal topics it cannot create are named in its status",
		need(Read, Group, The), need(Describe, Topic, The).when("each topic of the topology"),
		need(Create, Topic, Each).when("internal topics to create").or(cluster(Create))),
	clientRule(kmsg.StreamsGroupDescribe, "", need(Describe, Group, Each)),
	clientRule(kmsg.DescribeShareGroupOffsets, "per group", need(Describe, Group, Each), need(Describe, Topic, Each)),
	clientRule(kmsg.AlterShareGroupOffsets, "", need(Read, Group, The), need(Read, Topic, Each)),
	clientRule(kmsg.DeleteShareGroupOffsets, "", need(Delete, Group, The), need(Read, Topic, Each)),
	// The two keys below are newer than the Kafka sources read for this
	// table; they follow the closest key's rule.
	clientRule(kmsg.StreamsGroupTopologyDescriptionUpdate, "as StreamsGroupHeartbeat's group check", need(Read, Group, The)),
	brokerRule(kmsg.UnregisterController, cluster(ClusterAction)),
}

// Rules gives what every API key kmsg knows needs, in key order.
func Rules() []Rule { return append([]Rule(nil), rules...) }

// RuleFor gives what key needs; false for a key kmsg does not know.
func RuleFor(key int16) (Rule, bool) {
	if key < 0 || int(key) >= len(rules) {
		return Rule{}, false
	}
	return rules[key], true
}

func (s Scope) phrase(rt ResourceType) string {
	switch s {
	case TheCluster:
		return "the cluster"
	case The:
		return "the " + rt.String()
	case Each:
		return "each " + rt.String()
	case AnyOne:
		return "any " + rt.String()
	case Listed:
		return "each " + rt.String() + " listed"
	}
	return rt.String()
}

// String writes a need as the README's table does: "Write on each Topic
// (the records are transactional), or Create on the cluster".
func (n Need) String() string {
	s := n.Operation.String() + " on " + n.Scope.phrase(n.Resource)
	if n.When != "" {
		s += " (" + n.When + ")"
	}
	for _, o := range n.Or {
		s += ", or " + o.String()
	}
	return s
}

// WriteMarkdown writes the rules as a Markdown table, one row per key
// that a client sends, then one line listing the keys only brokers and
// controllers send.
func WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| API key | needs | on a denial |\n|---|---|---|\n")
	var internal []string
	for _, r := range rules {
		if !r.Client {
			internal = append(internal, fmt.Sprintf("%s (%d)", r.Key.Name(), r.Key))
			continue
		}
		needs := make([]string, len(r.Needs))
		for i, n := range r.Needs {
			needs[i] = n.String()
		}
		ns := strings.Join(needs, "; ")
		if ns == "" {
			ns = "nothing"
		}
		fmt.Fprintf(&b, "| %s (%d) | %s | %s |\n", r.Key.Name(), r.Key, ns, r.Note)
	}
	fmt.Fprintf(&b, "\nClusterAction on the cluster (WriteTxnMarkers: or Alter) for the keys only brokers and controllers send: %s.\n", strings.Join(internal, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}
