package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// aclTestFile lets principal write topic a and read topic b, describe and
// alter the cluster (DescribeAcls, and CreateAcls refused for the file's
// sake rather than the client's), and nothing else: no group, no topic c.
func aclTestFile(principal string, extra string) string {
	return `acls:
  - {principal: "` + principal + `", resourceType: TOPIC, resourceName: a, operation: WRITE}
  - {principal: "` + principal + `", resourceType: TOPIC, resourceName: b, operation: READ}
  - {principal: "` + principal + `", resourceType: CLUSTER, operation: DESCRIBE}
  - {principal: "` + principal + `", resourceType: CLUSTER, operation: ALTER}
` + extra
}

// aclProxy runs a proxy enforcing the ACL file text in front of kc; it
// returns the proxy, the file's path and the guard, to reload it.
func aclProxy(t *testing.T, kc *kfake.Cluster, topology config.Topology, mode config.Ordering, text string, opts ...proxy.Option) (*testProxy, string, *authz.Guard, *metrics.Metrics) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	g, err := authz.New(path, acl.Options{}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.Topology = topology },
		append(opts, proxy.WithMetrics(m), proxy.WithAuthorization(g))...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log.String())
		}
	})
	return p, path, g, m
}

// produceReq is a Produce v9 of one record to each topic's partition 0.
func produceReq(acks int16, value string, topics ...string) *kmsg.ProduceRequest {
	var req *kmsg.ProduceRequest
	for _, topic := range topics {
		r := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Value: []byte(value), Timestamp: time.Now().UnixMilli(), Version: 9, Acks: acks, Timeout: 5 * time.Second})
		if req == nil {
			req = r
			continue
		}
		req.Topics = append(req.Topics, r.Topics...)
	}
	return req
}

// produceCodes is each topic's error code in a Produce answer.
func produceCodes(t *testing.T, resp kmsg.Response) map[string]int16 {
	t.Helper()
	codes := map[string]int16{}
	for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range rt.Partitions {
			codes[rt.Topic] = rp.ErrorCode
		}
	}
	return codes
}

// wantCodes fails unless got holds exactly want.
func wantCodes(t *testing.T, what string, got, want map[string]int16) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: codes %v, want %v", what, got, want)
	}
	for k, v := range want {
		if c, ok := got[k]; !ok || c != v {
			t.Fatalf("%s: codes %v, want %v", what, got, want)
		}
	}
}

// fetchReq is a Fetch v12 of each topic's partition 0 from its start, up
// to 1 MiB.
func fetchReq(topics ...string) *kmsg.FetchRequest {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes, fetch.SessionEpoch = -1, 50, 1<<20, -1
	for _, n := range topics {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = n
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = 1<<20, -1, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	return fetch
}

// upstreamRecords counts the records kc holds in topic's partition 0,
// read directly, around the proxy.
func upstreamRecords(t *testing.T, ctx context.Context, kc *kfake.Cluster, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.ReplicaID = -1
	resp, err := pipeprobe.Do(ctx, kc.ListenAddrs()[0], req)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("upstream ListOffsets %s: %v", topic, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

var aclCases = []struct {
	name     string
	topology config.Topology
	mode     config.Ordering
}{
	{"ports-none", config.TopologyPorts, config.OrderingNone},
	{"ports-connection", config.TopologyPorts, config.OrderingConnection},
	{"single-none", config.TopologySingle, config.OrderingNone},
	{"single-connection", config.TopologySingle, config.OrderingConnection},
}

// TestACLEnforced: with an ACL file, each request is answered as Kafka
// answers it, a denied write never reaches the upstream, and the answers
// keep their order.
func TestACLEnforced(t *testing.T) {
	for _, tc := range aclCases {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b", "c"), kfake.AllowAutoTopicCreation())
			fresh := "  - {principal: \"" + authz.Anonymous + "\", resourceType: TOPIC, resourceName: fresh, operation: DESCRIBE}\n"
			p, path, _, m := aclProxy(t, kc, tc.topology, tc.mode, aclTestFile(authz.Anonymous, fresh))
			ctx := testContext(t, 20*time.Second)
			do := func(req kmsg.Request) kmsg.Response {
				t.Helper()
				resp, err := pipeprobe.Do(ctx, p.Addr(), req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}

			wantCodes(t, "produce a", produceCodes(t, do(produceReq(-1, "a1", "a"))), map[string]int16{"a": 0})
			wantCodes(t, "produce b", produceCodes(t, do(produceReq(-1, "b1", "b"))), map[string]int16{"b": acl.TopicAuthorizationFailed})
			wantCodes(t, "produce a and b", produceCodes(t, do(produceReq(-1, "ab", "a", "b"))),
				map[string]int16{"a": 0, "b": acl.TopicAuthorizationFailed})
			if n := upstreamRecords(t, ctx, kc, "a"); n != 2 {
				t.Errorf("topic a holds %d records upstream, want 2", n)
			}
			if n := upstreamRecords(t, ctx, kc, "b"); n != 0 {
				t.Errorf("topic b holds %d records upstream: a denied write was forwarded", n)
			}

			// Fetch: b is read, c refused in place.
			fetch := fetchReq("c", "b")
			fcodes := map[string]int16{}
			for _, ft := range do(fetch).(*kmsg.FetchResponse).Topics {
				fcodes[ft.Topic] = ft.Partitions[0].ErrorCode
			}
			wantCodes(t, "Fetch c, b", fcodes, map[string]int16{"b": 0, "c": acl.TopicAuthorizationFailed})

			// Metadata: all topics hides c, which the client may not
			// describe; naming c answers TOPIC_AUTHORIZATION_FAILED.
			all := kmsg.NewPtrMetadataRequest()
			all.Version = 9
			md := do(all).(*kmsg.MetadataResponse)
			var names []string
			for _, mt := range md.Topics {
				names = append(names, *mt.Topic)
			}
			if strings.Join(names, ",") != "a,b" && strings.Join(names, ",") != "b,a" {
				t.Errorf("all-topics Metadata lists %v, want a and b", names)
			}
			if len(md.Brokers) == 0 {
				t.Errorf("all-topics Metadata lists no broker")
			}
			named := kmsg.NewPtrMetadataRequest()
			named.Version = 9
			for _, n := range []string{"a", "c"} {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(n)
				named.Topics = append(named.Topics, mt)
			}
			md = do(named).(*kmsg.MetadataResponse)
			codes := map[string]int16{}
			for _, mt := range md.Topics {
				codes[*mt.Topic] = mt.ErrorCode
			}
			wantCodes(t, "Metadata a, c", codes, map[string]int16{"a": 0, "c": acl.TopicAuthorizationFailed})
			onlyC := kmsg.NewPtrMetadataRequest()
			onlyC.Version = 9
			onlyC.Topics = named.Topics[1:]
			md = do(onlyC).(*kmsg.MetadataResponse)
			if len(md.Topics) != 1 || md.Topics[0].ErrorCode != acl.TopicAuthorizationFailed || len(md.Brokers) == 0 {
				t.Errorf("Metadata c: %d topics, %d brokers, want c refused and the brokers", len(md.Topics), len(md.Brokers))
			}

			// Auto-creation needs Create: fresh, which the client may
			// describe but not create, is refused and not created.
			create := kmsg.NewPtrMetadataRequest()
			create.Version = 9
			create.AllowAutoTopicCreation = true
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr("fresh")
			create.Topics = append(create.Topics, mt)
			md = do(create).(*kmsg.MetadataResponse)
			if len(md.Topics) != 1 || md.Topics[0].ErrorCode != acl.TopicAuthorizationFailed {
				t.Errorf("Metadata creating fresh: %+v, want TOPIC_AUTHORIZATION_FAILED", md.Topics)
			}
			peek := kmsg.NewPtrMetadataRequest()
			peek.Version = 9
			peek.Topics = create.Topics
			up, err := pipeprobe.Do(ctx, kc.ListenAddrs()[0], peek)
			if err != nil {
				t.Fatal(err)
			}
			if c := up.(*kmsg.MetadataResponse).Topics[0].ErrorCode; c != 3 {
				t.Errorf("fresh upstream: code %d, want UNKNOWN_TOPIC_OR_PARTITION: a topic the client may not create was created", c)
			}

			// Groups: no Read on the group.
			join := kmsg.NewPtrJoinGroupRequest()
			join.Version = 5
			join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			if c := do(join).(*kmsg.JoinGroupResponse).ErrorCode; c != acl.GroupAuthorizationFailed {
				t.Errorf("JoinGroup: code %d, want GROUP_AUTHORIZATION_FAILED", c)
			}
			commit := kmsg.NewPtrOffsetCommitRequest()
			commit.Version = 7
			commit.Group, commit.Generation = "g", -1
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = "b"
			ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}
			commit.Topics = append(commit.Topics, ct)
			if c := do(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != acl.GroupAuthorizationFailed {
				t.Errorf("OffsetCommit: code %d, want GROUP_AUTHORIZATION_FAILED", c)
			}

			// The ACLs: listed from the file, and not to be changed
			// by a client.
			dreq := kmsg.NewPtrDescribeACLsRequest()
			dreq.Version = 2
			dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			dresp := do(dreq).(*kmsg.DescribeACLsResponse)
			bindings := 0
			for _, r := range dresp.Resources {
				bindings += len(r.ACLs)
			}
			if dresp.ErrorCode != 0 || bindings != 5 {
				t.Errorf("DescribeAcls: code %d, %d bindings, want 5", dresp.ErrorCode, bindings)
			}
			creq := kmsg.NewPtrCreateACLsRequest()
			creq.Version = 2
			creq.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "c",
				ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: authz.Anonymous, Host: "*",
				Operation: kmsg.ACLOperationWrite, PermissionType: kmsg.ACLPermissionTypeAllow}}
			cres := do(creq).(*kmsg.CreateACLsResponse).Results[0]
			if cres.ErrorCode == 0 || cres.ErrorMessage == nil || !strings.Contains(*cres.ErrorMessage, path) {
				t.Errorf("CreateAcls: code %d, message %v, want a refusal naming %s", cres.ErrorCode, cres.ErrorMessage, path)
			}

			// Pipelined, some denied: the answers keep their order.
			var reqs []kmsg.Request
			want := []map[string]int16{}
			for i := 0; i < 12; i++ {
				switch i % 3 {
				case 0:
					reqs = append(reqs, produceReq(-1, "p", "a"))
					want = append(want, map[string]int16{"a": 0})
				case 1:
					reqs = append(reqs, produceReq(-1, "p", "b"))
					want = append(want, map[string]int16{"b": acl.TopicAuthorizationFailed})
				case 2:
					reqs = append(reqs, produceReq(-1, "p", "b", "a"))
					want = append(want, map[string]int16{"a": 0, "b": acl.TopicAuthorizationFailed})
				}
			}
			res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range res.Arrived {
				if at != i {
					t.Fatalf("response %d arrived in place %d", at, i)
				}
			}
			for i, ex := range res.Exchanges {
				wantCodes(t, "pipelined produce", produceCodes(t, ex.Resp), want[i])
			}
			if n := upstreamRecords(t, ctx, kc, "b"); n != 0 {
				t.Errorf("topic b holds %d records upstream: a denied write was forwarded", n)
			}
			if n := counter(t, m, metrics.NameACLDenials, "resource", "Topic", "operation", "Write"); n < 10 {
				t.Errorf("topic write denials counted: %v, want at least 10", n)
			}
			if n := counter(t, m, metrics.NameACLDenials, "resource", "Group", "operation", "Read"); n < 2 {
				t.Errorf("group read denials counted: %v, want at least 2", n)
			}
		})
	}
}

// TestACLAcksZeroDenied: an acks=0 Produce with a denied topic closes the
// connection, as Kafka closes it, and the denied records are never
// forwarded; the allowed ones are.
func TestACLAcksZeroDenied(t *testing.T) {
	for _, tc := range aclCases {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
			p, _, _, m := aclProxy(t, kc, tc.topology, tc.mode, aclTestFile(authz.Anonymous, ""))
			ctx := testContext(t, 20*time.Second)
			for _, topics := range [][]string{{"b"}, {"a", "b"}} {
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				frame := kmsg.NewRequestFormatter().AppendRequest(nil, produceReq(0, "z", topics...), 1)
				if _, err := c.Write(frame); err != nil {
					t.Fatal(err)
				}
				var b [1]byte
				if n, err := c.Read(b[:]); err == nil {
					t.Fatalf("acks=0 produce to %v: read %d bytes, want the connection closed", topics, n)
				}
				c.Close()
			}
			// Ports and sni write the allowed part of the mixed write, as
			// Kafka does; the single topology writes none of it.
			wantA := int64(1)
			if tc.topology == config.TopologySingle {
				wantA = 0
			}
			deadline := time.Now().Add(5 * time.Second)
			for wantA == 1 && upstreamRecords(t, ctx, kc, "a") != 1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := upstreamRecords(t, ctx, kc, "a"); n != wantA {
				t.Errorf("topic a holds %d records upstream, want %d", n, wantA)
			}
			if n := upstreamRecords(t, ctx, kc, "b"); n != 0 {
				t.Errorf("topic b holds %d records upstream: a denied write was forwarded", n)
			}
			for deadline := time.Now().Add(5 * time.Second); counter(t, m, metrics.NameConnectionsClosed, "reason", "denied") < 2 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if n := counter(t, m, metrics.NameConnectionsClosed, "reason", "denied"); n != 2 {
				t.Errorf("connections closed as denied: %v, want 2", n)
			}
		})
	}
}

// TestACLReloadOpenConnection: a rule written into the file applies to the
// next request of a connection already open.
func TestACLReloadOpenConnection(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	p, path, g, _ := aclProxy(t, kc, config.TopologyPorts, config.OrderingNone, aclTestFile(authz.Anonymous, ""))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	send := func(corr int32) map[string]int16 { return produceVia(t, c, produceReq(-1, "r", "b"), corr) }
	wantCodes(t, "before", send(1), map[string]int16{"b": acl.TopicAuthorizationFailed})
	grant := "  - {principal: \"" + authz.Anonymous + "\", resourceType: TOPIC, resourceName: b, operation: WRITE}\n"
	if err := os.WriteFile(path, []byte(aclTestFile(authz.Anonymous, grant)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	wantCodes(t, "after", send(2), map[string]int16{"b": 0})
}

// TestACLSCRAMClient: a real client authenticated as alice at the proxy
// produces where alice may write, is refused where she may not, reads
// what she may read (Fetch naming topics by id), and may not join a
// group.
func TestACLSCRAMClient(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) {
			kc := newCluster(t, kfake.SeedTopics(1, "a", "b"))
			m := metrics.New()
			p, _, _, _ := aclProxy(t, kc, topology, config.OrderingNone, aclTestFile("User:alice", ""),
				proxy.WithClientAuth(authGate(t, m, 0, true)))
			ctx := testContext(t, 20*time.Second)
			direct, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			if err := direct.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("from-upstream")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			mech := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), mech, kgo.ProducerLinger(0), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("ok")}).FirstErr(); err != nil {
				t.Fatalf("produce to a: %v", err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); err != kerr.TopicAuthorizationFailed {
				t.Fatalf("produce to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
			consumer, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), mech, kgo.ConsumeTopics("b"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			got := ""
			for got == "" && ctx.Err() == nil {
				fs := consumer.PollFetches(ctx)
				for _, e := range fs.Errors() {
					t.Fatalf("fetch b: %v", e.Err)
				}
				fs.EachRecord(func(r *kgo.Record) { got = string(r.Value) })
			}
			if got != "from-upstream" {
				t.Fatalf("fetch b: %q", got)
			}
			join := kmsg.NewPtrJoinGroupRequest()
			join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			// The client looks for the group's coordinator first, and
			// FindCoordinator needs Describe on the group.
			if _, err := join.RequestWith(ctx, cl); err != kerr.GroupAuthorizationFailed {
				t.Fatalf("JoinGroup: %v, want GROUP_AUTHORIZATION_FAILED", err)
			}

			// bob, whom no ACL names, sees no topic and no group.
			member, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumerGroup("seen-upstream"), kgo.ConsumeTopics("b"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer member.Close()
			for n := 0; n == 0 && ctx.Err() == nil; {
				n = member.PollFetches(ctx).NumRecords()
			}
			if lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, direct); err != nil || len(lg.Groups) == 0 {
				t.Fatalf("ListGroups upstream: %v, %v: want the committed group", lg, err)
			}
			bob, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()))
			if err != nil {
				t.Fatal(err)
			}
			defer bob.Close()
			lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, bob)
			if err != nil {
				t.Fatal(err)
			}
			if lg.ErrorCode != 0 || len(lg.Groups) != 0 {
				t.Errorf("ListGroups as bob: code %d, groups %v, want none and no error", lg.ErrorCode, lg.Groups)
			}
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob)
			if err != nil {
				t.Fatal(err)
			}
			if len(md.Topics) != 0 || len(md.Brokers) == 0 {
				t.Errorf("all-topics Metadata as bob: %d topics, %d brokers, want no topic and the brokers", len(md.Topics), len(md.Brokers))
			}
		})
	}
}

// TestACLSNI: the sni topology enforces the file as the others do.
func TestACLSNI(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
			path := filepath.Join(t.TempDir(), "acls.yaml")
			if err := os.WriteFile(path, []byte(aclTestFile(authz.Anonymous, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			g, err := authz.New(path, acl.Options{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := startSNIProxy(t, mode, kc.ListenAddrs(), nil, proxy.WithAuthorization(g))
			ctx := testContext(t, 20*time.Second)
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), s.dialer(t), kgo.ProducerLinger(0), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("ok")}).FirstErr(); err != nil {
				t.Fatalf("produce to a: %v", err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); err != kerr.TopicAuthorizationFailed {
				t.Fatalf("produce to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
			if n := upstreamRecords(t, ctx, kc, "b"); n != 0 {
				t.Errorf("topic b holds %d records upstream: a denied write was forwarded", n)
			}
		})
	}
}

// TestACLClientCertificate: a client named by its certificate is held to
// the ACLs of that principal.
func TestACLClientCertificate(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	path := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(aclTestFile("User:client", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := authz.New(path, acl.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	byCN := func(c *x509.Certificate) (authn.Principal, error) {
		return authn.Principal{Type: "User", Name: c.Subject.CommonName}, nil
	}
	s := startSNIProxy(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config, k *pki) { c.TLSClientCA = k.caFile },
		proxy.WithClientAuth(clientauth.New(clientauth.Config{CertPrincipal: byCN})), proxy.WithAuthorization(g))
	ctx := testContext(t, 20*time.Second)
	client := s.pki.tlsConfig(t, "client")
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ProducerLinger(0), kgo.RequestRetries(0),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			name, port, _ := net.SplitHostPort(host)
			raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			if err != nil {
				return nil, err
			}
			c := client.Clone()
			c.ServerName = name
			return tls.Client(raw, c), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("produce to a as User:client: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); err != kerr.TopicAuthorizationFailed {
		t.Fatalf("produce to b as User:client: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestACLRevokedWhileFetching: a consumer whose Read is taken away while
// it fetches, in a fetch session or not, gets no record written after,
// and is told TOPIC_AUTHORIZATION_FAILED.
func TestACLRevokedWhileFetching(t *testing.T) {
	for _, tc := range aclCases {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "b"))
			p, path, g, _ := aclProxy(t, kc, tc.topology, tc.mode, aclTestFile(authz.Anonymous, ""))
			ctx := testContext(t, 20*time.Second)
			direct, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			if err := direct.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("before")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			consumer, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics("b"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			for n := 0; n == 0 && ctx.Err() == nil; {
				fs := consumer.PollFetches(ctx)
				for _, e := range fs.Errors() {
					t.Fatalf("fetch b: %v", e.Err)
				}
				n = fs.NumRecords()
			}
			// Fetches with nothing new, so that a session is under way.
			quiet, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			consumer.PollFetches(quiet)
			cancel()
			revoked := strings.Replace(aclTestFile(authz.Anonymous, ""), "resourceName: b, operation: READ", "resourceName: b, operation: WRITE", 1)
			if err := os.WriteFile(path, []byte(revoked), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := g.Reload(); err != nil {
				t.Fatal(err)
			}
			// A Fetch decided before the reload may still answer, with
			// what was written meanwhile, as a broker's would: the
			// record is written once every such fetch has waited its
			// 100 ms out.
			time.Sleep(500 * time.Millisecond)
			if err := direct.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			for denied := false; !denied; {
				if ctx.Err() != nil {
					t.Fatal("no TOPIC_AUTHORIZATION_FAILED after the Read was taken away")
				}
				fs := consumer.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) { t.Fatalf("record %q served after the Read was taken away", r.Value) })
				for _, e := range fs.Errors() {
					if e.Err != kerr.TopicAuthorizationFailed {
						t.Fatalf("fetch b: %v", e.Err)
					}
					denied = true
				}
			}
		})
	}
}

// TestACLRefusalAudited: a request the ACL file refuses, answered by the
// proxy and never forwarded, is in the audit trail as denied, with the
// resources refused and the code the client got; a refusal of the whole
// request names the resource its code speaks of, by the name the request
// gives it (the group, the transactional id). One forwarded without
// its refused entries is a denial too, those entries denied.
func TestACLRefusalAudited(t *testing.T) {
	for _, tc := range aclCases {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
			rec := &recorded{}
			p, _, _, _ := aclProxy(t, kc, tc.topology, tc.mode, aclTestFile(authz.Anonymous, ""), proxy.WithRecorder(rec))
			ctx := testContext(t, 20*time.Second)
			create := kmsg.NewPtrCreateTopicsRequest()
			nt := kmsg.NewCreateTopicsRequestTopic()
			nt.Topic, nt.NumPartitions, nt.ReplicationFactor = "secret", 1, 1
			create.Topics = append(create.Topics, nt)
			join := kmsg.NewPtrJoinGroupRequest()
			join.Group, join.ProtocolType, join.SessionTimeoutMillis = "g", "consumer", 10000
			initPID := kmsg.NewPtrInitProducerIDRequest()
			initPID.TransactionalID, initPID.TransactionTimeoutMillis = kmsg.StringPtr("tx-1"), 10000
			for _, req := range []kmsg.Request{produceReq(-1, "b1", "b"), create, join, initPID, produceReq(-1, "ab", "a", "b")} {
				if _, err := pipeprobe.Do(ctx, p.Addr(), req); err != nil {
					t.Fatal(err)
				}
			}
			// A forwarded request is recorded as its answer is delivered.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				rec.mu.Lock()
				n := len(rec.reqs)
				rec.mu.Unlock()
				if n >= 5 {
					break
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			type res struct {
				key                   int16
				typ, name, op         string
				code, resourceCode    int16
				decision, resDecision audit.Decision
			}
			var got []res
			for _, q := range rec.reqs {
				if q.Decision != audit.Deny {
					continue
				}
				for _, r := range q.Resources {
					got = append(got, res{q.APIKey, r.Type, r.Name, r.Operation, q.ErrorCode, r.ErrorCode, q.Decision, r.Decision})
				}
			}
			want := []res{
				{0, "Topic", "b", "Write", acl.TopicAuthorizationFailed, acl.TopicAuthorizationFailed, audit.Deny, audit.Deny},
				{19, "Topic", "secret", "Create", acl.TopicAuthorizationFailed, acl.TopicAuthorizationFailed, audit.Deny, audit.Deny},
				// Refusals of the whole request name the group and the
				// transactional id they were refused on.
				{11, "Group", "g", "Read", acl.GroupAuthorizationFailed, acl.GroupAuthorizationFailed, audit.Deny, audit.Deny},
				{22, "TransactionalId", "tx-1", "Write", acl.TransactionalIDAuthorizationFailed, acl.TransactionalIDAuthorizationFailed, audit.Deny, audit.Deny},
				// Forwarded without b: a written, b denied.
				{0, "Topic", "a", "Write", acl.TopicAuthorizationFailed, 0, audit.Deny, audit.Allow},
				{0, "Topic", "b", "Write", acl.TopicAuthorizationFailed, acl.TopicAuthorizationFailed, audit.Deny, audit.Deny},
			}
			if !slices.Equal(got, want) {
				t.Errorf("denied events\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
