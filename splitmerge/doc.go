// Package splitmerge holds the split and merge rules of the single
// endpoint, the topology in which the proxy presents a whole cluster as
// one broker: leader of every partition, coordinator of every group and
// transactional id. It is pure logic, like ordering: no sockets, no
// goroutines, no clocks; kmsg types in and out, kerr codes.
//
// Split takes a decoded client request and a View of the cluster
// (partition leaders, coordinators, brokers) and returns a Plan: the parts
// that go to brokers, each a kmsg request of the client's key and version,
// and what the proxy answers itself. Plan.Merge takes the parts' decoded
// responses, or their failures, and builds the one response the client
// reads, in the shape of its request: entries in the client's order, each
// answered once, at its version, with the proxy's own node id and address
// wherever a leader, coordinator or broker is named (Self). The plan also
// carries what the proxy's sequencer needs: whether the request is a
// two-phase write, the group a commit writes to, the transaction a
// Produce writes to or an EndTxn ends.
//
// How each API key kmsg knows is answered (ClassOf):
//
// By partition leader (ByLeader), one part per leader, the partitions of
// a part in the client's order; a partition the view knows without a
// leader is answered NOT_LEADER_OR_FOLLOWER and one it does not know
// UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when named by id), as
// Kafka answers them; a part that fails answers its partitions
// NOT_LEADER_OR_FOLLOWER, which clients retry after refreshing metadata:
//
//	 0 Produce               records stay the client's bytes; KIP-951 leaders name the proxy
//	 1 Fetch                 sessionless (KIP-227), no rack (KIP-392); waits: DESIGN.md
//	 2 ListOffsets
//	21 DeleteRecords
//	23 OffsetForLeaderEpoch
//	61 DescribeProducers
//
// By coordinator (ByCoordinator): the whole request to the coordinator of
// its one key, or, for the batched forms, one part per coordinator with
// the keys in the client's order; a key whose coordinator the view lacks
// is answered COORDINATOR_NOT_AVAILABLE (the proxy looks coordinators up
// first, see Coordinators), a part that fails NOT_COORDINATOR:
//
//	group:       8 OffsetCommit, 9 OffsetFetch v0-7, 11 JoinGroup,
//	             12 Heartbeat, 13 LeaveGroup, 14 SyncGroup,
//	             28 TxnOffsetCommit, 47 OffsetDelete,
//	             68 ConsumerGroupHeartbeat, 88 StreamsGroupHeartbeat,
//	             91 AlterShareGroupOffsets, 92 DeleteShareGroupOffsets,
//	             93 StreamsGroupTopologyDescriptionUpdate
//	group, batched: 9 OffsetFetch v8+, 15 DescribeGroups, 42 DeleteGroups,
//	             69 ConsumerGroupDescribe, 77 ShareGroupDescribe,
//	             89 StreamsGroupDescribe, 90 DescribeShareGroupOffsets
//	transaction: 22 InitProducerID (without a transactional id: any
//	             broker), 24 AddPartitionsToTxn v0-3, 25 AddOffsetsToTxn,
//	             26 EndTxn
//	transaction, batched: 24 AddPartitionsToTxn v4+, 65 DescribeTransactions
//
// To every broker, merged (ToEvery): 16 ListGroups and 66 ListTransactions
// (the union, each group or transaction once; a broker that fails makes
// the answer COORDINATOR_NOT_AVAILABLE), 18 ApiVersions (what every
// broker that answered supports, clamped to what kmsg parses, without the
// refused keys; the proxy may merge the answers it keeps from its
// connections instead of asking again).
//
// To any one broker (ToAny): 3 Metadata and 75 DescribeTopicPartitions
// (reshaped: the proxy is the only broker, the controller, the leader and
// only replica of every partition with a leader; leader epochs stay the
// leaders'), 60 DescribeCluster (reshaped the same way; controllers, type
// 2, are answered MISMATCHED_ENDPOINT_TYPE as a broker answers them),
// 19 CreateTopics and 37 CreatePartitions (a topic with a manual replica
// assignment is answered INVALID_REPLICA_ASSIGNMENT: it names brokers the
// client cannot know), 20 DeleteTopics, 29 DescribeACLs, 30 CreateACLs,
// 31 DeleteACLs, 38-41 the delegation tokens, 43 ElectLeaders,
// 48 DescribeClientQuotas, 49 AlterClientQuotas,
// 50 DescribeUserSCRAMCredentials, 51 AlterUserSCRAMCredentials,
// 57 UpdateFeatures, 71 GetTelemetrySubscriptions, 72 PushTelemetry,
// 74 ListConfigResources. The controller or the cluster's metadata
// answers them whichever broker takes them. A part that fails is answered
// REQUEST_TIMED_OUT (applied or not, the proxy cannot tell); Read says
// which of them a proxy may send again instead.
//
// By resource (ByResource): 32 DescribeConfigs, 33 AlterConfigs and
// 44 IncrementalAlterConfigs send a broker's own resources (broker configs
// and loggers named by id) to that broker, and every other resource
// (topics, groups, client metrics, the cluster-wide broker defaults) to
// any broker; a broker id the cluster does not have is INVALID_REQUEST,
// as Kafka answers an id that is not its own. The config values of a
// merged DescribeConfigs still name the brokers' own listeners and the
// KRaft quorum: the proxy rewrites them after Merge
// (rewrite.DescribeConfigs), since it alone knows the brokers' addresses.
//
// Answered by the proxy alone (Local): 10 FindCoordinator, at every
// version: the proxy, for every group and transactional id.
//
// Refused (Refused): answered UNSUPPORTED_VERSION, with the reason in
// every message field the response has, never sent upstream and not
// advertised by ApiVersions, because one advertised broker cannot answer
// them faithfully (Refusal):
//
//	17 SASLHandshake, 36 SASLAuthenticate: the proxy authenticates to
//	   every broker itself; a client's exchange, bound to one connection,
//	   cannot be relayed to several
//	34 AlterReplicaLogDirs, 35 DescribeLogDirs: log directories belong to
//	   one broker, and the endpoint stands for all of them
//	45 AlterPartitionAssignments, 46 ListPartitionReassignments,
//	64 UnregisterBroker: they name brokers, and the client sees one
//	55 DescribeQuorum, 80 AddRaftVoter, 81 RemoveRaftVoter,
//	82 UpdateRaftVoter: the KRaft quorum is not reachable through the
//	   endpoint
//	76 ShareGroupHeartbeat, 78 ShareFetch, 79 ShareAcknowledge: share
//	   sessions (KIP-932) are per broker, and the proxy does not keep one
//	   per broker for each client session
//	4-7, 27, 52-54, 56, 58, 59, 62, 63, 67, 70, 73, 83-87, 94: requests
//	   between brokers and controllers, which clients do not send
//
// A key kmsg adds later is refused until it is classified
// (TestEveryKeyClassified).
//
// Invariants, checked by the property test and the fuzz target
// (TestSplitMergeProperty, FuzzSplitMerge) over every routed key and
// version, any request kmsg can encode, any view (partitions without
// leaders, unknown topics and coordinators) and any brokers failing:
//
//  1. every part has the client's key and version and goes to a broker of
//     the view, at most one part per broker (ToEvery: one per broker);
//  2. the merged response has the client's key and version and answers
//     every entry of the request exactly once, in the client's order;
//  3. each entry carries the answer of the broker the view places it on,
//     the proxy's own answer where the view places it nowhere, or the
//     retriable error of a part that failed;
//  4. split copies no record bytes: a part's records are the client's.
//
// When a broker answers a key the client asked for twice, the answers are
// matched in the order the broker gave them; nothing else tells them
// apart.
package splitmerge
