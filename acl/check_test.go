package acl

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func client(p string) Client { return Client{Principal: p, Host: anyHost} }

// batch is the head of a v2 record batch with the given attributes.
func batch(attrs uint16) []byte {
	b := make([]byte, 61)
	b[16] = 2
	b[21], b[22] = byte(attrs>>8), byte(attrs)
	return b
}

func produce(txn *string, records []byte, topics ...string) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version = 9
	r.TransactionID = txn
	for _, t := range topics {
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = t
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = records
		pt.Partitions = append(pt.Partitions, p)
		r.Topics = append(r.Topics, pt)
	}
	return r
}

func wantVerdict(t *testing.T, what string, got Verdict, code int16, denied ...Denial) {
	t.Helper()
	if got.Code != code || !reflect.DeepEqual(got.Denied, denied) {
		t.Errorf("%s: got code %d, denied %v; want %d, %v", what, got.Code, got.Denied, code, denied)
	}
}

func topicDenied(name string) Denial {
	return Denial{Resource: Topic, Name: name, Code: TopicAuthorizationFailed}
}

func TestCheckProduce(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "orders", Literal, "User:p", Write, Allow),
		b(TransactionalID, "tx-", Prefixed, "User:p", Write, Allow))
	tx, other := "tx-1", "other"
	wantVerdict(t, "plain", a.Check(client("User:p"), produce(nil, batch(0), "orders", "audit")), 0, topicDenied("audit"))
	wantVerdict(t, "transactional", a.Check(client("User:p"), produce(&tx, batch(0x10), "orders")), 0)
	wantVerdict(t, "transactional id denied", a.Check(client("User:p"), produce(&other, batch(0x10), "orders")), TransactionalIDAuthorizationFailed)
	wantVerdict(t, "transactional records without an id", a.Check(client("User:p"), produce(nil, batch(0x10), "orders")), TransactionalIDAuthorizationFailed)
	// An id on records that are not transactional is not checked, as Kafka does not.
	wantVerdict(t, "id without transactional records", a.Check(client("User:p"), produce(&other, batch(0), "orders")), 0)
	if v := a.Check(client("User:p"), produce(nil, batch(0), "orders")); !v.Allowed() {
		t.Errorf("%+v", v)
	}
	byID := produce(nil, batch(0), "")
	byID.Topics[0].TopicID = [16]byte{1}
	names := client("User:p")
	names.TopicName = func(id [16]byte) (string, bool) { return "orders", id == [16]byte{1} }
	wantVerdict(t, "by id", a.Check(names, byID), 0)
	wantVerdict(t, "by an unknown id", a.Check(client("User:p"), byID), 0, Denial{Resource: Topic, TopicID: [16]byte{1}, Code: UnknownTopicID})
}

func TestCheckFetch(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "orders", Literal, "User:c", Read, Allow),
		b(Cluster, ClusterName, Literal, "User:broker", ClusterAction, Allow))
	f := kmsg.NewPtrFetchRequest()
	f.Version = 12
	f.ReplicaID = -1
	for _, n := range []string{"orders", "audit"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = n
		f.Topics = append(f.Topics, ft)
	}
	wantVerdict(t, "consumer", a.Check(client("User:c"), f), 0, topicDenied("audit"))
	f.ReplicaID = 1
	wantVerdict(t, "follower", a.Check(client("User:broker"), f), 0)
	wantVerdict(t, "follower without ClusterAction", a.Check(client("User:c"), f), 0, topicDenied("orders"), topicDenied("audit"))
}

func TestCheckMetadataAndGroups(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "orders", Literal, "User:c", Describe, Allow),
		b(Group, "app", Literal, "User:c", Read, Allow),
		b(Topic, "orders", Literal, "User:c", Read, Allow))
	m := kmsg.NewPtrMetadataRequest()
	m.Version = 9
	if v := a.Check(client("User:c"), m); len(v.Listed) != 1 || v.Listed[0].Resource != Topic {
		t.Errorf("all topics: %+v", v)
	}
	for _, n := range []string{"orders", "secret"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		m.Topics = append(m.Topics, mt)
	}
	wantVerdict(t, "named", a.Check(client("User:c"), m), 0, topicDenied("secret"))

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "app"
	for _, n := range []string{"orders", "secret"} {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = n
		oc.Topics = append(oc.Topics, ot)
	}
	wantVerdict(t, "commit", a.Check(client("User:c"), oc), 0, topicDenied("secret"))
	oc.Group = "other"
	wantVerdict(t, "commit, group denied", a.Check(client("User:c"), oc), GroupAuthorizationFailed)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	for _, g := range []string{"app", "other"} {
		og := kmsg.NewOffsetFetchRequestGroup()
		og.Group = g
		tp := kmsg.NewOffsetFetchRequestGroupTopic()
		tp.Topic = "secret"
		og.Topics = append(og.Topics, tp)
		of.Groups = append(of.Groups, og)
	}
	wantVerdict(t, "offset fetch v8", a.Check(client("User:c"), of), 0, topicDenied("secret"), Denial{Resource: Group, Name: "other", Code: GroupAuthorizationFailed})

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 3
	fc.CoordinatorKey = "other"
	wantVerdict(t, "find coordinator v3", a.Check(client("User:c"), fc), GroupAuthorizationFailed)
	fc.Version = 4
	fc.CoordinatorKeys = []string{"app", "other"}
	wantVerdict(t, "find coordinator v4", a.Check(client("User:c"), fc), 0, Denial{Resource: Group, Name: "other", Code: GroupAuthorizationFailed})

	j := kmsg.NewPtrJoinGroupRequest()
	j.Group = "app"
	wantVerdict(t, "join", a.Check(client("User:c"), j), 0)
	j.Group = "x"
	wantVerdict(t, "join denied", a.Check(client("User:c"), j), GroupAuthorizationFailed)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group = "app"
	hb.SubscribedTopicNames = []string{"orders"}
	wantVerdict(t, "consumer heartbeat", a.Check(client("User:c"), hb), 0)
	hb.SubscribedTopicNames = append(hb.SubscribedTopicNames, "secret")
	wantVerdict(t, "consumer heartbeat, a subscribed topic denied", a.Check(client("User:c"), hb), TopicAuthorizationFailed)

	sh := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	sh.Group = "app"
	sh.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{}
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SourceTopics = []string{"orders"}
	sh.Topology.Subtopologies = append(sh.Topology.Subtopologies, st)
	wantVerdict(t, "streams heartbeat", a.Check(client("User:c"), sh), 0)
	sh.Topology.Subtopologies[0].StateChangelogTopics = []kmsg.TopicInfo{{Topic: "app-store-changelog"}}
	wantVerdict(t, "streams heartbeat, a changelog denied", a.Check(client("User:c"), sh), TopicAuthorizationFailed)

	lg := kmsg.NewPtrListGroupsRequest()
	if v := a.Check(client("User:c"), lg); len(v.Listed) != 1 || v.Listed[0].Resource != Group || v.Code != 0 {
		t.Errorf("list groups: %+v", v)
	}
}

func TestCheckTransactions(t *testing.T) {
	a := authz(t, Options{},
		b(TransactionalID, "tx", Literal, "User:p", Write, Allow),
		b(Topic, "orders", Literal, "User:p", Write, Allow),
		b(Group, "app", Literal, "User:p", Read, Allow),
		b(Topic, "orders", Literal, "User:p", Read, Allow),
		b(Cluster, ClusterName, Literal, "User:i", IdempotentWrite, Allow))
	ip := kmsg.NewPtrInitProducerIDRequest()
	wantVerdict(t, "idempotent, Write on a topic", a.Check(client("User:p"), ip), 0)
	wantVerdict(t, "idempotent, IdempotentWrite", a.Check(client("User:i"), ip), 0)
	wantVerdict(t, "idempotent, nothing", a.Check(client("User:x"), ip), ClusterAuthorizationFailed)
	ip.TransactionalID = kmsg.StringPtr("tx")
	wantVerdict(t, "transactional", a.Check(client("User:p"), ip), 0)
	wantVerdict(t, "transactional, denied", a.Check(client("User:i"), ip), TransactionalIDAuthorizationFailed)

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID = "tx"
	for _, n := range []string{"orders", "audit"} {
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic = n
		ap.Topics = append(ap.Topics, at)
	}
	wantVerdict(t, "add partitions", a.Check(client("User:p"), ap), 0, topicDenied("audit"))
	ap.Version = 4
	wantVerdict(t, "add partitions v4", a.Check(client("User:p"), ap), ClusterAuthorizationFailed)

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.Group = "tx", "other"
	wantVerdict(t, "add offsets, group denied", a.Check(client("User:p"), ao), GroupAuthorizationFailed)

	to := kmsg.NewPtrTxnOffsetCommitRequest()
	to.TransactionalID, to.Group = "tx", "app"
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "audit"
	to.Topics = append(to.Topics, tt)
	wantVerdict(t, "txn offset commit", a.Check(client("User:p"), to), 0, topicDenied("audit"))
	to.TransactionalID = "nope"
	wantVerdict(t, "txn offset commit, id denied", a.Check(client("User:p"), to), TransactionalIDAuthorizationFailed)

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = "tx"
	wantVerdict(t, "end txn", a.Check(client("User:p"), et), 0)
}

func TestCheckAdmin(t *testing.T) {
	a := authz(t, Options{},
		b(Cluster, ClusterName, Literal, "User:admin", All, Allow),
		b(Topic, "team-", Prefixed, "User:team", Create, Allow),
		b(Topic, "team-", Prefixed, "User:team", Delete, Allow))
	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range []string{"team-a", "b"} {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic = n
		ct.Topics = append(ct.Topics, tt)
	}
	wantVerdict(t, "create on the cluster", a.Check(client("User:admin"), ct), 0)
	wantVerdict(t, "create on a topic", a.Check(client("User:team"), ct), 0, topicDenied("b"))

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 6
	d1 := kmsg.NewDeleteTopicsRequestTopic()
	d1.Topic = kmsg.StringPtr("team-a")
	d2 := kmsg.NewDeleteTopicsRequestTopic()
	d2.TopicID = [16]byte{7}
	dt.Topics = append(dt.Topics, d1, d2)
	wantVerdict(t, "delete", a.Check(client("User:team"), dt), 0, Denial{Resource: Topic, TopicID: [16]byte{7}, Code: UnknownTopicID})

	el := kmsg.NewPtrElectLeadersRequest()
	wantVerdict(t, "elect leaders, admin", a.Check(client("User:admin"), el), 0)
	wantVerdict(t, "elect leaders", a.Check(client("User:team"), el), ClusterAuthorizationFailed)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{2, "team-a"}, {4, "1"}} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, res)
	}
	wantVerdict(t, "describe configs", a.Check(client("User:team"), dc), 0,
		topicDenied("team-a"), Denial{Resource: Cluster, Name: "1", Code: ClusterAuthorizationFailed})

	if v := a.Check(client("User:x"), kmsg.NewPtrApiVersionsRequest()); !v.Allowed() {
		t.Errorf("ApiVersions: %+v", v)
	}
	if v := a.Check(client("User:x"), kmsg.NewPtrCreateDelegationTokenRequest()); !v.Unhandled {
		t.Errorf("CreateDelegationToken: %+v", v)
	}
}

// TestCheckEveryKey sends each key's default request, so that no request
// a client may send makes Check panic, and a nil Authorizer allows all.
func TestCheckEveryKey(t *testing.T) {
	a := authz(t, Options{SuperUsers: "User:root"}, b(Topic, "*", Literal, WildcardPrincipal, Read, Allow))
	var none *Authorizer
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		a.Check(client("User:x"), req)
		if v := a.Check(client("User:root"), req); v.Code != 0 || len(v.Denied) != 0 {
			t.Errorf("%s: a super user refused: %+v", kmsg.NameForKey(k), v)
		}
		if v := none.Check(client("User:x"), req); !v.Allowed() {
			t.Errorf("%s: nil Authorizer: %+v", kmsg.NameForKey(k), v)
		}
	}
}
