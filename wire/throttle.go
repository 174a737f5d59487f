package wire

import "github.com/twmb/franz-go/pkg/kbin"

// ProduceThrottleOffset returns the offset in a Produce response body of
// its throttle_time_ms, which follows the topics from version 1 on: a
// walk over the partitions, which carry no records, finds it without
// decoding the body. Version 0 has no such field (ErrCannotScan), nor has
// a body the walk cannot read.
func ProduceThrottleOffset(version int16, body []byte) (int, error) {
	if version < 1 {
		return 0, ErrCannotScan
	}
	r := kbin.Reader{Src: body}
	flexible := Flexible(produceKey, version)
	scanTopics(&r, version, flexible, produceResponsePartitions)
	off := len(body) - len(r.Src)
	r.Int32()
	if _, err := responseTags(&r, body, flexible); err != nil {
		return 0, err
	}
	return off, nil
}

// ThrottleOffset returns the offset in a response body of key at version
// of its throttle_time_ms: Produce's after its topics, that of the
// responses in throttleFirst at 0. ApiVersions, OffsetDelete and the
// delegation token responses, whose field follows others, and responses
// without it give ErrCannotScan, as does a body too short to hold it.
func ThrottleOffset(key, version int16, body []byte) (int, error) {
	if key == produceKey {
		return ProduceThrottleOffset(version, body)
	}
	from, ok := throttleFirst[key]
	if !ok || version < from || len(body) < 4 {
		return 0, ErrCannotScan
	}
	return 0, nil
}

// throttleFirst holds, per API key, the first version of its response
// whose body begins with throttle_time_ms (Kafka's message definitions,
// checked against kmsg by TestThrottleOffsetMatchesKmsg).
var throttleFirst = map[int16]int16{
	1:  1, // Fetch
	2:  2, // ListOffsets
	3:  3, // Metadata
	8:  3, // OffsetCommit
	9:  3, // OffsetFetch
	10: 1, // FindCoordinator
	11: 2, // JoinGroup
	12: 1, // Heartbeat
	13: 1, // LeaveGroup
	14: 1, // SyncGroup
	15: 1, // DescribeGroups
	16: 1, // ListGroups
	19: 2, // CreateTopics
	20: 1, // DeleteTopics
	21: 0, // DeleteRecords
	22: 0, // InitProducerID
	23: 2, // OffsetForLeaderEpoch
	24: 0, // AddPartitionsToTxn
	25: 0, // AddOffsetsToTxn
	26: 0, // EndTxn
	28: 0, // TxnOffsetCommit
	29: 0, // DescribeACLs
	30: 0, // CreateACLs
	31: 0, // DeleteACLs
	32: 0, // DescribeConfigs
	33: 0, // AlterConfigs
	34: 0, // AlterReplicaLogDirs
	35: 0, // DescribeLogDirs
	37: 0, // CreatePartitions
	42: 0, // DeleteGroups
	43: 0, // ElectLeaders
	44: 0, // IncrementalAlterConfigs
	45: 0, // AlterPartitionAssignments
	46: 0, // ListPartitionReassignments
	48: 0, // DescribeClientQuotas
	49: 0, // AlterClientQuotas
	50: 0, // DescribeUserSCRAMCredentials
	51: 0, // AlterUserSCRAMCredentials
	56: 0, // AlterPartition
	57: 0, // UpdateFeatures
	59: 0, // FetchSnapshot
	60: 0, // DescribeCluster
	61: 0, // DescribeProducers
	62: 0, // BrokerRegistration
	63: 0, // BrokerHeartbeat
	64: 0, // UnregisterBroker
	65: 0, // DescribeTransactions
	66: 0, // ListTransactions
	67: 0, // AllocateProducerIDs
	68: 0, // ConsumerGroupHeartbeat
	69: 0, // ConsumerGroupDescribe
	70: 0, // ControllerRegistration
	71: 0, // GetTelemetrySubscriptions
	72: 0, // PushTelemetry
	73: 0, // AssignReplicasToDirs
	74: 0, // ListConfigResources
	75: 0, // DescribeTopicPartitions
	76: 0, // ShareGroupHeartbeat
	77: 0, // ShareGroupDescribe
	78: 0, // ShareFetch
	79: 0, // ShareAcknowledge
	80: 0, // AddRaftVoter
	81: 0, // RemoveRaftVoter
	82: 0, // UpdateRaftVoter
	88: 0, // StreamsGroupHeartbeat
	89: 0, // StreamsGroupDescribe
	90: 0, // DescribeShareGroupOffsets
	91: 0, // AlterShareGroupOffsets
	92: 0, // DeleteShareGroupOffsets
	93: 0, // StreamsGroupTopologyDescriptionUpdate
	94: 0, // UnregisterController
}
