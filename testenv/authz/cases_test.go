package authz

import (
	"sort"
	"strings"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's codes the cases expect.
var (
	ok          = code(0)
	unknown     = code(3)  // UNKNOWN_TOPIC_OR_PARTITION
	topicDenied = code(29) // TOPIC_AUTHORIZATION_FAILED
	groupDenied = code(30) // GROUP_AUTHORIZATION_FAILED
	clusterDeny = code(31) // CLUSTER_AUTHORIZATION_FAILED
	txnDenied   = code(53) // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	notAttempt  = code(55) // OPERATION_NOT_ATTEMPTED
	memberIDReq = code(79) // MEMBER_ID_REQUIRED: the group let the member in
)

// The topics each principal may see (Describe, or an operation that
// implies it), as an all-topics Metadata lists them.
const (
	aliceTopics = "[t-alice 0, t-public 0, t-shared 0]"
	bobTopics   = "[p-data-1 0, p-data-2 0, t-host 0, t-public 0, t-shared 0]"
	otherTopics = "[t-public 0, t-shared 0]"
	allTopics   = "[__consumer_offsets 0, __transaction_state 0, p-data-1 0, p-data-2 0, t-alice 0, t-host 0, t-public 0, t-secret 0, t-shared 0]"
)

func cases() []tcase {
	txnAlice := "tx-alice"
	cs := []tcase{
		// Authentication first: a wrong password, or a user Kafka does
		// not know, is told SASL_AUTHENTICATION_FAILED and nothing else.
		{name: "a wrong password", user: "alice", password: "not-alice-secret", do: func(r *run) { metadata(r, false, "t-alice") },
			want: outcome{"metadata": code(58)}},
		{name: "an unknown user", user: "mallory", password: "mallory-secret", do: func(r *run) { metadata(r, false, "t-public") },
			want: outcome{"metadata": code(58)}},

		// Produce: Write on the topic, per topic.
		{name: "produce to an allowed topic", user: "alice", do: func(r *run) { produce(r, "t-alice") },
			want: outcome{"produce t-alice/0": ok}},
		{name: "produce with Read only", user: "alice", do: func(r *run) { produce(r, "t-shared") },
			want: outcome{"produce t-shared/0": topicDenied}},
		{name: "produce to a prefixed topic", user: "bob", do: func(r *run) { produce(r, "p-data-1") },
			want: outcome{"produce p-data-1/0": ok}},
		{name: "produce to another's topic", user: "bob", do: func(r *run) { produce(r, "t-alice") },
			want: outcome{"produce t-alice/0": topicDenied}},
		{name: "produce to allowed, read-only and denied topics at once", user: "alice", do: func(r *run) { produce(r, "t-alice", "t-shared", "t-secret") },
			want: outcome{"produce t-alice/0": ok, "produce t-shared/0": topicDenied, "produce t-secret/0": topicDenied}},
		// As clients do: Metadata first, whose answer gives the topic ids
		// the request then names. (The cases above name ids the client
		// has from elsewhere: cached across a reconnection, or before its
		// ACLs changed.)
		{name: "produce after Metadata", user: "alice", do: func(r *run) {
			metadata(r, false, "t-alice", "t-shared")
			produce(r, "t-alice", "t-shared")
		}, want: outcome{"metadata t-alice": ok, "metadata t-shared": ok, "produce t-alice/0": ok, "produce t-shared/0": topicDenied}},
		{name: "produce by User:* only", user: "dave", do: func(r *run) { produce(r, "t-public") },
			want: outcome{"produce t-public/0": topicDenied}},
		{name: "produce by the super user to a topic denied to User:*", user: "admin", do: func(r *run) { produce(r, "t-secret") },
			want: outcome{"produce t-secret/0": ok}},

		// Idempotent producers: IdempotentWrite on the cluster, or Write
		// on any topic.
		{name: "idempotent InitProducerId with Write on a topic", user: "alice", do: func(r *run) { initProducerID(r, nil) },
			want: outcome{"init": ok}},
		{name: "idempotent InitProducerId with Write on a prefix", user: "bob", do: func(r *run) { initProducerID(r, nil) },
			want: outcome{"init": ok}},
		{name: "idempotent InitProducerId with IdempotentWrite", user: "carol", do: func(r *run) { initProducerID(r, nil) },
			want: outcome{"init": ok}},
		{name: "idempotent InitProducerId with neither", user: "dave", do: func(r *run) { initProducerID(r, nil) },
			want: outcome{"init": clusterDeny}},

		// Transactions.
		{name: "a transaction end to end", user: "alice", do: func(r *run) {
			pid, epoch := initProducerID(r, &txnAlice)
			addPartitions(r, txnAlice, pid, epoch, "t-alice")
			produceTopics(r, []string{"t-alice"}, &txnAlice, pid, epoch)
			addOffsets(r, txnAlice, pid, epoch, "g-alice")
			txnOffsetCommit(r, txnAlice, pid, epoch, "g-alice", "t-alice")
			endTxn(r, txnAlice, pid, epoch, true)
		}, want: outcome{"init": ok, "addpartitions t-alice/0": ok, "produce t-alice/0": ok, "addoffsets g-alice": ok,
			"txncommit g-alice t-alice/0": ok, "endtxn": ok}},
		{name: "InitProducerId for another's transactional id", user: "alice", do: func(r *run) { initProducerID(r, kmsg.StringPtr("tx-bob")) },
			want: outcome{"init": txnDenied}},
		{name: "InitProducerId with no transactional id grant", user: "bob", do: func(r *run) { initProducerID(r, &txnAlice) },
			want: outcome{"init": txnDenied}},
		{name: "AddPartitionsToTxn with a topic not writable", user: "alice", do: func(r *run) {
			pid, epoch := initProducerID(r, &txnAlice)
			addPartitions(r, txnAlice, pid, epoch, "t-alice", "p-data-1")
			endTxn(r, txnAlice, pid, epoch, false)
		}, want: outcome{"init": ok, "addpartitions t-alice/0": notAttempt, "addpartitions p-data-1/0": topicDenied, "endtxn": ok}},
		{name: "AddOffsetsToTxn for a group without Read", user: "alice", do: func(r *run) {
			pid, epoch := initProducerID(r, &txnAlice)
			addOffsets(r, txnAlice, pid, epoch, "g-bob")
			endTxn(r, txnAlice, pid, epoch, false)
		}, want: outcome{"init": ok, "addoffsets g-bob": groupDenied, "endtxn": ok}},
		{name: "transactional Produce with a transactional id not granted", user: "alice", do: func(r *run) {
			produceTopics(r, []string{"t-alice"}, kmsg.StringPtr("tx-bob"), 1000, 0)
		}, want: outcome{"produce t-alice/0": txnDenied}},
		{name: "AddOffsetsToTxn and EndTxn for another's transactional id", user: "bob", do: func(r *run) {
			addOffsets(r, txnAlice, 1000, 0, "g-bob")
			endTxn(r, txnAlice, 1000, 0, false)
		}, want: outcome{"addoffsets g-bob": txnDenied, "endtxn": txnDenied}},
		{name: "TxnOffsetCommit with a topic not readable", user: "alice", do: func(r *run) {
			pid, epoch := initProducerID(r, &txnAlice)
			addOffsets(r, txnAlice, pid, epoch, "g-alice")
			txnOffsetCommit(r, txnAlice, pid, epoch, "g-alice", "t-alice", "p-data-1")
			endTxn(r, txnAlice, pid, epoch, false)
		}, want: outcome{"init": ok, "addoffsets g-alice": ok, "txncommit g-alice t-alice/0": ok, "txncommit g-alice p-data-1/0": topicDenied, "endtxn": ok}},
		{name: "ListTransactions filtered by Write on a transactional id", user: "alice", do: listTransactions,
			want: outcome{"listtransactions": ok, "transactions": "[tx-alice]"}},
		{name: "ListTransactions with no transactional id allowed", user: "dave", do: listTransactions,
			want: outcome{"listtransactions": ok, "transactions": "[]"}},
		{name: "ListTransactions by the super user", user: "admin", do: listTransactions,
			want: outcome{"listtransactions": ok, "transactions": "[tx-alice, tx-setup]"}},
		{name: "DescribeTransactions", user: "alice", do: func(r *run) { describeTransactions(r, "tx-alice", "tx-bob") },
			want: outcome{"describetransaction tx-alice": ok, "describetransaction tx-bob": txnDenied}},
		{name: "FindCoordinator for transactional ids", user: "alice", do: func(r *run) { findCoordinator(r, 1, "tx-alice", "tx-bob") },
			want: outcome{"findcoordinator tx-alice": ok, "findcoordinator tx-bob": txnDenied}},

		// Fetch: Read on the topic.
		{name: "fetch an allowed topic", user: "alice", do: func(r *run) { fetch(r, "t-alice") },
			want: outcome{"fetch t-alice/0": ok}},
		{name: "fetch a topic where DENY overrides ALLOW", user: "alice", do: func(r *run) { fetch(r, "t-secret") },
			want: outcome{"fetch t-secret/0": topicDenied}},
		{name: "fetch with User:* Read", user: "dave", do: func(r *run) { fetch(r, "t-shared") },
			want: outcome{"fetch t-shared/0": ok}},
		{name: "fetch allowed from this host", user: "bob", do: func(r *run) { fetch(r, "t-host") },
			want: outcome{"fetch t-host/0": ok}},
		{name: "fetch denied from this host though everyone may read", user: "bob", do: func(r *run) { fetch(r, "t-shared") },
			want: outcome{"fetch t-shared/0": topicDenied}},
		{name: "fetch after Metadata", user: "bob", do: func(r *run) {
			metadata(r, false, "t-host", "t-shared", "p-data-1")
			fetch(r, "t-host", "t-shared", "p-data-1")
		}, want: outcome{"metadata t-host": ok, "metadata t-shared": ok, "metadata p-data-1": ok,
			"fetch t-host/0": ok, "fetch t-shared/0": topicDenied, "fetch p-data-1/0": ok}},
		{name: "fetch allowed only from another host", user: "carol", do: func(r *run) { fetch(r, "t-host") },
			want: outcome{"fetch t-host/0": topicDenied}},
		{name: "fetch allowed and denied topics at once", user: "alice", do: func(r *run) { fetch(r, "t-alice", "p-data-1") },
			want: outcome{"fetch t-alice/0": ok, "fetch p-data-1/0": topicDenied}},
		{name: "fetch by the super user", user: "admin", do: func(r *run) { fetch(r, "t-secret") },
			want: outcome{"fetch t-secret/0": ok}},

		// Metadata: all topics lists only those described; named topics
		// answer 29 without Describe, whether they exist or not.
		{name: "all-topics Metadata", user: "alice", do: metadataAll, want: outcome{"topics": aliceTopics}},
		{name: "all-topics Metadata", user: "bob", do: metadataAll, want: outcome{"topics": bobTopics}},
		{name: "all-topics Metadata", user: "carol", do: metadataAll, want: outcome{"topics": otherTopics}},
		{name: "all-topics Metadata", user: "dave", do: metadataAll, want: outcome{"topics": otherTopics}},
		{name: "all-topics Metadata", user: "admin", do: metadataAll, want: outcome{"topics": allTopics}},
		{name: "Metadata of named topics", user: "alice", do: func(r *run) { metadata(r, false, "t-alice", "t-shared", "t-secret", "p-data-1", "nope") },
			want: outcome{"metadata t-alice": ok, "metadata t-shared": ok, "metadata t-secret": topicDenied, "metadata p-data-1": topicDenied, "metadata nope": topicDenied}},
		// Auto-creation: the first answer says the topic is not there
		// yet; it is, soon after.
		// Authorized operations: what Metadata, DescribeCluster and
		// DescribeGroups report a principal may do, when asked.
		{name: "Metadata with authorized operations", user: "alice", do: func(r *run) { metadataOps(r, "t-alice", "t-shared", "t-public", "t-secret") },
			want: outcome{"metadata t-alice": ok, "operations t-alice": "[Read Write Delete Alter Describe DescribeConfigs]",
				"metadata t-shared": ok, "operations t-shared": "[Read Describe]",
				"metadata t-public": ok, "operations t-public": "[Describe]",
				"metadata t-secret": topicDenied, "operations t-secret": "not given"}},
		{name: "Metadata with authorized operations", user: "bob", do: func(r *run) { metadataOps(r, "t-alice", "p-data-1", "t-host", "t-shared") },
			want: outcome{"metadata t-alice": topicDenied, "operations t-alice": "not given",
				"metadata t-shared": ok, "operations t-shared": "[Describe]",
				"metadata p-data-1": ok, "operations p-data-1": "[Read Write Describe]",
				"metadata t-host": ok, "operations t-host": "[Read Describe]"}},
		{name: "DescribeCluster with authorized operations", user: "bob", do: describeClusterOps,
			want: outcome{"describecluster": ok, "operations cluster": "[Create Describe DescribeConfigs]"}},
		// Without Describe on the cluster Kafka reports none of its
		// operations, IdempotentWrite included (KafkaApis: 0 unless
		// DESCRIBE on CLUSTER).
		{name: "DescribeCluster with authorized operations", user: "carol", do: describeClusterOps,
			want: outcome{"describecluster": ok, "operations cluster": "[]"}},
		{name: "DescribeCluster with authorized operations", user: "admin", do: describeClusterOps,
			want: outcome{"describecluster": ok, "operations cluster": "[Create Alter Describe ClusterAction DescribeConfigs AlterConfigs IdempotentWrite]"}},
		{name: "DescribeGroups with authorized operations", user: "carol", do: func(r *run) { describeGroupsOps(r, "g-alice") },
			want: outcome{"describegroup g-alice": ok, "operations g-alice": "[Describe]"}},
		{name: "DescribeGroups with authorized operations", user: "alice", do: func(r *run) { describeGroupsOps(r, "g-alice") },
			want: outcome{"describegroup g-alice": ok, "operations g-alice": "[Read Describe]"}},
		{name: "Metadata auto-creates with Create and Describe", user: "alice",
			do: func(r *run) {
				metadata(r, true, r.n("auto-alice"))
				awaitTopic(r, r.n("auto-alice"))
			},
			clean: func(h *harness, tok string) { h.deleteTopic("auto-alice-" + tok) },
			want:  outcome{"metadata auto-alice-{run}": unknown, "afterwards auto-alice-{run}": ok}},
		// Describe without Create, auto-creation asked: Kafka answers 29
		// (KafkaApis: unauthorizedForCreateTopics), not 3.
		{name: "Metadata does not auto-create without Create", user: "dave", do: func(r *run) {
			metadata(r, true, r.n("auto-dave"))
			awaitTopic(r, r.n("auto-dave"))
		}, want: outcome{"metadata auto-dave-{run}": topicDenied, "afterwards auto-dave-{run}": unknown}},
		{name: "Metadata of a missing topic described, no auto-creation asked", user: "dave", do: func(r *run) { metadata(r, false, r.n("auto-dave")) },
			want: outcome{"metadata auto-dave-{run}": unknown}},
		{name: "Metadata does not auto-create without Describe", user: "carol", do: func(r *run) { metadata(r, true, r.n("auto-carol")) },
			want: outcome{"metadata auto-carol-{run}": topicDenied}},

		// CreateTopics: Create on the cluster or on the topic.
		{name: "CreateTopics with Create on the cluster", user: "bob", do: func(r *run) { createTopics(r, "new-bob-1") },
			want: outcome{"createtopic new-bob-1": ok, "createtopic new-bob-1 configs": topicDenied}},
		{name: "CreateTopics with Create on a prefix", user: "alice", do: func(r *run) { createTopics(r, "new-alice-1", "new-other") },
			want: outcome{"createtopic new-alice-1": ok, "createtopic new-alice-1 configs": topicDenied, "createtopic new-other": topicDenied, "createtopic new-other configs": ok}},
		{name: "CreateTopics without Create", user: "dave", do: func(r *run) { createTopics(r, "new-dave-1") },
			want: outcome{"createtopic new-dave-1": topicDenied, "createtopic new-dave-1 configs": ok}},
		{name: "CreateTopics by the super user", user: "admin", do: func(r *run) { createTopics(r, "new-admin-1") },
			want: outcome{"createtopic new-admin-1": ok, "createtopic new-admin-1 configs": ok}},

		// DeleteTopics: Delete on the topic.
		{name: "DeleteTopics with Delete on a prefix", user: "alice",
			prep: func(h *harness, tok string) { h.createTopic("del-alice-" + tok) }, do: func(r *run) { deleteTopics(r, r.n("del-alice")) },
			clean: func(h *harness, tok string) { h.deleteTopic("del-alice-" + tok) },
			want:  outcome{"deletetopic del-alice-{run}": ok}},
		{name: "DeleteTopics without Delete", user: "bob",
			prep: func(h *harness, tok string) { h.createTopic("del-alice-" + tok) }, do: func(r *run) { deleteTopics(r, r.n("del-alice")) },
			clean: func(h *harness, tok string) { h.deleteTopic("del-alice-" + tok) },
			want:  outcome{"deletetopic del-alice-{run}": topicDenied}},

		// CreatePartitions: Alter on the topic.
		{name: "CreatePartitions with Alter", user: "alice", do: func(r *run) { createPartitions(r, "t-alice") },
			want: outcome{"createpartitions t-alice": ok}},
		{name: "CreatePartitions without Alter", user: "bob", do: func(r *run) { createPartitions(r, "t-alice", "p-data-1") },
			want: outcome{"createpartitions t-alice": topicDenied, "createpartitions p-data-1": topicDenied}},

		// Configs: DescribeConfigs (implied by AlterConfigs) and
		// AlterConfigs, on the topic or the cluster.
		{name: "DescribeConfigs of topics and the broker", user: "alice", do: func(r *run) {
			describeConfigs(r, topicRes("t-alice"), topicRes("t-shared"), brokerRes("1"))
		}, want: outcome{"describeconfigs topic:t-alice": ok, "describeconfigs topic:t-shared": topicDenied, "describeconfigs broker:1": clusterDeny}},
		{name: "DescribeConfigs implied by AlterConfigs, and on the cluster", user: "bob", do: func(r *run) {
			describeConfigs(r, topicRes("t-alice"), brokerRes("1"))
		}, want: outcome{"describeconfigs topic:t-alice": ok, "describeconfigs broker:1": ok}},
		{name: "IncrementalAlterConfigs", user: "bob", do: func(r *run) {
			alterConfigs(r, topicRes("t-alice"), topicRes("p-data-1"), brokerRes("1"))
		}, want: outcome{"alterconfigs topic:t-alice": ok, "alterconfigs topic:p-data-1": topicDenied, "alterconfigs broker:1": clusterDeny}},
		{name: "IncrementalAlterConfigs by the super user", user: "admin", do: func(r *run) {
			alterConfigs(r, topicRes("t-alice"), brokerRes("1"))
		}, want: outcome{"alterconfigs topic:t-alice": ok, "alterconfigs broker:1": ok}},

		// Groups.
		{name: "FindCoordinator for groups", user: "bob", do: func(r *run) { findCoordinator(r, 0, "g-bob", "g-alice") },
			want: outcome{"findcoordinator g-bob": ok, "findcoordinator g-alice": groupDenied}},
		{name: "JoinGroup with Read on the group", user: "alice", do: func(r *run) { joinGroup(r, "g-alice") },
			want: outcome{"join g-alice": memberIDReq}},
		{name: "JoinGroup with Describe only", user: "bob", do: func(r *run) { joinGroup(r, "g-bob") },
			want: outcome{"join g-bob": groupDenied}},
		{name: "OffsetCommit", user: "alice", do: func(r *run) { offsetCommit(r, "commit", "g-alice", "t-alice", "p-data-1") },
			want: outcome{"commit g-alice t-alice/0": ok, "commit g-alice p-data-1/0": topicDenied}},
		{name: "OffsetCommit to a group without Read", user: "alice", do: func(r *run) { offsetCommit(r, "commit", "g-bob", "t-alice") },
			want: outcome{"commit g-bob t-alice/0": groupDenied}},
		{name: "OffsetFetch", user: "alice", do: func(r *run) { offsetFetch(r, "g-alice", "t-alice", "p-data-1") },
			want: outcome{"offsetfetch g-alice": ok, "offsetfetch g-alice t-alice/0": ok, "offsetfetch g-alice p-data-1/0": topicDenied}},
		{name: "OffsetFetch with Describe on the group, not the topic", user: "bob", do: func(r *run) { offsetFetch(r, "g-bob", "t-alice") },
			want: outcome{"offsetfetch g-bob": ok, "offsetfetch g-bob t-alice/0": topicDenied}},
		{name: "OffsetFetch without Describe on the group", user: "dave", do: func(r *run) { offsetFetch(r, "g-alice", "t-shared") },
			want: outcome{"offsetfetch g-alice": groupDenied}},
		{name: "SyncGroup, Heartbeat and LeaveGroup with Read on the group", user: "alice", do: func(r *run) {
			syncGroup(r, "g-alice")
			heartbeat(r, "g-alice")
			leaveGroup(r, "g-alice")
		}, want: outcome{"sync g-alice": code(25), "heartbeat g-alice": code(25), "leave g-alice": ok, "leave g-alice member m": code(25)}},
		{name: "SyncGroup, Heartbeat and LeaveGroup without Read", user: "dave", do: func(r *run) {
			syncGroup(r, "g-alice")
			heartbeat(r, "g-alice")
			leaveGroup(r, "g-alice")
		}, want: outcome{"sync g-alice": groupDenied, "heartbeat g-alice": groupDenied, "leave g-alice": groupDenied}},
		// The consumer protocol: Read on the group, Describe on every
		// subscribed topic.
		{name: "ConsumerGroupHeartbeat", user: "alice", do: func(r *run) { consumerGroupJoin(r, r.n("g-alice-cg"), "t-alice") },
			clean: func(h *harness, tok string) { h.deleteGroup("g-alice-cg-" + tok) },
			want:  outcome{"consumergroupheartbeat g-alice-cg-{run}": ok, "consumergroupheartbeat g-alice-cg-{run} leave": ok}},
		{name: "ConsumerGroupHeartbeat subscribed to a topic not described", user: "alice", do: func(r *run) { consumerGroupJoin(r, r.n("g-alice-cg"), "t-alice", "p-data-1") },
			clean: func(h *harness, tok string) { h.deleteGroup("g-alice-cg-" + tok) },
			want:  outcome{"consumergroupheartbeat g-alice-cg-{run}": topicDenied}},
		{name: "ConsumerGroupHeartbeat without Read on the group", user: "dave", do: func(r *run) { consumerGroupJoin(r, r.n("g-alice-cg"), "t-shared") },
			clean: func(h *harness, tok string) { h.deleteGroup("g-alice-cg-" + tok) },
			want:  outcome{"consumergroupheartbeat g-alice-cg-{run}": groupDenied}},
		{name: "ListGroups with Describe on the cluster", user: "bob", do: listGroups,
			want: outcome{"listgroups": ok, "groups": "[g-alice, g-bob]"}},
		{name: "ListGroups filtered by Read on a prefix", user: "alice", do: listGroups,
			want: outcome{"listgroups": ok, "groups": "[g-alice]"}},
		{name: "ListGroups filtered by Describe on *", user: "carol", do: listGroups,
			want: outcome{"listgroups": ok, "groups": "[g-alice, g-bob]"}},
		{name: "ListGroups with no group allowed", user: "dave", do: listGroups,
			want: outcome{"listgroups": ok, "groups": "[]"}},
		{name: "DescribeGroups", user: "alice", do: func(r *run) { describeGroups(r, "g-alice", "g-bob") },
			want: outcome{"describegroup g-alice": ok, "describegroup g-bob": groupDenied}},
		{name: "DeleteGroups with Delete on a prefix", user: "alice",
			prep: func(h *harness, tok string) { h.commit("g-alice-del-"+tok, "t-alice") }, do: func(r *run) { deleteGroups(r, r.n("g-alice-del")) },
			clean: func(h *harness, tok string) { h.deleteGroup("g-alice-del-" + tok) },
			want:  outcome{"deletegroup g-alice-del-{run}": ok}},
		{name: "DeleteGroups without Delete", user: "alice", do: func(r *run) { deleteGroups(r, "g-alice", "g-bob") },
			want: outcome{"deletegroup g-alice": groupDenied, "deletegroup g-bob": groupDenied}},
		{name: "OffsetDelete", user: "alice",
			prep: func(h *harness, tok string) { h.commit("g-alice-del-"+tok, "t-alice") }, do: func(r *run) { offsetDelete(r, r.n("g-alice-del"), "t-alice", "p-data-1") },
			clean: func(h *harness, tok string) { h.deleteGroup("g-alice-del-" + tok) },
			want:  outcome{"offsetdelete g-alice-del-{run}": ok, "offsetdelete g-alice-del-{run} t-alice/0": ok, "offsetdelete g-alice-del-{run} p-data-1/0": topicDenied}},
		{name: "OffsetDelete without Delete on the group", user: "alice", do: func(r *run) { offsetDelete(r, "g-alice", "t-alice") },
			want: outcome{"offsetdelete g-alice": groupDenied}},

		// ListOffsets: Describe; DeleteRecords: Delete.
		{name: "ListOffsets", user: "alice", do: func(r *run) { listOffsets(r, "t-alice", "t-secret", "p-data-1", "t-public") },
			want: outcome{"listoffsets t-alice/0": ok, "listoffsets t-secret/0": topicDenied, "listoffsets p-data-1/0": topicDenied, "listoffsets t-public/0": ok}},
		{name: "DescribeProducers: Read on the topic", user: "alice", do: func(r *run) { describeProducers(r, "t-alice", "p-data-1", "t-public") },
			want: outcome{"describeproducers t-alice/0": ok, "describeproducers p-data-1/0": topicDenied, "describeproducers t-public/0": topicDenied}},
		{name: "DescribeTopicPartitions", user: "alice", do: func(r *run) { describeTopicPartitions(r, "t-alice", "t-secret", "nope") },
			want: outcome{"describetopicpartitions t-alice": ok, "describetopicpartitions t-secret": topicDenied, "describetopicpartitions nope": topicDenied}},
		// A topic that does not exist: 29 unless the principal may
		// describe it (or delete it), then 3.
		{name: "ListOffsets of missing topics", user: "dave", do: func(r *run) { listOffsets(r, "auto-dave-none", "nope") },
			want: outcome{"listoffsets auto-dave-none/0": unknown, "listoffsets nope/0": topicDenied}},
		{name: "DeleteTopics of missing topics", user: "alice", do: func(r *run) { deleteTopics(r, "del-alice-none", "nope") },
			want: outcome{"deletetopic del-alice-none": unknown, "deletetopic nope": topicDenied}},
		{name: "DeleteRecords", user: "alice", do: func(r *run) { deleteRecords(r, "t-alice", "t-shared") },
			want: outcome{"deleterecords t-alice/0": ok, "deleterecords t-shared/0": topicDenied}},

		// ACLs: DescribeAcls needs Describe on the cluster.
		{name: "DescribeAcls, every ACL", user: "bob", do: func(r *run) { describeACLs(r, "acls", anyFilter()) },
			want: outcome{"acls code": ok, "acls": fileACLs(nil)}},
		{name: "DescribeAcls of one principal's topics", user: "bob", do: func(r *run) {
			f := anyFilter()
			f.ResourceType, f.Principal = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("User:alice")
			describeACLs(r, "acls", f)
		}, want: outcome{"acls code": ok, "acls": fileACLs(func(b acl.Binding) bool { return b.Principal == "User:alice" && b.ResourceType == acl.Topic })}},
		{name: "DescribeAcls matching a topic name", user: "admin", do: func(r *run) {
			f := anyFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("auto-alice-x"), kmsg.ACLResourcePatternTypeMatch
			describeACLs(r, "acls", f)
		}, want: outcome{"acls code": ok, "acls": fileACLs(func(b acl.Binding) bool {
			return b.ResourceType == acl.Topic && b.PatternType == acl.Prefixed && b.ResourceName == "auto-alice-"
		})}},
		{name: "DescribeAcls without Describe on the cluster", user: "alice", do: func(r *run) { describeACLs(r, "acls", anyFilter()) },
			want: outcome{"acls code": clusterDeny, "acls": ""}},

		// CreateAcls and DeleteAcls: Alter on the cluster. The proxy
		// keeps its ACLs in its file and refuses both.
		{name: "CreateAcls without Alter", user: "bob", refused: true, do: func(r *run) {
			createACLs(r, acl.Binding{ResourceType: acl.Topic, ResourceName: "t-x", PatternType: acl.Literal, Principal: "User:bob", Host: "*", Operation: acl.Read, Permission: acl.Allow})
		}, want: outcome{"createacl 0": clusterDeny}},
		{name: "DeleteAcls without Alter", user: "alice", refused: true, do: func(r *run) { deleteACLs(r, "User:alice") },
			want: outcome{"deleteacls User:alice": clusterDeny, "deleteacls User:alice matched": "0"}},
		{name: "CreateAcls and DeleteAcls by the super user", user: "admin", refused: true, do: func(r *run) {
			createACLs(r, acl.Binding{ResourceType: acl.Topic, ResourceName: "t-x", PatternType: acl.Literal, Principal: "User:nobody", Host: "*", Operation: acl.Read, Permission: acl.Allow})
			deleteACLs(r, "User:nobody")
		}, clean: func(h *harness, _ string) { h.setACLs() },
			want: outcome{"createacl 0": ok, "deleteacls User:nobody": ok, "deleteacls User:nobody matched": "1"}},
	}
	return cs
}

// fileACLs gives the bindings of the ACL file that keep says to, as
// describeACLs records them.
func fileACLs(keep func(acl.Binding) bool) string {
	set, err := acl.Load(aclFile)
	if err != nil {
		panic(err)
	}
	var lines []string
	for _, b := range set.Bindings() {
		if keep == nil || keep(b) {
			lines = append(lines, b.String())
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// javaWant is what Kafka's Java clients see (AuthzClients.java): "ok", a
// list, or the exception raised.
var javaWant = outcome{
	"admin listTopics alice":                            "[t-alice, t-public, t-shared]",
	"admin listTopics bob":                              "[p-data-1, p-data-2, t-host, t-public, t-shared]",
	"admin listTopics dave":                             "[t-public, t-shared]",
	"admin describeAcls alice":                          "ClusterAuthorizationException",
	"admin describeAcls bob":                            strings.ReplaceAll(fileACLs(nil), "\n", " | "),
	"admin createTopics alice new-alice-j":              "ok",
	"admin createTopics alice new-other-j":              "TopicAuthorizationException",
	"admin deleteConsumerGroups alice g-alice":          "GroupAuthorizationException",
	"producer alice t-alice":                            "ok",
	"producer alice t-shared":                           "TopicAuthorizationException",
	"producer idempotent alice t-alice":                 "ok",
	"producer idempotent carol t-public":                "TopicAuthorizationException",
	"producer idempotent dave t-public":                 "ClusterAuthorizationException",
	"transaction alice tx-alice":                        "ok",
	"transaction bob tx-alice":                          "TransactionalIdAuthorizationException",
	"consumer alice g-alice-{run} t-alice":              "ok",
	"consumer bob g-bob t-host":                         "GroupAuthorizationException",
	"consumer dave g-alice t-shared":                    "GroupAuthorizationException",
	"consumer protocol alice g-alice-cg-{run} t-alice":  "ok",
	"consumer protocol alice g-alice-cg-{run} p-data-1": "TopicAuthorizationException",
	"consumer protocol dave g-alice t-shared":           "GroupAuthorizationException",
}
