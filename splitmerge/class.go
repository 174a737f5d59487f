package splitmerge

// Class says how the single endpoint answers requests of one API key.
type Class uint8

const (
	// Refused: the proxy answers every entry with UNSUPPORTED_VERSION and
	// a message saying why, and ApiVersions does not advertise the key.
	// The zero Class, so that a key nobody classified is refused.
	Refused Class = iota
	// ByLeader: split by partition leader, one part per broker.
	ByLeader
	// ByCoordinator: sent to the coordinator of its group or
	// transactional id; batched forms are split by coordinator.
	ByCoordinator
	// ToEvery: sent to every broker, the answers merged.
	ToEvery
	// ToAny: sent to any one broker; answers that name brokers are
	// reshaped so that the proxy is the only one.
	ToAny
	// ByResource: config resources go to the broker they name, all others
	// to any one broker.
	ByResource
	// Local: answered by the proxy alone (FindCoordinator: the proxy is
	// every coordinator).
	Local
)

func (c Class) String() string {
	switch c {
	case ByLeader:
		return "by leader"
	case ByCoordinator:
		return "by coordinator"
	case ToEvery:
		return "to every broker"
	case ToAny:
		return "to any broker"
	case ByResource:
		return "by resource"
	case Local:
		return "local"
	}
	return "refused"
}

// classes holds every key kmsg knows; a key kmsg adds later is Refused
// until it is classified here (TestEveryKeyClassified).
var classes = map[int16]Class{
	0:  ByLeader,      // Produce
	1:  ByLeader,      // Fetch
	2:  ByLeader,      // ListOffsets
	3:  ToAny,         // Metadata, reshaped
	8:  ByCoordinator, // OffsetCommit
	9:  ByCoordinator, // OffsetFetch, batched from v8
	10: Local,         // FindCoordinator
	11: ByCoordinator, // JoinGroup
	12: ByCoordinator, // Heartbeat
	13: ByCoordinator, // LeaveGroup
	14: ByCoordinator, // SyncGroup
	15: ByCoordinator, // DescribeGroups, batched
	16: ToEvery,       // ListGroups
	18: ToEvery,       // ApiVersions: the intersection
	19: ToAny,         // CreateTopics; manual assignments refused per topic
	20: ToAny,         // DeleteTopics
	21: ByLeader,      // DeleteRecords
	22: ByCoordinator, // InitProducerID; without a transactional id ToAny
	23: ByLeader,      // OffsetForLeaderEpoch
	24: ByCoordinator, // AddPartitionsToTxn, batched from v4
	25: ByCoordinator, // AddOffsetsToTxn
	26: ByCoordinator, // EndTxn
	28: ByCoordinator, // TxnOffsetCommit (the group's coordinator)
	29: ToAny,         // DescribeACLs
	30: ToAny,         // CreateACLs
	31: ToAny,         // DeleteACLs
	32: ByResource,    // DescribeConfigs
	33: ByResource,    // AlterConfigs
	37: ToAny,         // CreatePartitions; manual assignments refused per topic
	38: ToAny,         // CreateDelegationToken
	39: ToAny,         // RenewDelegationToken
	40: ToAny,         // ExpireDelegationToken
	41: ToAny,         // DescribeDelegationToken
	42: ByCoordinator, // DeleteGroups, batched
	43: ToAny,         // ElectLeaders
	44: ByResource,    // IncrementalAlterConfigs
	47: ByCoordinator, // OffsetDelete
	48: ToAny,         // DescribeClientQuotas
	49: ToAny,         // AlterClientQuotas
	50: ToAny,         // DescribeUserSCRAMCredentials
	51: ToAny,         // AlterUserSCRAMCredentials
	57: ToAny,         // UpdateFeatures
	60: ToAny,         // DescribeCluster, reshaped
	61: ByLeader,      // DescribeProducers
	65: ByCoordinator, // DescribeTransactions, batched
	66: ToEvery,       // ListTransactions
	68: ByCoordinator, // ConsumerGroupHeartbeat
	69: ByCoordinator, // ConsumerGroupDescribe, batched
	71: ToAny,         // GetTelemetrySubscriptions
	72: ToAny,         // PushTelemetry
	74: ToAny,         // ListConfigResources
	75: ToAny,         // DescribeTopicPartitions, reshaped
	77: ByCoordinator, // ShareGroupDescribe, batched
	88: ByCoordinator, // StreamsGroupHeartbeat
	89: ByCoordinator, // StreamsGroupDescribe, batched
	90: ByCoordinator, // DescribeShareGroupOffsets, batched
	91: ByCoordinator, // AlterShareGroupOffsets
	92: ByCoordinator, // DeleteShareGroupOffsets
	93: ByCoordinator, // StreamsGroupTopologyDescriptionUpdate
}

// Reasons a key is refused, as the message clients read.
const (
	whyInterBroker = "an inter-broker or controller request, which clients do not send and the single endpoint does not relay"
	whyLogDirs     = "log directories belong to one broker, and the single endpoint stands for every broker at once"
	whyPlacement   = "replica placement names brokers, and the single endpoint shows the cluster as one broker"
	whyQuorum      = "the KRaft quorum is not reachable through the single endpoint"
	whyShare       = "share sessions (KIP-932) are kept per broker, and the single endpoint does not keep one per broker for each client session"
	whySASL        = "the single endpoint authenticates to every broker itself; a client's own SASL exchange cannot be relayed to several brokers"
	whyUnknown     = "an API the single endpoint does not know how to route"
)

var refusals = map[int16]string{
	4:  whyInterBroker, // LeaderAndISR
	5:  whyInterBroker, // StopReplica
	6:  whyInterBroker, // UpdateMetadata
	7:  whyInterBroker, // ControlledShutdown
	17: whySASL,        // SASLHandshake
	27: whyInterBroker, // WriteTxnMarkers
	34: whyLogDirs,     // AlterReplicaLogDirs
	35: whyLogDirs,     // DescribeLogDirs
	36: whySASL,        // SASLAuthenticate
	45: whyPlacement,   // AlterPartitionAssignments
	46: whyPlacement,   // ListPartitionReassignments
	52: whyInterBroker, // Vote
	53: whyInterBroker, // BeginQuorumEpoch
	54: whyInterBroker, // EndQuorumEpoch
	55: whyQuorum,      // DescribeQuorum
	56: whyInterBroker, // AlterPartition
	58: whyInterBroker, // Envelope
	59: whyInterBroker, // FetchSnapshot
	62: whyInterBroker, // BrokerRegistration
	63: whyInterBroker, // BrokerHeartbeat
	64: whyPlacement,   // UnregisterBroker
	67: whyInterBroker, // AllocateProducerIDs
	70: whyInterBroker, // ControllerRegistration
	73: whyInterBroker, // AssignReplicasToDirs
	76: whyShare,       // ShareGroupHeartbeat
	78: whyShare,       // ShareFetch
	79: whyShare,       // ShareAcknowledge
	80: whyQuorum,      // AddRaftVoter
	81: whyQuorum,      // RemoveRaftVoter
	82: whyQuorum,      // UpdateRaftVoter
	83: whyInterBroker, // InitializeShareGroupState
	84: whyInterBroker, // ReadShareGroupState
	85: whyInterBroker, // WriteShareGroupState
	86: whyInterBroker, // DeleteShareGroupState
	87: whyInterBroker, // ReadShareGroupStateSummary
	94: whyInterBroker, // UnregisterController
}

// ClassOf returns how the single endpoint answers requests of key.
func ClassOf(key int16) Class { return classes[key] }

// Refusal returns why requests of key are refused, or "" for a key that is
// not.
func Refusal(key int16) string {
	if ClassOf(key) != Refused {
		return ""
	}
	if why, ok := refusals[key]; ok {
		return why
	}
	return whyUnknown
}

// Advertised reports whether ApiVersions advertises key: every key but the
// refused ones.
func Advertised(key int16) bool { return ClassOf(key) != Refused }
