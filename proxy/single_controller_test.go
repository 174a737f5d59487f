package proxy_test

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

func createTopicsRequest(version int16, topic string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = version, 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return req
}

// partitionsOf asks the upstream kfake directly how many partitions topic has.
func partitionsOf(t *testing.T, rc *rawConn, topic string) int {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	resp := rc.do(md).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return len(resp.Topics[0].Partitions)
}

// TestSingleCreateTopicsFreshClient: a fresh client connection's first
// CreateTopics, at every version, is answered by the controller (kfake's
// last broker; the others answer NOT_CONTROLLER, as Kafka's brokers did
// before KRaft), whether the connection sends it first or after a
// Metadata of any version: a Metadata v0 answer, which carries no
// controller (kafka-python and other clients bootstrap with one), must
// not make the view forget the controller it knows. The topic gets the
// partitions asked for, and no CreateTopics reaches another broker. Both
// ordering modes.
func TestSingleCreateTopicsFreshClient(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t)
			// Counts the CreateTopics that reach a broker other than
			// the controller, which answers them NOT_CONTROLLER.
			var astray atomic.Int32
			kc.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				if kc.CurrentNode() != int32(len(kc.ListenAddrs())-1) {
					astray.Add(1)
				}
				return nil, nil, false
			})
			p := startSingle(t, mode, kc.ListenAddrs(), nil)
			direct := dialRaw(t, kc.ListenAddrs()[0])
			n := 0
			for v := int16(0); v <= 7; v++ {
				for _, mdv := range []int16{-1, 0, 1, 0, 13} {
					n++
					topic := "fresh-" + strconv.Itoa(n)
					rc := dialRaw(t, p.Addr())
					if mdv >= 0 {
						md := kmsg.NewPtrMetadataRequest()
						md.Version = mdv
						rc.do(md)
					}
					resp := rc.do(createTopicsRequest(v, topic, 4)).(*kmsg.CreateTopicsResponse)
					if code := resp.Topics[0].ErrorCode; code != 0 {
						t.Fatalf("CreateTopics v%d after Metadata v%d: %v", v, mdv, kerr.ErrorForCode(code))
					}
					if got := partitionsOf(t, direct, topic); got != 4 {
						t.Fatalf("%s has %d partitions, want the 4 asked for", topic, got)
					}
					rc.c.Close()
				}
			}
			if n := astray.Load(); n > 0 {
				t.Fatalf("%d CreateTopics went to a broker that is not the controller", n)
			}
		})
	}
}

// TestSingleRetriesAtController: when the view names a controller that
// is not one (a client's Metadata answer said so, as a broker that moved
// the controller since may), the broker asked answers NOT_CONTROLLER; the
// proxy asks the view again and sends the request once more, to the
// controller it now names, and the client gets that answer: CreateTopics,
// CreatePartitions and DeleteTopics succeed. Both ordering modes.
func TestSingleRetriesAtController(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t)
			addrs := kc.ListenAddrs()
			// Metadata asking for the topic "misled" answers that broker 0
			// is the controller; kfake's controller is its last broker.
			kc.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				r := req.(*kmsg.MetadataRequest)
				if len(r.Topics) != 1 || r.Topics[0].Topic == nil || *r.Topics[0].Topic != "misled" {
					return nil, nil, false
				}
				resp := r.ResponseKind().(*kmsg.MetadataResponse)
				resp.ControllerID = 0
				for i, a := range addrs {
					host, port, _ := net.SplitHostPort(a)
					n, _ := strconv.Atoi(port)
					resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: int32(i), Host: host, Port: int32(n)})
				}
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.ErrorCode = kmsg.StringPtr("misled"), kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, mt)
				return resp, nil, true
			})
			p := startSingle(t, mode, addrs, nil)
			direct := dialRaw(t, addrs[0])
			rc := dialRaw(t, p.Addr())
			mislead := func() {
				md := kmsg.NewPtrMetadataRequest()
				md.Version = 9
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("misled")
				md.Topics = []kmsg.MetadataRequestTopic{mt}
				if resp := rc.do(md).(*kmsg.MetadataResponse); resp.ControllerID != 0 {
					t.Fatalf("the single endpoint names controller %d", resp.ControllerID)
				}
			}
			for i, v := range []int16{0, 3, 7} {
				topic := "retried-" + strconv.Itoa(i)
				mislead()
				if code := rc.do(createTopicsRequest(v, topic, 2)).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
					t.Fatalf("CreateTopics v%d: %v", v, kerr.ErrorForCode(code))
				}
				mislead()
				grow := kmsg.NewPtrCreatePartitionsRequest()
				grow.Version, grow.TimeoutMillis = min(v, 3), 5000
				gt := kmsg.NewCreatePartitionsRequestTopic()
				gt.Topic, gt.Count = topic, 5
				grow.Topics = []kmsg.CreatePartitionsRequestTopic{gt}
				if code := rc.do(grow).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; code != 0 {
					t.Fatalf("CreatePartitions v%d: %v", grow.Version, kerr.ErrorForCode(code))
				}
				if got := partitionsOf(t, direct, topic); got != 5 {
					t.Fatalf("%s has %d partitions, want 5", topic, got)
				}
				mislead()
				del := kmsg.NewPtrDeleteTopicsRequest()
				del.Version, del.TimeoutMillis = min(v, 6), 5000
				del.TopicNames = []string{topic}
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = kmsg.StringPtr(topic)
				del.Topics = []kmsg.DeleteTopicsRequestTopic{dt}
				if code := rc.do(del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != 0 {
					t.Fatalf("DeleteTopics v%d: %v", del.Version, kerr.ErrorForCode(code))
				}
			}
		})
	}
}
