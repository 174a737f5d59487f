package quota

// clientThrottleFrom holds, per API key, the first version of its
// response after which Kafka's Java client holds off by itself for the
// throttle_time_ms it reads (each response class's shouldClientThrottle
// in org.apache.kafka.common.requests; KIP-219 bumped most versions in
// Kafka 2.0 to mark the change). Keys absent here never make that client
// hold off, whether or not their response has the field: the
// AbstractResponse default.
var clientThrottleFrom = map[int16]int16{
	0:  6, // Produce
	1:  8, // Fetch
	2:  3, // ListOffsets
	3:  6, // Metadata
	8:  4, // OffsetCommit
	9:  4, // OffsetFetch
	10: 2, // FindCoordinator
	11: 3, // JoinGroup
	12: 2, // Heartbeat
	13: 2, // LeaveGroup
	14: 2, // SyncGroup
	15: 2, // DescribeGroups
	16: 2, // ListGroups
	18: 2, // ApiVersions
	19: 3, // CreateTopics
	20: 2, // DeleteTopics
	21: 1, // DeleteRecords
	22: 1, // InitProducerId
	24: 1, // AddPartitionsToTxn
	25: 1, // AddOffsetsToTxn
	26: 1, // EndTxn
	28: 1, // TxnOffsetCommit
	29: 1, // DescribeAcls
	30: 1, // CreateAcls
	31: 1, // DeleteAcls
	32: 2, // DescribeConfigs
	33: 1, // AlterConfigs
	34: 1, // AlterReplicaLogDirs
	35: 1, // DescribeLogDirs
	37: 1, // CreatePartitions
	38: 1, // CreateDelegationToken
	39: 1, // RenewDelegationToken
	40: 1, // ExpireDelegationToken
	41: 1, // DescribeDelegationToken
	42: 1, // DeleteGroups
	43: 0, // ElectLeaders
	44: 0, // IncrementalAlterConfigs
	45: 0, // AlterPartitionReassignments
	46: 0, // ListPartitionReassignments
	47: 0, // OffsetDelete
	50: 0, // DescribeUserScramCredentials
	51: 0, // AlterUserScramCredentials
	62: 0, // BrokerRegistration
	63: 0, // BrokerHeartbeat
	64: 0, // UnregisterBroker
	75: 0, // DescribeTopicPartitions
}

// ClientThrottleVersion returns the first version of key's response from
// which Kafka's Java client holds off by itself for the response's
// throttle_time_ms, and false for a key whose responses never make it
// hold off.
func ClientThrottleVersion(key int16) (int16, bool) {
	v, ok := clientThrottleFrom[key]
	return v, ok
}

// ClientThrottles reports whether a client reading a response of key at
// version holds off by itself for its throttle_time_ms (KIP-219). Kafka
// since 2.0 answers a throttled request at once at every version and
// then stops reading the connection for the throttle time: a client that
// holds off sends nothing meanwhile; one that does not finds its next
// requests waiting unread, which delays them as the old brokers delayed
// the response. The proxy does the same, so this decides nothing about
// when to answer; it tells whether the mute is the only thing holding the
// client back.
func ClientThrottles(key, version int16) bool {
	v, ok := clientThrottleFrom[key]
	return ok && version >= v
}
