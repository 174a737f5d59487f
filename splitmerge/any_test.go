package splitmerge

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataAnswer is a broker's Metadata answer: three brokers, a
// controller, and the test cluster's topics with three replicas each.
func metadataAnswer(node int32, req kmsg.Request) kmsg.Response {
	out := req.ResponseKind().(*kmsg.MetadataResponse)
	out.ClusterID, out.ControllerID = kmsg.StringPtr("real"), 2
	for _, b := range []int32{1, 2, 3} {
		out.Brokers = append(out.Brokers, kmsg.MetadataResponseBroker{NodeID: b, Host: "broker", Port: 9000 + b})
	}
	for _, name := range []string{"orders", "logs"} {
		tt := kmsg.NewMetadataResponseTopic()
		tt.Topic = kmsg.StringPtr(name)
		for p := range int32(2) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1+p, 5
			mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{1, 2, 3}, []int32{1, 2}, []int32{3}
			if p == 1 && name == "logs" {
				mp.Leader, mp.ErrorCode = -1, kerr.LeaderNotAvailable.Code
			}
			tt.Partitions = append(tt.Partitions, mp)
		}
		out.Topics = append(out.Topics, tt)
	}
	return out
}

// TestMetadataReshaped: at every version the client learns one broker,
// the proxy, which leads every partition that has a leader, is its only
// replica and in-sync replica, and is the controller; leader epochs and
// errors stay the cluster's.
func TestMetadataReshaped(t *testing.T) {
	for _, v := range versions(kmsg.NewPtrMetadataRequest()) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		plan, got := splitAndMerge(t, req, testCluster(), nil, metadataAnswer)
		if len(plan.Parts) != 1 || !plan.Parts[0].Any || !Read(plan.Key) {
			t.Fatalf("v%d: parts %+v", v, plan.Parts)
		}
		resp := got.(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != testSelf.NodeID || resp.Brokers[0].Host != testSelf.Host || resp.Brokers[0].Port != testSelf.Port {
			t.Fatalf("v%d: brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != testSelf.NodeID {
			t.Errorf("v%d: controller %d", v, resp.ControllerID)
		}
		for _, tt := range resp.Topics {
			for _, p := range tt.Partitions {
				wantLeader, wantISR := testSelf.NodeID, []int32{testSelf.NodeID}
				if p.ErrorCode != 0 {
					wantLeader, wantISR = -1, nil
				}
				if p.Leader != wantLeader || !sameIDs(p.Replicas, []int32{testSelf.NodeID}) || !sameIDs(p.ISR, wantISR) || !sameIDs(p.OfflineReplicas, nil) {
					t.Errorf("v%d %s/%d: leader %d replicas %v isr %v offline %v", v, *tt.Topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.OfflineReplicas)
				}
				if v >= 7 && p.LeaderEpoch != 5 {
					t.Errorf("v%d: epoch %d", v, p.LeaderEpoch)
				}
			}
		}
	}
}

// sameIDs compares lists of node ids, an empty one equal to none (kmsg
// decodes an empty array as a non-nil slice).
func sameIDs(a, b []int32) bool { return slices.Equal(a, b) }

// TestMetadataFails: a failed Metadata for named topics answers each
// LEADER_NOT_AVAILABLE, with the proxy as broker; one for every topic has
// no faithful answer.
func TestMetadataFails(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	_, got := splitAndMerge(t, req, testCluster(), map[int32]bool{1: true}, metadataAnswer)
	resp := got.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Brokers) != 1 {
		t.Fatalf("%+v", resp)
	}
	req.Topics = nil
	plan, _ := Split(req, testCluster())
	if _, err := plan.Merge([]Result{{Err: errPartFailed}}, testSelf); !errors.Is(err, ErrCannotAnswer) {
		t.Fatalf("every topic, failed: %v", err)
	}
}

// TestDescribeCluster: the proxy is the cluster's one broker and its
// controller; controllers are asked for in vain, as of a broker.
func TestDescribeCluster(t *testing.T) {
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		out := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		out.ClusterID, out.ControllerID = "real", 2
		for _, b := range []int32{1, 2, 3} {
			out.Brokers = append(out.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: b, Host: "broker", Port: 9000 + b})
		}
		return out
	}
	for _, v := range versions(kmsg.NewPtrDescribeClusterRequest()) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		_, got := splitAndMerge(t, req, testCluster(), nil, answer)
		resp := got.(*kmsg.DescribeClusterResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != testSelf.NodeID || resp.Brokers[0].Port != testSelf.Port || resp.ControllerID != testSelf.NodeID || resp.ClusterID != "real" {
			t.Errorf("v%d: %+v", v, resp)
		}
		if v < 1 {
			continue
		}
		req.EndpointType = 2
		plan, got := splitAndMerge(t, req, testCluster(), nil, answer)
		resp = got.(*kmsg.DescribeClusterResponse)
		if len(plan.Parts) != 0 || resp.ErrorCode != kerr.MismatchedEndpointType.Code || resp.ErrorMessage == nil || len(resp.Brokers) != 0 {
			t.Errorf("v%d controllers: %d parts, %+v", v, len(plan.Parts), resp)
		}
	}
}

// TestDescribeTopicPartitionsReshaped: leaders, replicas and the
// eligible replicas of KIP-966 are the proxy.
func TestDescribeTopicPartitionsReshaped(t *testing.T) {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "orders"}}
	_, got := splitAndMerge(t, req, testCluster(), nil, func(node int32, r kmsg.Request) kmsg.Response {
		out := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
		tt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		tt.Topic = kmsg.StringPtr("orders")
		p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		p.LeaderID, p.Replicas, p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR = 2, []int32{1, 2, 3}, []int32{2}, []int32{1}, []int32{3}
		tt.Partitions = append(tt.Partitions, p)
		out.Topics = append(out.Topics, tt)
		return out
	})
	p := got.(*kmsg.DescribeTopicPartitionsResponse).Topics[0].Partitions[0]
	if p.LeaderID != testSelf.NodeID || !sameIDs(p.Replicas, []int32{testSelf.NodeID}) || !sameIDs(p.ISR, []int32{testSelf.NodeID}) ||
		len(p.EligibleLeaderReplicas) != 0 || len(p.LastKnownELR) != 0 {
		t.Fatalf("%+v", p)
	}
}

// TestConfigResources: a broker's own resources go to the broker they
// name, other resources to any broker; a broker the cluster does not have
// is INVALID_REQUEST with a message, as Kafka answers a broker id it is
// not; answers come back in the client's order.
func TestConfigResources(t *testing.T) {
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	asked := []res{{2, "orders"}, {4, "3"}, {4, ""}, {8, "2"}, {4, "7"}, {32, "g1"}, {4, "1"}}
	wantNode := []int32{1, 3, 1, 2, -1, 1, 1}
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		out := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for i := len(req.(*kmsg.DescribeConfigsRequest).Resources) - 1; i >= 0; i-- {
			r := req.(*kmsg.DescribeConfigsRequest).Resources[i]
			e := kmsg.NewDescribeConfigsResponseResource()
			e.ResourceType, e.ResourceName = r.ResourceType, r.ResourceName
			e.Configs = []kmsg.DescribeConfigsResponseResourceConfig{{Name: "from", Value: kmsg.StringPtr(string(rune('0' + node)))}}
			out.Resources = append(out.Resources, e)
		}
		return out
	}
	for _, v := range versions(kmsg.NewPtrDescribeConfigsRequest()) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = v
		for _, r := range asked {
			req.Resources = append(req.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: r.typ, ResourceName: r.name})
		}
		plan, got := splitAndMerge(t, req, testCluster(), nil, answer)
		resp := got.(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != len(asked) {
			t.Fatalf("v%d: %d resources", v, len(resp.Resources))
		}
		for i, r := range resp.Resources {
			if r.ResourceType != asked[i].typ || r.ResourceName != asked[i].name {
				t.Errorf("v%d #%d: %d %q, asked %+v", v, i, r.ResourceType, r.ResourceName, asked[i])
			}
			if wantNode[i] < 0 {
				if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
					t.Errorf("v%d #%d: error %d message %v", v, i, r.ErrorCode, r.ErrorMessage)
				}
				continue
			}
			if len(r.Configs) != 1 || *r.Configs[0].Value != string(rune('0'+wantNode[i])) {
				t.Errorf("v%d #%d: answered by %+v, want broker %d", v, i, r.Configs, wantNode[i])
			}
		}
		for _, p := range plan.Parts {
			if p.Any {
				t.Errorf("v%d: part to %d is any broker's, but holds broker 1's own resource", v, p.Node)
			}
		}
	}
}

// TestManualAssignmentRefused: topics that name brokers are refused with
// INVALID_REPLICA_ASSIGNMENT and a message; the others are created.
func TestManualAssignmentRefused(t *testing.T) {
	for _, v := range versions(kmsg.NewPtrCreateTopicsRequest()) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = v
		a := kmsg.NewCreateTopicsRequestTopic()
		a.Topic, a.NumPartitions, a.ReplicationFactor = "a", 3, 3
		b := kmsg.NewCreateTopicsRequestTopic()
		b.Topic, b.NumPartitions, b.ReplicationFactor = "b", -1, -1
		b.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{7}}}
		req.Topics = []kmsg.CreateTopicsRequestTopic{b, a}
		plan, got := splitAndMerge(t, req, testCluster(), nil, func(node int32, r kmsg.Request) kmsg.Response {
			q := r.(*kmsg.CreateTopicsRequest)
			if len(q.Topics) != 1 || q.Topics[0].Topic != "a" {
				t.Errorf("v%d: broker asked for %+v", v, q.Topics)
			}
			out := r.ResponseKind().(*kmsg.CreateTopicsResponse)
			e := kmsg.NewCreateTopicsResponseTopic()
			e.Topic, e.NumPartitions, e.ReplicationFactor = "a", 3, 3
			out.Topics = append(out.Topics, e)
			return out
		})
		resp := got.(*kmsg.CreateTopicsResponse)
		if len(plan.Parts) != 1 || len(resp.Topics) != 2 || resp.Topics[0].Topic != "b" || resp.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code ||
			resp.Topics[1].Topic != "a" || resp.Topics[1].ErrorCode != 0 {
			t.Errorf("v%d: %+v", v, resp.Topics)
		}
		if v >= 1 && resp.Topics[0].ErrorMessage == nil {
			t.Errorf("v%d: refusal without a message", v)
		}
	}
}

// TestFindCoordinator: the proxy coordinates every group and
// transactional id, at every version, with nothing sent upstream.
func TestFindCoordinator(t *testing.T) {
	for _, v := range versions(kmsg.NewPtrFindCoordinatorRequest()) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g1", []string{"g1", "g9"}
		if v >= 1 {
			req.CoordinatorType = CoordinatorTransaction
		}
		plan, got := splitAndMerge(t, req, new(Table), nil, nil)
		if len(plan.Parts) != 0 {
			t.Fatalf("v%d: went upstream", v)
		}
		resp := got.(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != testSelf.NodeID || resp.Host != testSelf.Host || resp.Port != testSelf.Port {
				t.Errorf("v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Coordinators) != 2 {
			t.Fatalf("v%d: %+v", v, resp.Coordinators)
		}
		for i, c := range resp.Coordinators {
			if c.Key != req.CoordinatorKeys[i] || c.NodeID != testSelf.NodeID || c.Host != testSelf.Host || c.Port != testSelf.Port || c.ErrorCode != 0 {
				t.Errorf("v%d: %+v", v, c)
			}
		}
		req.CoordinatorType = 2
		_, got = splitAndMerge(t, req, new(Table), nil, nil)
		for _, c := range got.(*kmsg.FindCoordinatorResponse).Coordinators {
			if c.ErrorCode != kerr.InvalidRequest.Code || c.NodeID != -1 {
				t.Errorf("v%d, share key: %+v", v, c)
			}
		}
	}
}

// TestRefused: a refused key is answered UNSUPPORTED_VERSION, with the
// reason where the response has a message, never sent upstream, and not
// advertised.
func TestRefused(t *testing.T) {
	for k := range int16(200) {
		req := kmsg.RequestForKey(k)
		if req == nil || ClassOf(k) != Refused {
			continue
		}
		if Advertised(k) || Refusal(k) == "" {
			t.Errorf("%s: advertised %v, reason %q", kmsg.NameForKey(k), Advertised(k), Refusal(k))
		}
		for _, v := range versions(req) {
			r := kmsg.RequestForKey(k)
			r.SetVersion(v)
			plan, got := splitAndMerge(t, r, testCluster(), nil, nil)
			if len(plan.Parts) != 0 {
				t.Fatalf("%s v%d went upstream", kmsg.NameForKey(k), v)
			}
			want := roundTripResponse(ErrorResponse(roundTripRequest(r), kerr.UnsupportedVersion.Code, "x"))
			clearMessages(reflect.ValueOf(want))
			clearMessages(reflect.ValueOf(got))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d: %+v", kmsg.NameForKey(k), v, got)
			}
		}
	}
	r := kmsg.NewPtrDescribeQuorumRequest()
	r.Version = 2
	plan, _ := Split(r, testCluster())
	m, _ := plan.Merge(nil, testSelf)
	if msg := m.(*kmsg.DescribeQuorumResponse).ErrorMessage; msg == nil || *msg != "DescribeQuorum is not served by the single endpoint: "+whyQuorum {
		t.Errorf("DescribeQuorum message %v", msg)
	}
}

func clearMessages(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearMessages(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "ErrorMessage" {
				v.Field(i).SetZero()
				continue
			}
			clearMessages(v.Field(i))
		}
	case reflect.Slice:
		for i := range v.Len() {
			clearMessages(v.Index(i))
		}
	}
}
