package splitmerge

// View is what the proxy knows of the cluster behind it, as Split reads
// it: who leads each partition, who coordinates each group and
// transactional id, and which brokers there are. It is pure data to this
// package; the proxy keeps it current (Table is one implementation).
type View interface {
	// Leader returns the node leading the partition of the topic named
	// topic, or, when topic is empty, of the topic with that id; NoLeader
	// when the partition exists but has no leader the view knows of;
	// UnknownPartition when the view knows no such topic or partition.
	Leader(topic string, id [16]byte, partition int32) int32
	// Coordinator returns the node coordinating key of type typ
	// (CoordinatorGroup or CoordinatorTransaction), or NoCoordinator.
	Coordinator(typ int8, key string) int32
	// Brokers returns the node ids of the upstream's brokers, ascending;
	// empty when none is known yet. Split does not keep the slice.
	Brokers() []int32
}

// Values of View.Leader and View.Coordinator that name no node.
const (
	// NoLeader: the partition exists and has no leader the view knows
	// of. Kafka answers NOT_LEADER_OR_FOLLOWER.
	NoLeader int32 = -1
	// UnknownPartition: the view knows no such topic or partition.
	// Kafka answers UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for a
	// request that names topics by id).
	UnknownPartition int32 = -2
	// NoCoordinator: the coordinator of a key is not known; the proxy
	// looks it up (Plan.Coordinators) and splits with the answer, so a
	// key still without one is answered COORDINATOR_NOT_AVAILABLE.
	NoCoordinator int32 = -1
)

// Coordinator types, FindCoordinator's KeyType values.
const (
	CoordinatorGroup       int8 = 0
	CoordinatorTransaction int8 = 1
)

// Self is the one broker the single endpoint presents: every leader id,
// coordinator id and broker endpoint a merged response carries is this
// one. Rack is nil for none.
type Self struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}
