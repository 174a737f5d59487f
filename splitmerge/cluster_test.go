package splitmerge

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster the table tests split over: three brokers, two topics
// spread over all three, a partition without a leader, and coordinators.
var (
	ordersID = [16]byte{0xa}
	logsID   = [16]byte{0xb}
	goneID   = [16]byte{0xc}
)

func testCluster() *Table {
	m := kmsg.NewPtrMetadataResponse()
	for _, b := range []int32{1, 2, 3} {
		m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b, Host: "broker", Port: 9000 + b})
	}
	add := func(name string, id [16]byte, leaders ...int32) {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr(name), id
		for i, l := range leaders {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader = int32(i), l
			t.Partitions = append(t.Partitions, p)
		}
		m.Topics = append(m.Topics, t)
	}
	add("orders", ordersID, 1, 2, 3, 1, 2, -1)
	add("logs", logsID, 3, 3)
	tb := new(Table)
	tb.ApplyMetadata(m, true)
	tb.SetCoordinator(CoordinatorGroup, "g1", 2)
	tb.SetCoordinator(CoordinatorGroup, "g2", 3)
	tb.SetCoordinator(CoordinatorTransaction, "t1", 1)
	tb.SetCoordinator(CoordinatorTransaction, "t2", 3)
	return tb
}

// tp is one partition a table test asks for.
type tp struct {
	topic string
	id    [16]byte
	p     int32
}

// mixed is a client's request order that visits every broker, repeats a
// topic after another, and names a partition without a leader, a
// partition past the topic's count and a topic the cluster lacks.
var mixed = []tp{
	{"orders", ordersID, 3}, {"logs", logsID, 1}, {"orders", ordersID, 0},
	{"gone", goneID, 0}, {"orders", ordersID, 5}, {"orders", ordersID, 1},
	{"logs", logsID, 0}, {"orders", ordersID, 9}, {"orders", ordersID, 2},
}

// grouped turns a list of partitions into runs of one topic, as a
// client's request holds them.
func grouped(tps []tp) [][]tp {
	var out [][]tp
	for _, x := range tps {
		if n := len(out); n > 0 && out[n-1][0].topic == x.topic {
			out[n-1] = append(out[n-1], x)
			continue
		}
		out = append(out, []tp{x})
	}
	return out
}

// broker is a fake broker: it reads a part as bytes at its version,
// answers it with answer, and the proxy reads the answer as bytes.
func broker(t *testing.T, part Part, answer func(node int32, req kmsg.Request) kmsg.Response) Result {
	t.Helper()
	read := kmsg.RequestForKey(part.Request.Key())
	read.SetVersion(part.Request.GetVersion())
	if err := read.ReadFrom(part.Request.AppendTo(nil)); err != nil {
		t.Fatalf("broker %d cannot read its part: %v", part.Node, err)
	}
	return Result{Response: roundTripResponse(answer(part.Node, read))}
}

// splitAndMerge runs req through Split, the fake brokers (those in
// failed fail) and Merge, all through kmsg's encoding at req's version,
// and returns the response as the client reads it.
func splitAndMerge(t *testing.T, req kmsg.Request, v View, failed map[int32]bool, answer func(int32, kmsg.Request) kmsg.Response) (*Plan, kmsg.Response) {
	t.Helper()
	req = roundTripRequest(req)
	plan, err := Split(req, v)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	results := make([]Result, len(plan.Parts))
	for i, part := range plan.Parts {
		if failed[part.Node] {
			results[i].Err = errPartFailed
			continue
		}
		results[i] = broker(t, part, answer)
	}
	merged, err := plan.Merge(results, testSelf)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	if merged.GetVersion() != req.GetVersion() {
		t.Fatalf("merged at v%d, asked at v%d", merged.GetVersion(), req.GetVersion())
	}
	return plan, roundTripResponse(merged)
}

func versions(req kmsg.Request) []int16 {
	var vs []int16
	for v := range req.MaxVersion() + 1 {
		vs = append(vs, v)
	}
	return vs
}
