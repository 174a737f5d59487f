package quota

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientThrottleVersions checks the table against the versions read
// in Kafka's response classes (clients/src/main/java/org/apache/kafka/
// common/requests/*Response.java, shouldClientThrottle), written out
// here by name, and against kmsg, whose ThrottleResponse says the same
// for every key Kafka's classes decide.
func TestClientThrottleVersions(t *testing.T) {
	kafka := map[string]int16{
		"Produce": 6, "Fetch": 8, "ListOffsets": 3, "Metadata": 6,
		"OffsetCommit": 4, "OffsetFetch": 4, "FindCoordinator": 2,
		"JoinGroup": 3, "Heartbeat": 2, "LeaveGroup": 2, "SyncGroup": 2,
		"DescribeGroups": 2, "ListGroups": 2, "ApiVersions": 2,
		"CreateTopics": 3, "DeleteTopics": 2, "DeleteRecords": 1,
		"InitProducerID": 1, "AddPartitionsToTxn": 1, "AddOffsetsToTxn": 1,
		"EndTxn": 1, "TxnOffsetCommit": 1, "DescribeACLs": 1,
		"CreateACLs": 1, "DeleteACLs": 1, "DescribeConfigs": 2,
		"AlterConfigs": 1, "AlterReplicaLogDirs": 1, "DescribeLogDirs": 1,
		"CreatePartitions": 1, "CreateDelegationToken": 1,
		"RenewDelegationToken": 1, "ExpireDelegationToken": 1,
		"DescribeDelegationToken": 1, "DeleteGroups": 1, "ElectLeaders": 0,
		"IncrementalAlterConfigs": 0, "AlterPartitionAssignments": 0,
		"ListPartitionReassignments": 0, "OffsetDelete": 0,
		"DescribeUserSCRAMCredentials": 0, "AlterUserSCRAMCredentials": 0,
		"BrokerRegistration": 0, "BrokerHeartbeat": 0, "UnregisterBroker": 0,
		"DescribeTopicPartitions": 0,
	}
	seen := 0
	for key := int16(0); key < 1024; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			if _, ok := ClientThrottleVersion(key); ok {
				t.Errorf("key %d is in the table and unknown to kmsg", key)
			}
			continue
		}
		name := kmsg.NameForKey(key)
		want, inKafka := kafka[name]
		got, ok := ClientThrottleVersion(key)
		if ok != inKafka || got != want {
			t.Errorf("%s: table says %d, %v; Kafka %d, %v", name, got, ok, want, inKafka)
		}
		if inKafka {
			seen++
		}
		resp := req.ResponseKind()
		throttler, isThrottle := resp.(kmsg.ThrottleResponse)
		if !isThrottle {
			if ok {
				t.Errorf("%s is in the table and its response has no throttle_time_ms", name)
			}
			continue
		}
		if !inKafka {
			// Kafka's client leaves these to the AbstractResponse
			// default, never holding off; kmsg's clients do.
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			resp.SetVersion(v)
			_, kmsgThrottles := throttler.Throttle()
			if ClientThrottles(key, v) != kmsgThrottles {
				t.Errorf("%s v%d: ClientThrottles %v, kmsg %v", name, v, ClientThrottles(key, v), kmsgThrottles)
			}
		}
	}
	if seen != len(kafka) {
		t.Errorf("%d of Kafka's %d keys found in kmsg", seen, len(kafka))
	}
	for _, c := range []struct {
		key, version int16
		want         bool
	}{{0, 5, false}, {0, 6, true}, {1, 7, false}, {1, 8, true}, {23, 4, false}, {43, 0, true}} {
		if got := ClientThrottles(c.key, c.version); got != c.want {
			t.Errorf("ClientThrottles(%d, %d) = %v", c.key, c.version, got)
		}
	}
}
