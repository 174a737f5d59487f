package authz

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
)

// The operations the cases are made of: each sends one request as the
// case's principal and records the codes of every topic, partition and
// group in its answer.

func pt(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func produceTopics(r *run, topics []string, txnID *string, pid int64, epoch int16) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = 1, 10000, txnID
	for _, n := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = n, r.topicID(n)
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = batch(pid, epoch, 0, txnID != nil)
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("produce", req).(*kmsg.ProduceResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("produce "+pt(r.topicName(t.TopicID, t.Topic), p.Partition), p.ErrorCode)
		}
	}
}

func produce(r *run, topics ...string) { produceTopics(r, topics, nil, -1, -1) }

func fetch(r *run, topics ...string) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 1<<20, -1
	for _, n := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = n, r.topicID(n)
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes, p.LogStartOffset, p.CurrentLeaderEpoch = 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("fetch", req).(*kmsg.FetchResponse)
	if resp == nil {
		return
	}
	if resp.ErrorCode != 0 {
		r.code("fetch", resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("fetch "+pt(r.topicName(t.TopicID, t.Topic), p.Partition), p.ErrorCode)
		}
	}
}

// metadataAll records the topics an all-topics Metadata shows.
func metadataAll(r *run) {
	req := kmsg.NewPtrMetadataRequest()
	resp, _ := r.req("topics", req).(*kmsg.MetadataResponse)
	if resp == nil {
		return
	}
	var names []string
	for _, t := range resp.Topics {
		n := ""
		if t.Topic != nil {
			n = *t.Topic
		}
		names = append(names, n+" "+code(t.ErrorCode))
	}
	sort.Strings(names)
	r.set("topics", "["+strings.Join(names, ", ")+"]")
}

func metadata(r *run, autoCreate bool, topics ...string) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = autoCreate
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("metadata", req).(*kmsg.MetadataResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		n := ""
		if t.Topic != nil {
			n = *t.Topic
		}
		r.code("metadata "+n, t.ErrorCode)
	}
}

// awaitTopic asks, without auto-creation, until the topic has a leader or
// a few seconds passed, and records the last answer.
func awaitTopic(r *run, topic string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, _ := r.req("afterwards "+topic, req).(*kmsg.MetadataResponse)
		if resp == nil || len(resp.Topics) != 1 {
			return
		}
		t := resp.Topics[0]
		c := t.ErrorCode
		if c == 0 && (len(t.Partitions) == 0 || t.Partitions[0].Leader < 0) {
			c = 5 // LEADER_NOT_AVAILABLE: created, not yet led
		}
		if c == 0 || time.Now().After(deadline) {
			r.code("afterwards "+topic, c)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// initProducerID records its code and gives the producer id and epoch.
func initProducerID(r *run, txnID *string) (int64, int16) {
	var pid int64
	var epoch int16
	c := until(r.ctx, func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = txnID, 10000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, _ := r.req("init", req).(*kmsg.InitProducerIDResponse)
		if resp == nil {
			return -1
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode
	})
	if c != -1 {
		r.code("init", c)
	}
	return pid, epoch
}

func addPartitions(r *run, txnID string, pid int64, epoch int16, topics ...string) {
	c := until(r.ctx, func() int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
		for _, n := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = n, []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		resp, _ := r.req("addpartitions", req).(*kmsg.AddPartitionsToTxnResponse)
		if resp == nil {
			return -1
		}
		var first int16
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				r.code("addpartitions "+pt(t.Topic, p.Partition), p.ErrorCode)
				if retriable(p.ErrorCode) {
					first = p.ErrorCode
				}
			}
		}
		return first
	})
	_ = c
}

func addOffsets(r *run, txnID string, pid int64, epoch int16, group string) {
	c := until(r.ctx, func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
		resp, _ := r.req("addoffsets "+group, req).(*kmsg.AddOffsetsToTxnResponse)
		if resp == nil {
			return -1
		}
		return resp.ErrorCode
	})
	if c != -1 {
		r.code("addoffsets "+group, c)
	}
}

func txnOffsetCommit(r *run, txnID string, pid int64, epoch int16, group string, topics ...string) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	for _, n := range topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = n, r.topicID(n)
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Offset, p.LeaderEpoch = 0, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("txncommit", req).(*kmsg.TxnOffsetCommitResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("txncommit "+group+" "+pt(r.topicName(t.TopicID, t.Topic), p.Partition), p.ErrorCode)
		}
	}
}

func endTxn(r *run, txnID string, pid int64, epoch int16, commit bool) {
	c := until(r.ctx, func() int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
		resp, _ := r.req("endtxn", req).(*kmsg.EndTxnResponse)
		if resp == nil {
			return -1
		}
		return resp.ErrorCode
	})
	if c != -1 {
		r.code("endtxn", c)
	}
}

func findCoordinator(r *run, typ int8, keys ...string) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = typ, keys
	resp, _ := r.req("findcoordinator", req).(*kmsg.FindCoordinatorResponse)
	if resp == nil {
		return
	}
	for _, c := range resp.Coordinators {
		r.code("findcoordinator "+c.Key, c.ErrorCode)
	}
}

func joinGroup(r *run, group string) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	req.Protocols = append(req.Protocols, p)
	resp, _ := r.req("join "+group, req).(*kmsg.JoinGroupResponse)
	if resp != nil {
		r.code("join "+group, resp.ErrorCode)
	}
}

func offsetCommit(r *run, key, group string, topics ...string) *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	for _, n := range topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = n, r.topicID(n)
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset, p.LeaderEpoch = 0, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req(key, req).(*kmsg.OffsetCommitResponse)
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code(key+" "+group+" "+pt(r.topicName(t.TopicID, t.Topic), p.Partition), p.ErrorCode)
		}
	}
	return resp
}

func offsetFetch(r *run, group string, topics ...string) {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	for _, n := range topics {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = n, r.topicID(n), []int32{0}
		g.Topics = append(g.Topics, rt)
	}
	req.Groups = append(req.Groups, g)
	resp, _ := r.req("offsetfetch "+group, req).(*kmsg.OffsetFetchResponse)
	if resp == nil {
		return
	}
	for _, g := range resp.Groups {
		r.code("offsetfetch "+g.Group, g.ErrorCode)
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				r.code("offsetfetch "+g.Group+" "+pt(r.topicName(t.TopicID, t.Topic), p.Partition), p.ErrorCode)
			}
		}
	}
}

// listGroups records the groups ListGroups shows, among those the cases
// made (other tests' groups do not count).
func listGroups(r *run) {
	resp, _ := r.req("groups", kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if resp == nil {
		return
	}
	var names []string
	for _, g := range resp.Groups {
		names = append(names, g.Group)
	}
	sort.Strings(names)
	r.code("listgroups", resp.ErrorCode)
	r.set("groups", "["+strings.Join(names, ", ")+"]")
}

func describeGroups(r *run, groups ...string) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	resp, _ := r.req("describegroups", req).(*kmsg.DescribeGroupsResponse)
	if resp == nil {
		return
	}
	for _, g := range resp.Groups {
		r.code("describegroup "+g.Group, g.ErrorCode)
	}
}

func deleteGroups(r *run, groups ...string) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = groups
	resp, _ := r.req("deletegroups", req).(*kmsg.DeleteGroupsResponse)
	if resp == nil {
		return
	}
	for _, g := range resp.Groups {
		r.code("deletegroup "+g.Group, g.ErrorCode)
	}
}

func offsetDelete(r *run, group string, topics ...string) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	for _, n := range topics {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = n
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("offsetdelete "+group, req).(*kmsg.OffsetDeleteResponse)
	if resp == nil {
		return
	}
	r.code("offsetdelete "+group, resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("offsetdelete "+group+" "+pt(t.Topic, p.Partition), p.ErrorCode)
		}
	}
}

func listOffsets(r *run, topics ...string) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, n := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = n
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp, p.CurrentLeaderEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("listoffsets", req).(*kmsg.ListOffsetsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("listoffsets "+pt(t.Topic, p.Partition), p.ErrorCode)
		}
	}
}

// deleteRecords deletes before offset 0, which deletes nothing: what is
// checked is the authorization, and a later fetch from offset 0 still
// finds its records.
func deleteRecords(r *run, topics ...string) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	for _, n := range topics {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = n
		p := kmsg.NewDeleteRecordsRequestTopicPartition()
		p.Offset = 0
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("deleterecords", req).(*kmsg.DeleteRecordsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("deleterecords "+pt(t.Topic, p.Partition), p.ErrorCode)
		}
	}
}

// createTopics validates only: what is checked is the authorization, and
// both runs may ask for the same names.
func createTopics(r *run, topics ...string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = 10000, true
	for _, n := range topics {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, ct)
	}
	resp, _ := r.req("createtopics", req).(*kmsg.CreateTopicsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		r.code("createtopic "+t.Topic, t.ErrorCode)
		// Without DescribeConfigs on the topic Kafka leaves its
		// configs out and says why here.
		r.code("createtopic "+t.Topic+" configs", t.ConfigErrorCode)
	}
}

func deleteTopics(r *run, topics ...string) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	for _, n := range topics {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, dt)
	}
	req.TopicNames = topics
	resp, _ := r.req("deletetopics", req).(*kmsg.DeleteTopicsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		n := ""
		if t.Topic != nil {
			n = *t.Topic
		}
		r.code("deletetopic "+n, t.ErrorCode)
	}
}

func createPartitions(r *run, topics ...string) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis, req.ValidateOnly = 10000, true
	for _, n := range topics {
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = n, 2
		req.Topics = append(req.Topics, ct)
	}
	resp, _ := r.req("createpartitions", req).(*kmsg.CreatePartitionsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		r.code("createpartitions "+t.Topic, t.ErrorCode)
	}
}

// resource is a config resource: a topic by name, a broker by id.
type resource struct {
	typ  kmsg.ConfigResourceType
	name string
}

func topicRes(n string) resource  { return resource{kmsg.ConfigResourceTypeTopic, n} }
func brokerRes(n string) resource { return resource{kmsg.ConfigResourceTypeBroker, n} }

func (x resource) String() string {
	if x.typ == kmsg.ConfigResourceTypeBroker {
		return "broker:" + x.name
	}
	return "topic:" + x.name
}

func describeConfigs(r *run, rs ...resource) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, x := range rs {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = x.typ, x.name
		req.Resources = append(req.Resources, rr)
	}
	resp, _ := r.req("describeconfigs", req).(*kmsg.DescribeConfigsResponse)
	if resp == nil {
		return
	}
	for _, x := range resp.Resources {
		r.code("describeconfigs "+resource{x.ResourceType, x.ResourceName}.String(), x.ErrorCode)
	}
}

// alterConfigs validates only, setting a value that is the default.
func alterConfigs(r *run, rs ...resource) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = true
	for _, x := range rs {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = x.typ, x.name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op = kmsg.IncrementalAlterConfigOpSet
		if x.typ == kmsg.ConfigResourceTypeBroker {
			c.Name, c.Value = "log.cleaner.threads", kmsg.StringPtr("1")
		} else {
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
		}
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
	}
	resp, _ := r.req("alterconfigs", req).(*kmsg.IncrementalAlterConfigsResponse)
	if resp == nil {
		return
	}
	for _, x := range resp.Resources {
		r.code("alterconfigs "+resource{x.ResourceType, x.ResourceName}.String(), x.ErrorCode)
	}
}

func anyFilter() *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req
}

// describeACLs records the code and the bindings described, one a line,
// sorted, as Kafka's tools print them.
func describeACLs(r *run, key string, req *kmsg.DescribeACLsRequest) {
	resp, _ := r.req(key, req).(*kmsg.DescribeACLsResponse)
	if resp == nil {
		return
	}
	r.code(key+" code", resp.ErrorCode)
	var lines []string
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			lines = append(lines, acl.Binding{
				ResourceType: acl.ResourceType(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: acl.PatternType(res.ResourcePatternType), Principal: a.Principal, Host: a.Host,
				Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.PermissionType),
			}.String())
		}
	}
	sort.Strings(lines)
	r.set(key, strings.Join(lines, "\n"))
}

func createACLs(r *run, bs ...acl.Binding) {
	set, err := acl.NewSet(bs)
	if err != nil {
		r.t.Fatal(err)
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = creations(set)
	resp, _ := r.req("createacls", req).(*kmsg.CreateACLsResponse)
	if resp == nil {
		return
	}
	for i, x := range resp.Results {
		k := fmt.Sprintf("createacl %d", i)
		r.code(k, x.ErrorCode)
		r.message(k, x.ErrorMessage)
	}
}

func deleteACLs(r *run, principal string) {
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	f.Principal = kmsg.StringPtr(principal)
	req.Filters = append(req.Filters, f)
	resp, _ := r.req("deleteacls", req).(*kmsg.DeleteACLsResponse)
	if resp == nil {
		return
	}
	for _, x := range resp.Results {
		r.code("deleteacls "+principal, x.ErrorCode)
		r.message("deleteacls "+principal, x.ErrorMessage)
		r.set("deleteacls "+principal+" matched", fmt.Sprint(len(x.MatchingACLs)))
	}
}

func syncGroup(r *run, group string) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID = group, 1, "m"
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	resp, _ := r.req("sync "+group, req).(*kmsg.SyncGroupResponse)
	if resp != nil {
		r.code("sync "+group, resp.ErrorCode)
	}
}

func heartbeat(r *run, group string) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = group, 1, "m"
	resp, _ := r.req("heartbeat "+group, req).(*kmsg.HeartbeatResponse)
	if resp != nil {
		r.code("heartbeat "+group, resp.ErrorCode)
	}
}

func leaveGroup(r *run, group string) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, "m"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = "m"
	req.Members = append(req.Members, m)
	resp, _ := r.req("leave "+group, req).(*kmsg.LeaveGroupResponse)
	if resp == nil {
		return
	}
	r.code("leave "+group, resp.ErrorCode)
	for _, m := range resp.Members {
		r.code("leave "+group+" member "+m.MemberID, m.ErrorCode)
	}
}

// listTransactions records the transactional ids listed, among those
// the cases make.
func listTransactions(r *run) {
	resp, _ := r.req("listtransactions", kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if resp == nil {
		return
	}
	var ids []string
	for _, x := range resp.TransactionStates {
		if strings.HasPrefix(x.TransactionalID, "tx-") {
			ids = append(ids, x.TransactionalID)
		}
	}
	sort.Strings(ids)
	r.code("listtransactions", resp.ErrorCode)
	r.set("transactions", "["+strings.Join(ids, ", ")+"]")
}

func describeTransactions(r *run, ids ...string) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	resp, _ := r.req("describetransactions", req).(*kmsg.DescribeTransactionsResponse)
	if resp == nil {
		return
	}
	for _, x := range resp.TransactionStates {
		r.code("describetransaction "+x.TransactionalID, x.ErrorCode)
	}
}

func describeProducers(r *run, topics ...string) {
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, n := range topics {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = n, []int32{0}
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("describeproducers", req).(*kmsg.DescribeProducersResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.code("describeproducers "+pt(t.Topic, p.Partition), p.ErrorCode)
		}
	}
}

func describeTopicPartitions(r *run, topics ...string) {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 100
	for _, n := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("describetopicpartitions", req).(*kmsg.DescribeTopicPartitionsResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		n := ""
		if t.Topic != nil {
			n = *t.Topic
		}
		r.code("describetopicpartitions "+n, t.ErrorCode)
	}
}

// authorizedOps writes an authorized-operations field as the operations
// it names; Kafka's "not asked" value (the lowest int32) as itself.
func authorizedOps(v int32) string {
	if v == math.MinInt32 {
		return "not given"
	}
	var ops []string
	for op := acl.Operation(0); op < 32; op++ {
		if v&(1<<uint(op)) != 0 {
			ops = append(ops, op.String())
		}
	}
	return "[" + strings.Join(ops, " ") + "]"
}

// metadataOps records each named topic's code and authorized operations.
func metadataOps(r *run, topics ...string) {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := r.req("metadata", req).(*kmsg.MetadataResponse)
	if resp == nil {
		return
	}
	for _, t := range resp.Topics {
		n := ""
		if t.Topic != nil {
			n = *t.Topic
		}
		r.code("metadata "+n, t.ErrorCode)
		r.set("operations "+n, authorizedOps(t.AuthorizedOperations))
	}
}

func describeClusterOps(r *run) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, _ := r.req("describecluster", req).(*kmsg.DescribeClusterResponse)
	if resp == nil {
		return
	}
	r.code("describecluster", resp.ErrorCode)
	r.set("operations cluster", authorizedOps(resp.ClusterAuthorizedOperations))
}

func describeGroupsOps(r *run, groups ...string) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups, req.IncludeAuthorizedOperations = groups, true
	resp, _ := r.req("describegroups", req).(*kmsg.DescribeGroupsResponse)
	if resp == nil {
		return
	}
	for _, g := range resp.Groups {
		r.code("describegroup "+g.Group, g.ErrorCode)
		r.set("operations "+g.Group, authorizedOps(g.AuthorizedOperations))
	}
}

func (r *run) message(key string, m *string) {
	if m == nil {
		return
	}
	if r.msgs == nil {
		r.msgs = map[string]string{}
	}
	r.msgs[key] = *m
}

// consumerGroupJoin joins a consumer group with the consumer protocol
// (KIP-848), subscribed to topics, and leaves it again when it got in.
func consumerGroupJoin(r *run, group string, topics ...string) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, "authz-member-"+r.tok, 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 10000, topics
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	key := "consumergroupheartbeat " + group
	resp, _ := r.req(key, req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp == nil {
		return
	}
	r.code(key, resp.ErrorCode)
	if resp.ErrorCode == 0 {
		leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		leave.Group, leave.MemberID, leave.MemberEpoch = group, req.MemberID, -1
		if l, _ := r.req(key+" leave", leave).(*kmsg.ConsumerGroupHeartbeatResponse); l != nil {
			r.code(key+" leave", l.ErrorCode)
		}
	}
}
