package splitmerge

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// applyAsView applies m to tb as the proxy's view does, an answer for
// every topic (all) to a new table keeping tb's ids, and returns the
// table that holds it.
func applyAsView(tb *Table, m *kmsg.MetadataResponse, all bool) *Table {
	if all {
		prev := tb
		tb = new(Table)
		tb.KeepIDs(prev)
	}
	tb.ApplyMetadata(m, all)
	return tb
}

// TestTableKeepsIDs: a Metadata answer before v10, which names no topic
// ids, for every topic or some, leaves the ids known: requests by id
// (Fetch v13 and up, Produce v13) still find their topic and leaders.
func TestTableKeepsIDs(t *testing.T) {
	for _, all := range []bool{true, false} {
		tb := testCluster()
		m := kmsg.NewPtrMetadataResponse()
		m.Version = 1
		m.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}}
		orders := kmsg.NewMetadataResponseTopic()
		orders.Topic = kmsg.StringPtr("orders")
		for i, l := range []int32{2, 2, 1} {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader = int32(i), l
			orders.Partitions = append(orders.Partitions, p)
		}
		m.Topics = []kmsg.MetadataResponseTopic{orders}
		tb = applyAsView(tb, m, all)
		if got := tb.Leader("", ordersID, 2); got != 1 {
			t.Errorf("all %v: the leader of orders/2 by id after a v1 answer: %d, want 1 (the answer's)", all, got)
		}
		if name, id := tb.Topic("", ordersID); name != "orders" || id != ordersID {
			t.Errorf("all %v: orders' id names %q/%x after a v1 answer", all, name, id[:1])
		}
		if name, id := tb.Topic("orders", [16]byte{}); id != ordersID {
			t.Errorf("all %v: orders named %q/%x after a v1 answer, its id forgotten", all, name, id[:1])
		}
		// A topic the answer for every topic leaves out is gone, by
		// name and id; one a partial answer does not list stays.
		if got := tb.Leader("", logsID, 0); (got == UnknownPartition) != all {
			t.Errorf("all %v: logs/0 by id: %d", all, got)
		}
	}
}

// TestTableTopicErrors: a topic listed with an error and no partitions is
// forgotten when the error says it does not exist, and kept, by name and
// id, when it says only that the client may not see it.
func TestTableTopicErrors(t *testing.T) {
	for _, tc := range []struct {
		code int16
		kept bool
	}{{29, true}, {5, true}, {3, false}, {100, false}} {
		for _, all := range []bool{true, false} {
			tb := testCluster()
			m := kmsg.NewPtrMetadataResponse()
			m.Version = 12
			m.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}}
			orders := kmsg.NewMetadataResponseTopic()
			orders.Topic, orders.ErrorCode = kmsg.StringPtr("orders"), tc.code
			m.Topics = []kmsg.MetadataResponseTopic{orders}
			tb = applyAsView(tb, m, all)
			byName, byID := tb.Leader("orders", [16]byte{}, 2), tb.Leader("", ordersID, 2)
			if kept := byName == 3 && byID == 3; kept != tc.kept {
				t.Errorf("code %d, all %v: orders/2 led by %d (by name), %d (by id); kept %v, want %v", tc.code, all, byName, byID, kept, tc.kept)
			}
		}
	}
}

// TestTable: what a Table learns from Metadata, KIP-951 leaders and
// coordinator lookups, and that a clone changes alone.
func TestTable(t *testing.T) {
	tb := testCluster()
	if got := tb.Brokers(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("brokers %v", got)
	}
	for _, c := range []struct {
		topic string
		id    [16]byte
		p     int32
		want  int32
	}{
		{"orders", [16]byte{}, 2, 3},
		{"", ordersID, 2, 3},
		{"orders", [16]byte{}, 5, NoLeader},
		{"orders", [16]byte{}, 6, UnknownPartition},
		{"orders", [16]byte{}, -1, UnknownPartition},
		{"gone", [16]byte{}, 0, UnknownPartition},
		{"", goneID, 0, UnknownPartition},
	} {
		if got := tb.Leader(c.topic, c.id, c.p); got != c.want {
			t.Errorf("leader of %q/%x/%d: %d, want %d", c.topic, c.id[:1], c.p, got, c.want)
		}
	}

	for _, c := range []struct {
		topic string
		id    [16]byte
		name  string
		gotID [16]byte
	}{
		{"orders", [16]byte{}, "orders", ordersID},
		{"", ordersID, "orders", ordersID},
		{"gone", [16]byte{}, "gone", [16]byte{}},
		{"", goneID, "", goneID},
	} {
		if name, id := tb.Topic(c.topic, c.id); name != c.name || id != c.gotID {
			t.Errorf("topic %q/%x: %q/%x, want %q/%x", c.topic, c.id[:1], name, id[:1], c.name, c.gotID[:1])
		}
	}

	clone := tb.Clone()
	clone.SetLeader("", ordersID, 2, 1)
	clone.SetCoordinator(CoordinatorGroup, "g1", NoCoordinator)
	clone.SetLeader("gone", [16]byte{}, 0, 1)
	if tb.Leader("orders", [16]byte{}, 2) != 3 || tb.Coordinator(CoordinatorGroup, "g1") != 2 {
		t.Fatal("a change to a clone reached the original")
	}
	if clone.Leader("orders", [16]byte{}, 2) != 1 || clone.Coordinator(CoordinatorGroup, "g1") != NoCoordinator || clone.Leader("gone", [16]byte{}, 0) != UnknownPartition {
		t.Fatal("the clone did not change")
	}
	if tb.Coordinator(CoordinatorTransaction, "g1") != NoCoordinator {
		t.Fatal("a group's coordinator answered for a transactional id of that name")
	}

	// A partial answer changes the topics it lists; a topic with an
	// error is forgotten; an answer for every topic replaces them all.
	m := kmsg.NewPtrMetadataResponse()
	m.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 4}, {NodeID: 2}}
	logs := kmsg.NewMetadataResponseTopic()
	logs.Topic, logs.ErrorCode = kmsg.StringPtr("logs"), 3
	fresh := kmsg.NewMetadataResponseTopic()
	fresh.Topic = kmsg.StringPtr("fresh")
	fp := kmsg.NewMetadataResponseTopicPartition()
	fp.Partition, fp.Leader = 1, 4
	fresh.Partitions = []kmsg.MetadataResponseTopicPartition{fp}
	m.Topics = []kmsg.MetadataResponseTopic{logs, fresh}
	tb.ApplyMetadata(m, false)
	if !slices.Equal(tb.Brokers(), []int32{2, 4}) || tb.Leader("logs", [16]byte{}, 0) != UnknownPartition ||
		tb.Leader("fresh", [16]byte{}, 0) != NoLeader || tb.Leader("fresh", [16]byte{}, 1) != 4 || tb.Leader("orders", [16]byte{}, 2) != 3 {
		t.Fatal("a partial answer was not applied as it says")
	}
	tb.ApplyMetadata(m, true)
	if tb.Leader("orders", [16]byte{}, 2) != UnknownPartition || tb.Leader("", ordersID, 2) != UnknownPartition {
		t.Fatal("an answer for every topic kept a topic it does not list")
	}
}
