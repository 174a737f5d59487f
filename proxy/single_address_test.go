package proxy_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/wire"
)

// TestSingleHidesAddresses sends, at every version the single endpoint
// advertises, each request whose response can carry a broker address
// (Metadata, FindCoordinator for groups and transactions, DescribeCluster
// for brokers and for controllers, DescribeConfigs of each broker, Produce
// and Fetch to partitions whose leader moved since the proxy last looked,
// so that the brokers answer with KIP-951 leaders and endpoints), and
// reads every endpoint in the responses with the hidden-address checks'
// reader: each is the proxy's own address and node id (a broker's configs:
// that broker's id), never a broker's, and every leader named is the
// proxy. Both ordering modes.
func TestSingleHidesAddresses(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) { testSingleHidesAddresses(t, mode) })
	}
}

func testSingleHidesAddresses(t *testing.T, mode config.Ordering) {
	const topic = "hidden"
	kc := newCluster(t, kfake.SeedTopics(3, topic))
	spreadLeaders(t, kc, topic, 3)
	answerBrokerConfigs(kc)
	p := startSingle(t, mode, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	host, portStr, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(portStr)
	brokerPorts := map[int32]bool{}
	for _, a := range kc.ListenAddrs() {
		_, bp, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(bp)
		brokerPorts[int32(n)] = true
	}

	av, err := pipeprobe.Do(ctx, p.Addr(), kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	maxOf := map[int16]int16{}
	for _, k := range av.(*kmsg.ApiVersionsResponse).ApiKeys {
		maxOf[k.ApiKey] = k.MaxVersion
	}

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(50 * time.Second))
	corr := int32(0)
	named, moved := 0, 0
	ask := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		corr++
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("hidden"))
		if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
			t.Fatal(err)
		}
		body := readResponse(t, c, corr)
		if wire.Flexible(req.Key(), req.GetVersion()) && req.Key() != 18 {
			body = body[1:] // the header's empty tag section
		}
		eps, _, _, err := readAddressed(req.Key(), req.GetVersion(), body)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		for _, e := range eps {
			// A broker's configs name the broker the client asked
			// about; every other endpoint names node 0.
			if brokerPorts[e.port] || e.host != host || e.port != int32(port) || (e.id != 0 && req.Key() != 32) || e.other {
				t.Fatalf("%s v%d names node %d at %s:%d; the single endpoint is node 0 at %s",
					kmsg.NameForKey(req.Key()), req.GetVersion(), e.id, e.host, e.port, p.Addr())
			}
			named++
		}
		resp := kmsg.ResponseForKey(req.Key())
		resp.SetVersion(req.GetVersion())
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		return resp
	}

	for v := int16(0); v <= maxOf[3]; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		m := ask(req).(*kmsg.MetadataResponse)
		for _, mt := range m.Topics {
			for _, mp := range mt.Partitions {
				if mp.Leader != 0 || fmt.Sprint(mp.Replicas) != "[0]" {
					t.Fatalf("Metadata v%d: partition %d led by %d, replicas %v; want the proxy, node 0", v, mp.Partition, mp.Leader, mp.Replicas)
				}
			}
		}
	}
	for v := int16(0); v <= maxOf[10]; v++ {
		for typ := int8(0); typ <= 1; typ++ {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType = v, typ
			req.CoordinatorKey, req.CoordinatorKeys = "k", []string{"k", "l"}
			ask(req)
		}
	}
	for v := int16(0); v <= maxOf[60]; v++ {
		for _, typ := range []int8{1, 2} {
			if typ == 2 && v == 0 {
				continue
			}
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.EndpointType = v, typ
			ask(req)
		}
	}
	// A broker's configs name its listeners and its quorum (as Apache
	// Kafka's do): whichever broker the client asks about, its listeners
	// name the proxy and its quorum is redacted.
	for v := int16(0); v <= maxOf[32]; v++ {
		for id := range int32(3) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version = v
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id))
			req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
			resp := ask(req).(*kmsg.DescribeConfigsResponse)
			if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
				t.Fatalf("DescribeConfigs v%d of broker %d: %+v", v, id, resp.Resources)
			}
			checkBrokerConfigs(t, id, resp.Resources[0].Configs, p.Addr())
		}
	}
	// Leaders moved behind the proxy's back answer NOT_LEADER_OR_FOLLOWER
	// with the new leader and its endpoint (KIP-951): both must be the
	// proxy's.
	move := func(part int32) {
		if err := kc.MoveTopicPartition(topic, part, (kc.LeaderFor(topic, part)+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	for v := int16(10); v <= maxOf[0]; v++ {
		move(0)
		req := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Partition: 0, Value: []byte("x"), Version: v, Acks: -1, Timeout: 5 * time.Second})
		if v >= 13 {
			req.Topics[0].TopicID = kc.TopicInfo(topic).TopicID
			req.Topics[0].Topic = ""
		}
		resp := ask(req).(*kmsg.ProduceResponse)
		moved += len(resp.Brokers)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.CurrentLeader.LeaderID > 0 {
					t.Fatalf("Produce v%d names leader %d", v, rp.CurrentLeader.LeaderID)
				}
			}
		}
	}
	for v := int16(16); v <= maxOf[1]; v++ {
		move(1)
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = v, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = kc.TopicInfo(topic).TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
		rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp := ask(req).(*kmsg.FetchResponse)
		moved += len(resp.Brokers)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.CurrentLeader.LeaderID > 0 {
					t.Fatalf("Fetch v%d names leader %d", v, rp.CurrentLeader.LeaderID)
				}
			}
		}
	}
	if named < 20 || moved < 4 {
		t.Fatalf("the responses named %d endpoints in all, %d of them KIP-951 leaders: too few to prove anything", named, moved)
	}
}

// TestSingleRefuses: what one advertised broker cannot answer faithfully
// is answered UNSUPPORTED_VERSION with the reason, never sent to a
// broker, and not advertised by ApiVersions; the connection goes on.
func TestSingleRefuses(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "r"))
	p := startSingle(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	refused := []kmsg.Request{kmsg.NewPtrSASLHandshakeRequest(), kmsg.NewPtrDescribeLogDirsRequest(), kmsg.NewPtrListPartitionReassignmentsRequest()}
	var reqs []kmsg.Request
	for _, r := range refused {
		r.SetVersion(min(4, r.MaxVersion())) // DescribeLogDirs has a top-level error from v3
		reqs = append(reqs, r, kmsg.NewPtrApiVersionsRequest())
	}
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ex := range res.Exchanges {
		switch resp := ex.Resp.(type) {
		case *kmsg.SASLHandshakeResponse:
			if resp.ErrorCode != 35 {
				t.Fatalf("SaslHandshake answered %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
			}
		case *kmsg.DescribeLogDirsResponse:
			if resp.ErrorCode != 35 {
				t.Fatalf("DescribeLogDirs answered %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
			}
		case *kmsg.ListPartitionReassignmentsResponse:
			if resp.ErrorCode != 35 || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "single endpoint") {
				t.Fatalf("ListPartitionReassignments answered %d %v, want UNSUPPORTED_VERSION with the reason", resp.ErrorCode, resp.ErrorMessage)
			}
		case *kmsg.ApiVersionsResponse:
			for _, k := range resp.ApiKeys {
				if k.ApiKey == refused[i/2].Key() {
					t.Fatalf("ApiVersions advertises %s", kmsg.NameForKey(k.ApiKey))
				}
			}
		default:
			t.Fatalf("request %d answered %T", i, ex.Resp)
		}
	}
}

// TestSingleApiVersionsBelowClient: brokers that serve an older
// ApiVersions than the client asks for answer with a v0 body and
// UNSUPPORTED_VERSION; the single endpoint's merged answer must be that
// v0 body too, which the client reads before asking again lower. A
// franz-go client (which asks at the newest version first) then works.
func TestSingleApiVersionsBelowClient(t *testing.T) {
	kc := newCluster(t, kfake.MaxVersions(kversion.V3_0_0()), kfake.SeedTopics(3, "older"))
	p := startSingle(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	only := &onlyProxy{addr: p.Addr()}
	produceInOrder(t, ctx, "older", 3, 20, 0, kgo.SeedBrokers(p.Addr()), only.opt())
	only.check(t)
}

// TestSingleAdmin creates, grows and deletes topics through the single
// endpoint with franz-go's admin client, in front of brokers that answer
// those requests NOT_CONTROLLER unless they are the controller (as Kafka
// did before KRaft, and kfake does): the proxy sends them to the
// controller its view knows.
func TestSingleAdmin(t *testing.T) {
	kc := newCluster(t)
	p := startSingle(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 30*time.Second)
	only := &onlyProxy{addr: p.Addr()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), only.opt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for i := range 3 {
		topic := "admin-" + strconv.Itoa(i)
		if resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		if resp, err := adm.CreatePartitions(ctx, 2, topic); err != nil || resp.Error() != nil {
			t.Fatalf("grow %s: %v %v", topic, err, resp.Error())
		}
		if resp, err := adm.DeleteTopics(ctx, topic); err != nil || resp.Error() != nil {
			t.Fatalf("delete %s: %v %v", topic, err, resp.Error())
		}
	}
	only.check(t)
}
