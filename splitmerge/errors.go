package splitmerge

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors Split and Merge return. Each is a fault of the caller or of what
// it was given, never of the client's request, which is always answered.
var (
	// ErrNoBrokers: the view knows no broker, so a request that any or
	// every broker answers has nowhere to go. The proxy splits nothing
	// before its first metadata.
	ErrNoBrokers = errors.New("splitmerge: the view knows no broker")
	// ErrResults: Merge was given a result per part that does not
	// match the plan (count, key or version).
	ErrResults = errors.New("splitmerge: results do not match the plan")
	// ErrCannotAnswer: every part failed, and the response at this
	// version has no field that could tell the client so (Metadata for
	// all topics). The proxy ends the client connection, as a broker
	// that cannot answer would.
	ErrCannotAnswer = errors.New("splitmerge: no faithful answer")
)

// ErrorResponse returns the response to req, at req's version, that
// answers every entry it names (partition, group, transactional id,
// resource, ...) with code, and the request as a whole too where the
// response has a top-level error for it; msg goes in every error message
// field the version carries, unless it is empty. Entries keep the
// request's order, with Kafka's values for an error (offsets -1, no
// leader, ...).
//
// The top-level error of a Fetch response speaks of the fetch session,
// and that of Metadata v13 asks the client to rebootstrap; neither is set.
// A response whose only errors are per entry answers a request that names
// no entry with no error, as Kafka does.
func ErrorResponse(req kmsg.Request, code int16, msg string) kmsg.Response {
	var m *string
	if msg != "" {
		m = &msg
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp.(*kmsg.ProduceResponse).Topics = produceShape.answerAll(r.Topics, code)
	case *kmsg.FetchRequest:
		resp.(*kmsg.FetchResponse).Topics = fetchShape.answerAll(r.Topics, code)
	case *kmsg.ListOffsetsRequest:
		resp.(*kmsg.ListOffsetsResponse).Topics = listOffsetsShape.answerAll(r.Topics, code)
	case *kmsg.MetadataRequest:
		errMetadata(r, resp.(*kmsg.MetadataResponse), code)
	case *kmsg.LeaderAndISRRequest:
		resp.(*kmsg.LeaderAndISRResponse).ErrorCode = code
	case *kmsg.StopReplicaRequest:
		resp.(*kmsg.StopReplicaResponse).ErrorCode = code
	case *kmsg.UpdateMetadataRequest:
		resp.(*kmsg.UpdateMetadataResponse).ErrorCode = code
	case *kmsg.ControlledShutdownRequest:
		resp.(*kmsg.ControlledShutdownResponse).ErrorCode = code
	case *kmsg.OffsetCommitRequest:
		errOffsetCommit(r, resp.(*kmsg.OffsetCommitResponse), code)
	case *kmsg.OffsetFetchRequest:
		errOffsetFetch(r, resp.(*kmsg.OffsetFetchResponse), code)
	case *kmsg.FindCoordinatorRequest:
		errFindCoordinator(r, resp.(*kmsg.FindCoordinatorResponse), code, m)
	case *kmsg.JoinGroupRequest:
		resp.(*kmsg.JoinGroupResponse).ErrorCode = code
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = code
	case *kmsg.LeaveGroupRequest:
		// Kafka sets the top-level error alone for a request the
		// coordinator did not take.
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = code
	case *kmsg.SyncGroupRequest:
		resp.(*kmsg.SyncGroupResponse).ErrorCode = code
	case *kmsg.DescribeGroupsRequest:
		o := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			e := kmsg.NewDescribeGroupsResponseGroup()
			e.Group, e.ErrorCode, e.ErrorMessage = g, code, m
			o.Groups = append(o.Groups, e)
		}
	case *kmsg.ListGroupsRequest:
		resp.(*kmsg.ListGroupsResponse).ErrorCode = code
	case *kmsg.SASLHandshakeRequest:
		resp.(*kmsg.SASLHandshakeResponse).ErrorCode = code
	case *kmsg.ApiVersionsRequest:
		resp.(*kmsg.ApiVersionsResponse).ErrorCode = code
	case *kmsg.CreateTopicsRequest:
		o := resp.(*kmsg.CreateTopicsResponse)
		for i := range r.Topics {
			o.Topics = append(o.Topics, createTopicError(r.Topics[i].Topic, code, m))
		}
	case *kmsg.DeleteTopicsRequest:
		errDeleteTopics(r, resp.(*kmsg.DeleteTopicsResponse), code, m)
	case *kmsg.DeleteRecordsRequest:
		resp.(*kmsg.DeleteRecordsResponse).Topics = deleteRecordsShape.answerAll(r.Topics, code)
	case *kmsg.InitProducerIDRequest:
		o := resp.(*kmsg.InitProducerIDResponse)
		o.ErrorCode, o.ProducerID, o.ProducerEpoch = code, -1, -1
	case *kmsg.OffsetForLeaderEpochRequest:
		resp.(*kmsg.OffsetForLeaderEpochResponse).Topics = epochShape.answerAll(r.Topics, code)
	case *kmsg.AddPartitionsToTxnRequest:
		errAddPartitionsToTxn(r, resp.(*kmsg.AddPartitionsToTxnResponse), code)
	case *kmsg.AddOffsetsToTxnRequest:
		resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode = code
	case *kmsg.EndTxnRequest:
		o := resp.(*kmsg.EndTxnResponse)
		o.ErrorCode, o.ProducerID, o.ProducerEpoch = code, -1, -1
	case *kmsg.WriteTxnMarkersRequest:
		errWriteTxnMarkers(r, resp.(*kmsg.WriteTxnMarkersResponse), code)
	case *kmsg.TxnOffsetCommitRequest:
		errTxnOffsetCommit(r, resp.(*kmsg.TxnOffsetCommitResponse), code)
	case *kmsg.DescribeACLsRequest:
		o := resp.(*kmsg.DescribeACLsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.CreateACLsRequest:
		o := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			e := kmsg.NewCreateACLsResponseResult()
			e.ErrorCode, e.ErrorMessage = code, m
			o.Results = append(o.Results, e)
		}
	case *kmsg.DeleteACLsRequest:
		o := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			e := kmsg.NewDeleteACLsResponseResult()
			e.ErrorCode, e.ErrorMessage = code, m
			o.Results = append(o.Results, e)
		}
	case *kmsg.DescribeConfigsRequest:
		o := resp.(*kmsg.DescribeConfigsResponse)
		for i := range r.Resources {
			o.Resources = append(o.Resources, describeConfigsError(&r.Resources[i], code, m))
		}
	case *kmsg.AlterConfigsRequest:
		o := resp.(*kmsg.AlterConfigsResponse)
		for i := range r.Resources {
			o.Resources = append(o.Resources, alterConfigsError(&r.Resources[i], code, m))
		}
	case *kmsg.AlterReplicaLogDirsRequest:
		errAlterReplicaLogDirs(r, resp.(*kmsg.AlterReplicaLogDirsResponse), code)
	case *kmsg.DescribeLogDirsRequest:
		errDescribeLogDirs(r, resp.(*kmsg.DescribeLogDirsResponse), code)
	case *kmsg.SASLAuthenticateRequest:
		o := resp.(*kmsg.SASLAuthenticateResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.CreatePartitionsRequest:
		o := resp.(*kmsg.CreatePartitionsResponse)
		for i := range r.Topics {
			o.Topics = append(o.Topics, createPartitionsError(r.Topics[i].Topic, code, m))
		}
	case *kmsg.CreateDelegationTokenRequest:
		resp.(*kmsg.CreateDelegationTokenResponse).ErrorCode = code
	case *kmsg.RenewDelegationTokenRequest:
		resp.(*kmsg.RenewDelegationTokenResponse).ErrorCode = code
	case *kmsg.ExpireDelegationTokenRequest:
		resp.(*kmsg.ExpireDelegationTokenResponse).ErrorCode = code
	case *kmsg.DescribeDelegationTokenRequest:
		resp.(*kmsg.DescribeDelegationTokenResponse).ErrorCode = code
	case *kmsg.DeleteGroupsRequest:
		o := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			e := kmsg.NewDeleteGroupsResponseGroup()
			e.Group, e.ErrorCode, e.ErrorMessage = g, code, m
			o.Groups = append(o.Groups, e)
		}
	case *kmsg.ElectLeadersRequest:
		errElectLeaders(r, resp.(*kmsg.ElectLeadersResponse), code, m)
	case *kmsg.IncrementalAlterConfigsRequest:
		o := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for i := range r.Resources {
			o.Resources = append(o.Resources, incrementalAlterConfigsError(&r.Resources[i], code, m))
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		o := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.ListPartitionReassignmentsRequest:
		o := resp.(*kmsg.ListPartitionReassignmentsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.OffsetDeleteRequest:
		// Kafka answers a request the coordinator did not take with
		// the top-level error and no partitions.
		resp.(*kmsg.OffsetDeleteResponse).ErrorCode = code
	case *kmsg.DescribeClientQuotasRequest:
		o := resp.(*kmsg.DescribeClientQuotasResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.AlterClientQuotasRequest:
		errAlterClientQuotas(r, resp.(*kmsg.AlterClientQuotasResponse), code, m)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		o := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		errAlterUserSCRAM(r, resp.(*kmsg.AlterUserSCRAMCredentialsResponse), code, m)
	case *kmsg.VoteRequest:
		resp.(*kmsg.VoteResponse).ErrorCode = code
	case *kmsg.BeginQuorumEpochRequest:
		resp.(*kmsg.BeginQuorumEpochResponse).ErrorCode = code
	case *kmsg.EndQuorumEpochRequest:
		resp.(*kmsg.EndQuorumEpochResponse).ErrorCode = code
	case *kmsg.DescribeQuorumRequest:
		o := resp.(*kmsg.DescribeQuorumResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.AlterPartitionRequest:
		resp.(*kmsg.AlterPartitionResponse).ErrorCode = code
	case *kmsg.UpdateFeaturesRequest:
		errUpdateFeatures(r, resp.(*kmsg.UpdateFeaturesResponse), code, m)
	case *kmsg.EnvelopeRequest:
		resp.(*kmsg.EnvelopeResponse).ErrorCode = code
	case *kmsg.FetchSnapshotRequest:
		resp.(*kmsg.FetchSnapshotResponse).ErrorCode = code
	case *kmsg.DescribeClusterRequest:
		o := resp.(*kmsg.DescribeClusterResponse)
		o.ErrorCode, o.ErrorMessage = code, m
		o.EndpointType = r.EndpointType
	case *kmsg.DescribeProducersRequest:
		resp.(*kmsg.DescribeProducersResponse).Topics = producersShape.answerAll(r.Topics, code)
	case *kmsg.BrokerRegistrationRequest:
		resp.(*kmsg.BrokerRegistrationResponse).ErrorCode = code
	case *kmsg.BrokerHeartbeatRequest:
		resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode = code
	case *kmsg.UnregisterBrokerRequest:
		o := resp.(*kmsg.UnregisterBrokerResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.DescribeTransactionsRequest:
		o := resp.(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			o.TransactionStates = append(o.TransactionStates, describeTransactionError(id, code))
		}
	case *kmsg.ListTransactionsRequest:
		resp.(*kmsg.ListTransactionsResponse).ErrorCode = code
	case *kmsg.AllocateProducerIDsRequest:
		resp.(*kmsg.AllocateProducerIDsResponse).ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatRequest:
		o := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.ConsumerGroupDescribeRequest:
		o := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range r.Groups {
			e := kmsg.NewConsumerGroupDescribeResponseGroup()
			e.Group, e.ErrorCode, e.ErrorMessage = g, code, m
			o.Groups = append(o.Groups, e)
		}
	case *kmsg.ControllerRegistrationRequest:
		o := resp.(*kmsg.ControllerRegistrationResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.GetTelemetrySubscriptionsRequest:
		o := resp.(*kmsg.GetTelemetrySubscriptionsResponse)
		o.ErrorCode, o.ClientInstanceID = code, r.ClientInstanceID
	case *kmsg.PushTelemetryRequest:
		resp.(*kmsg.PushTelemetryResponse).ErrorCode = code
	case *kmsg.AssignReplicasToDirsRequest:
		resp.(*kmsg.AssignReplicasToDirsResponse).ErrorCode = code
	case *kmsg.ListConfigResourcesRequest:
		resp.(*kmsg.ListConfigResourcesResponse).ErrorCode = code
	case *kmsg.DescribeTopicPartitionsRequest:
		o := resp.(*kmsg.DescribeTopicPartitionsResponse)
		for i := range r.Topics {
			o.Topics = append(o.Topics, describeTopicPartitionsError(r.Topics[i].Topic, code))
		}
	case *kmsg.ShareGroupHeartbeatRequest:
		o := resp.(*kmsg.ShareGroupHeartbeatResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.ShareGroupDescribeRequest:
		o := resp.(*kmsg.ShareGroupDescribeResponse)
		for _, g := range r.GroupIDs {
			e := kmsg.NewShareGroupDescribeResponseGroup()
			e.GroupID, e.ErrorCode, e.ErrorMessage = g, code, m
			o.Groups = append(o.Groups, e)
		}
	case *kmsg.ShareFetchRequest:
		o := resp.(*kmsg.ShareFetchResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.ShareAcknowledgeRequest:
		o := resp.(*kmsg.ShareAcknowledgeResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.AddRaftVoterRequest:
		o := resp.(*kmsg.AddRaftVoterResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.RemoveRaftVoterRequest:
		o := resp.(*kmsg.RemoveRaftVoterResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.UpdateRaftVoterRequest:
		resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode = code
	case *kmsg.InitializeShareGroupStateRequest:
		o := resp.(*kmsg.InitializeShareGroupStateResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			ot := kmsg.NewInitializeShareGroupStateResponseTopic()
			ot.TopicID = t.TopicID
			for j := range t.Partitions {
				p := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = t.Partitions[j].Partition, code, m
				ot.Partitions = append(ot.Partitions, p)
			}
			o.Topics = append(o.Topics, ot)
		}
	case *kmsg.ReadShareGroupStateRequest:
		o := resp.(*kmsg.ReadShareGroupStateResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			ot := kmsg.NewReadShareGroupStateResponseTopic()
			ot.TopicID = t.TopicID
			for j := range t.Partitions {
				p := kmsg.NewReadShareGroupStateResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = t.Partitions[j].Partition, code, m
				ot.Partitions = append(ot.Partitions, p)
			}
			o.Topics = append(o.Topics, ot)
		}
	case *kmsg.WriteShareGroupStateRequest:
		o := resp.(*kmsg.WriteShareGroupStateResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			ot := kmsg.NewWriteShareGroupStateResponseTopic()
			ot.TopicID = t.TopicID
			for j := range t.Partitions {
				p := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = t.Partitions[j].Partition, code, m
				ot.Partitions = append(ot.Partitions, p)
			}
			o.Topics = append(o.Topics, ot)
		}
	case *kmsg.DeleteShareGroupStateRequest:
		o := resp.(*kmsg.DeleteShareGroupStateResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			ot := kmsg.NewDeleteShareGroupStateResponseTopic()
			ot.TopicID = t.TopicID
			for j := range t.Partitions {
				p := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = t.Partitions[j].Partition, code, m
				ot.Partitions = append(ot.Partitions, p)
			}
			o.Topics = append(o.Topics, ot)
		}
	case *kmsg.ReadShareGroupStateSummaryRequest:
		o := resp.(*kmsg.ReadShareGroupStateSummaryResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			ot := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			ot.TopicID = t.TopicID
			for j := range t.Partitions {
				p := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = t.Partitions[j].Partition, code, m
				ot.Partitions = append(ot.Partitions, p)
			}
			o.Topics = append(o.Topics, ot)
		}
	case *kmsg.StreamsGroupHeartbeatRequest:
		o := resp.(*kmsg.StreamsGroupHeartbeatResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.StreamsGroupDescribeRequest:
		o := resp.(*kmsg.StreamsGroupDescribeResponse)
		for _, g := range r.Groups {
			e := kmsg.NewStreamsGroupDescribeResponseGroup()
			e.Group, e.ErrorCode, e.ErrorMessage = g, code, m
			o.Groups = append(o.Groups, e)
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		o := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for i := range r.Groups {
			o.Groups = append(o.Groups, shareOffsetsGroupError(r.Groups[i].GroupID, code, m))
		}
	case *kmsg.AlterShareGroupOffsetsRequest:
		o := resp.(*kmsg.AlterShareGroupOffsetsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.DeleteShareGroupOffsetsRequest:
		o := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
		o := resp.(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	case *kmsg.UnregisterControllerRequest:
		o := resp.(*kmsg.UnregisterControllerResponse)
		o.ErrorCode, o.ErrorMessage = code, m
	default:
		// TestErrorResponseEveryKey walks every key kmsg knows, so a
		// new one fails there before it reaches a client.
		panic(fmt.Sprintf("splitmerge: no error response for %T", req))
	}
	return resp
}

func produceError(partition int32, code int16, m *string) kmsg.ProduceResponseTopicPartition {
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.ErrorMessage, p.BaseOffset = partition, code, m, -1
	return p
}

func fetchError(partition int32, code int16) kmsg.FetchResponseTopicPartition {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.HighWatermark = partition, code, -1
	// Empty, not null, as Kafka sends them: kafka-python takes the
	// length of a partition's records whatever its error.
	p.RecordBatches = []byte{}
	return p
}

func listOffsetsError(partition int32, code int16) kmsg.ListOffsetsResponseTopicPartition {
	p := kmsg.NewListOffsetsResponseTopicPartition()
	p.Partition, p.ErrorCode = partition, code
	return p
}

func errMetadata(r *kmsg.MetadataRequest, o *kmsg.MetadataResponse, code int16) {
	for i := range r.Topics {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = r.Topics[i].Topic, r.Topics[i].TopicID, code
		o.Topics = append(o.Topics, t)
	}
}

func offsetCommitError(partition int32, code int16) kmsg.OffsetCommitResponseTopicPartition {
	p := kmsg.NewOffsetCommitResponseTopicPartition()
	p.Partition, p.ErrorCode = partition, code
	return p
}

func errOffsetCommit(r *kmsg.OffsetCommitRequest, o *kmsg.OffsetCommitResponse, code int16) {
	for i := range r.Topics {
		t := &r.Topics[i]
		ot := kmsg.NewOffsetCommitResponseTopic()
		ot.Topic, ot.TopicID = t.Topic, t.TopicID
		for j := range t.Partitions {
			ot.Partitions = append(ot.Partitions, offsetCommitError(t.Partitions[j].Partition, code))
		}
		o.Topics = append(o.Topics, ot)
	}
}

func errOffsetFetch(r *kmsg.OffsetFetchRequest, o *kmsg.OffsetFetchResponse, code int16) {
	// v2-v7 carry the group's error at the top; v0 and v1 only per
	// partition, which Kafka fills with the group's error; v8+ per group.
	o.ErrorCode = code
	if r.Version >= 8 {
		for i := range r.Groups {
			o.Groups = append(o.Groups, offsetFetchGroupError(r.Groups[i].Group, code))
		}
		return
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.ErrorCode = p, -1, code
			ot.Partitions = append(ot.Partitions, op)
		}
		o.Topics = append(o.Topics, ot)
	}
}

func offsetFetchGroupError(group string, code int16) kmsg.OffsetFetchResponseGroup {
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group, g.ErrorCode = group, code
	return g
}

func errFindCoordinator(r *kmsg.FindCoordinatorRequest, o *kmsg.FindCoordinatorResponse, code int16, m *string) {
	o.ErrorCode, o.ErrorMessage, o.NodeID, o.Port = code, m, -1, -1
	for _, k := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port, c.ErrorCode, c.ErrorMessage = k, -1, -1, code, m
		o.Coordinators = append(o.Coordinators, c)
	}
}

func createTopicError(topic string, code int16, m *string) kmsg.CreateTopicsResponseTopic {
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic, t.ErrorCode, t.ErrorMessage = topic, code, m
	t.NumPartitions, t.ReplicationFactor = -1, -1
	return t
}

func errDeleteTopics(r *kmsg.DeleteTopicsRequest, o *kmsg.DeleteTopicsResponse, code int16, m *string) {
	if r.Version < 6 {
		for _, name := range r.TopicNames {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = kmsg.StringPtr(name), code, m
			o.Topics = append(o.Topics, t)
		}
		return
	}
	for i := range r.Topics {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode, t.ErrorMessage = r.Topics[i].Topic, r.Topics[i].TopicID, code, m
		o.Topics = append(o.Topics, t)
	}
}

func deleteRecordsError(partition int32, code int16) kmsg.DeleteRecordsResponseTopicPartition {
	p := kmsg.NewDeleteRecordsResponseTopicPartition()
	p.Partition, p.ErrorCode, p.LowWatermark = partition, code, -1
	return p
}

func offsetForLeaderEpochError(partition int32, code int16) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset = partition, code, -1, -1
	return p
}

func errAddPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest, o *kmsg.AddPartitionsToTxnResponse, code int16) {
	o.ErrorCode = code // v4+: the request as a whole
	if r.Version >= 4 {
		for i := range r.Transactions {
			o.Transactions = append(o.Transactions, addPartitionsTxnError(&r.Transactions[i], code))
		}
		return
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		ot := kmsg.NewAddPartitionsToTxnResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			op.Partition, op.ErrorCode = p, code
			ot.Partitions = append(ot.Partitions, op)
		}
		o.Topics = append(o.Topics, ot)
	}
}

func addPartitionsTxnError(t *kmsg.AddPartitionsToTxnRequestTransaction, code int16) kmsg.AddPartitionsToTxnResponseTransaction {
	ot := kmsg.NewAddPartitionsToTxnResponseTransaction()
	ot.TransactionalID = t.TransactionalID
	for i := range t.Topics {
		tt := &t.Topics[i]
		ott := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		ott.Topic = tt.Topic
		for _, p := range tt.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			op.Partition, op.ErrorCode = p, code
			ott.Partitions = append(ott.Partitions, op)
		}
		ot.Topics = append(ot.Topics, ott)
	}
	return ot
}

func errWriteTxnMarkers(r *kmsg.WriteTxnMarkersRequest, o *kmsg.WriteTxnMarkersResponse, code int16) {
	for i := range r.Markers {
		mk := &r.Markers[i]
		om := kmsg.NewWriteTxnMarkersResponseMarker()
		om.ProducerID = mk.ProducerID
		for j := range mk.Topics {
			t := &mk.Topics[j]
			ot := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				op.Partition, op.ErrorCode = p, code
				ot.Partitions = append(ot.Partitions, op)
			}
			om.Topics = append(om.Topics, ot)
		}
		o.Markers = append(o.Markers, om)
	}
}

func errTxnOffsetCommit(r *kmsg.TxnOffsetCommitRequest, o *kmsg.TxnOffsetCommitResponse, code int16) {
	for i := range r.Topics {
		t := &r.Topics[i]
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic, ot.TopicID = t.Topic, t.TopicID
		for j := range t.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = t.Partitions[j].Partition, code
			ot.Partitions = append(ot.Partitions, op)
		}
		o.Topics = append(o.Topics, ot)
	}
}

func describeConfigsError(r *kmsg.DescribeConfigsRequestResource, code int16, m *string) kmsg.DescribeConfigsResponseResource {
	o := kmsg.NewDescribeConfigsResponseResource()
	o.ResourceType, o.ResourceName, o.ErrorCode, o.ErrorMessage = r.ResourceType, r.ResourceName, code, m
	return o
}

func alterConfigsError(r *kmsg.AlterConfigsRequestResource, code int16, m *string) kmsg.AlterConfigsResponseResource {
	o := kmsg.NewAlterConfigsResponseResource()
	o.ResourceType, o.ResourceName, o.ErrorCode, o.ErrorMessage = r.ResourceType, r.ResourceName, code, m
	return o
}

func incrementalAlterConfigsError(r *kmsg.IncrementalAlterConfigsRequestResource, code int16, m *string) kmsg.IncrementalAlterConfigsResponseResource {
	o := kmsg.NewIncrementalAlterConfigsResponseResource()
	o.ResourceType, o.ResourceName, o.ErrorCode, o.ErrorMessage = r.ResourceType, r.ResourceName, code, m
	return o
}

func errAlterReplicaLogDirs(r *kmsg.AlterReplicaLogDirsRequest, o *kmsg.AlterReplicaLogDirsResponse, code int16) {
	for i := range r.Dirs {
		for j := range r.Dirs[i].Topics {
			t := &r.Dirs[i].Topics[j]
			ot := kmsg.NewAlterReplicaLogDirsResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				op.Partition, op.ErrorCode = p, code
				ot.Partitions = append(ot.Partitions, op)
			}
			o.Topics = append(o.Topics, ot)
		}
	}
}

// errDescribeLogDirs answers with the top-level error (v3+) and, since
// v0-v2 have none, one directory that carries it: without it the client
// would read "no log directories".
func errDescribeLogDirs(r *kmsg.DescribeLogDirsRequest, o *kmsg.DescribeLogDirsResponse, code int16) {
	o.ErrorCode = code
	d := kmsg.NewDescribeLogDirsResponseDir()
	d.ErrorCode, d.TotalBytes, d.UsableBytes = code, -1, -1
	o.Dirs = append(o.Dirs, d)
}

func createPartitionsError(topic string, code int16, m *string) kmsg.CreatePartitionsResponseTopic {
	t := kmsg.NewCreatePartitionsResponseTopic()
	t.Topic, t.ErrorCode, t.ErrorMessage = topic, code, m
	return t
}

func errElectLeaders(r *kmsg.ElectLeadersRequest, o *kmsg.ElectLeadersResponse, code int16, m *string) {
	// v1+ has a top-level error; v0 only per partition. A request for
	// every partition (nil topics) names none, so only the top-level
	// error can carry the answer.
	o.ErrorCode = code
	for i := range r.Topics {
		t := &r.Topics[i]
		ot := kmsg.NewElectLeadersResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewElectLeadersResponseTopicPartition()
			op.Partition, op.ErrorCode, op.ErrorMessage = p, code, m
			ot.Partitions = append(ot.Partitions, op)
		}
		o.Topics = append(o.Topics, ot)
	}
}

func errAlterClientQuotas(r *kmsg.AlterClientQuotasRequest, o *kmsg.AlterClientQuotasResponse, code int16, m *string) {
	for i := range r.Entries {
		e := kmsg.NewAlterClientQuotasResponseEntry()
		e.ErrorCode, e.ErrorMessage = code, m
		for _, en := range r.Entries[i].Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = en.Type, en.Name
			e.Entity = append(e.Entity, oe)
		}
		o.Entries = append(o.Entries, e)
	}
}

func errAlterUserSCRAM(r *kmsg.AlterUserSCRAMCredentialsRequest, o *kmsg.AlterUserSCRAMCredentialsResponse, code int16, m *string) {
	// Kafka answers once per user named, deletions and upsertions alike.
	seen := make(map[string]bool, len(r.Deletions)+len(r.Upsertions))
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		e := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		e.User, e.ErrorCode, e.ErrorMessage = user, code, m
		o.Results = append(o.Results, e)
	}
	for i := range r.Deletions {
		add(r.Deletions[i].Name)
	}
	for i := range r.Upsertions {
		add(r.Upsertions[i].Name)
	}
}

func errUpdateFeatures(r *kmsg.UpdateFeaturesRequest, o *kmsg.UpdateFeaturesResponse, code int16, m *string) {
	o.ErrorCode, o.ErrorMessage = code, m
	for i := range r.FeatureUpdates {
		e := kmsg.NewUpdateFeaturesResponseResult()
		e.Feature, e.ErrorCode, e.ErrorMessage = r.FeatureUpdates[i].Feature, code, m
		o.Results = append(o.Results, e)
	}
}

func describeProducersError(partition int32, code int16, m *string) kmsg.DescribeProducersResponseTopicPartition {
	p := kmsg.NewDescribeProducersResponseTopicPartition()
	p.Partition, p.ErrorCode, p.ErrorMessage = partition, code, m
	return p
}

func describeTransactionError(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, code, -1, -1
	return s
}

func describeTopicPartitionsError(topic string, code int16) kmsg.DescribeTopicPartitionsResponseTopic {
	t := kmsg.NewDescribeTopicPartitionsResponseTopic()
	t.Topic, t.ErrorCode = kmsg.StringPtr(topic), code
	return t
}

func shareOffsetsGroupError(group string, code int16, m *string) kmsg.DescribeShareGroupOffsetsResponseGroup {
	g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	g.GroupID, g.ErrorCode, g.ErrorMessage = group, code, m
	return g
}
