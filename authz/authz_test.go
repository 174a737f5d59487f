package authz

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

const testACLs = `acls:
  - {principal: User:alice, resourceType: TOPIC, resourceName: a, operation: WRITE}
  - {principal: User:alice, resourceType: TOPIC, resourceName: b, operation: READ}
  - {principal: User:alice, resourceType: TOPIC, resourceName: made, operation: CREATE}
  - {principal: User:alice, resourceType: GROUP, resourceName: mine, operation: DESCRIBE}
`

func testGuard(t testing.TB) *Guard {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(testACLs), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := New(path, acl.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// frame encodes req as a client would send it, with its header parsed.
func frame(t testing.TB, req kmsg.Request) (wire.RequestHeader, []byte) {
	t.Helper()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 7)
	h, err := wire.ParseRequestHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	return h, f
}

func produce(size int, topics ...string) *kmsg.ProduceRequest {
	var req *kmsg.ProduceRequest
	for _, topic := range topics {
		r := pipeprobe.NewProduce(pipeprobe.ProduceSpec{Topic: topic, Value: make([]byte, size), Timestamp: time.Now().UnixMilli(), Version: 9, Acks: -1, Timeout: time.Second})
		if req == nil {
			req = r
			continue
		}
		req.Topics = append(req.Topics, r.Topics...)
	}
	return req
}

func decodeResponse(t *testing.T, req kmsg.Request, f []byte, flexible bool) kmsg.Response {
	t.Helper()
	off, err := wire.ResponseBody(f, flexible)
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(f[off:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

var alice = func(g *Guard) acl.Client { return g.Client("User:alice", netip.MustParseAddr("10.0.0.1")) }

// TestProduceFastPathAgreesWithCheck: the Produce checked without decoding
// passes exactly what the full check allows.
func TestProduceFastPathAgreesWithCheck(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	for _, topics := range [][]string{{"a"}, {"b"}, {"a", "b"}, {"a", "a"}, {"c"}, {"b", "a"}} {
		req := produce(10, topics...)
		h, f := frame(t, req)
		fast := g.produceAllowed(nil, g.cur.Load(), c, h, f)
		if full := g.Authorizer().Check(c, req).Allowed(); fast != full {
			t.Errorf("%v: fast path %v, Check %v", topics, fast, full)
		}
	}
	txn := produce(10, "a")
	txn.TransactionID = kmsg.StringPtr("tx")
	h, f := frame(t, txn)
	if g.produceAllowed(nil, g.cur.Load(), c, h, f) {
		t.Errorf("a transactional Produce passed the fast path")
	}
}

// TestFetchFastPathAgreesWithCheck: the Fetch checked without decoding
// passes exactly what the full check allows of a consumer, at every
// version, by name and by id; it leaves to the full check a follower's
// fetch, a topic id it was not taught and a session begun before the
// connection's first Fetch under these rules.
func TestFetchFastPathAgreesWithCheck(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	ids := map[string][16]byte{"a": {1}, "b": {2}, "c": {3}}
	md := kmsg.NewPtrMetadataResponse()
	for _, name := range []string{"a", "b"} { // c's id is never taught
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(name), ids[name]
		md.Topics = append(md.Topics, mt)
	}
	(&Fix{g: g, a: g.Authorizer(), c: c}).Apply(md)
	fetch := func(v int16, replica int32, session int32, topics ...string) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.ReplicaID, req.ReplicaState.ID, req.SessionID = replica, replica, session
		for _, name := range topics {
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = name, ids[name]
			ft.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 1}}
			req.Topics = append(req.Topics, ft)
		}
		return req
	}
	rs := g.cur.Load()
	for v := range kmsg.NewPtrFetchRequest().MaxVersion() + 1 {
		for _, topics := range [][]string{{"b"}, {"a"}, {"b", "b"}, {"b", "a"}, {"c"}, {}} {
			req := fetch(v, -1, 0, topics...)
			h, f := frame(t, req)
			fast := g.fetchAllowed(&Conn{}, rs, c, h, f)
			full := g.Authorizer().Check(c, req).Allowed()
			if fast != full {
				t.Errorf("v%d %v: fast path %v, Check %v", v, topics, fast, full)
			}
		}
		h, f := frame(t, fetch(v, 2, 0, "b"))
		if g.fetchAllowed(&Conn{}, rs, c, h, f) {
			t.Errorf("v%d: a follower's Fetch passed the fast path", v)
		}
		if v >= 7 {
			h, f := frame(t, fetch(v, -1, 9, "b"))
			st := &Conn{}
			if g.fetchAllowed(st, rs, c, h, f) {
				t.Errorf("v%d: a session the connection did not begin under these rules passed the fast path", v)
			}
			if g.staleSession(st, fetch(v, -1, 9, "b"), rs.gen); !g.fetchAllowed(st, rs, c, h, f) {
				t.Errorf("v%d: a session under these rules did not pass the fast path", v)
			}
		}
	}
}

// TestPartialProduce: the denied topic is left out of what is forwarded
// and answered TOPIC_AUTHORIZATION_FAILED beside the upstream's answer.
func TestPartialProduce(t *testing.T) {
	g := testGuard(t)
	h, f := frame(t, produce(10, "b", "a", "c"))
	out, err := g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Forward || out.Fix == nil {
		t.Fatalf("action %v, fix %v: want Forward with a fix", out.Action, out.Fix)
	}
	fh, err := wire.ParseRequestHeader(out.Frame)
	if err != nil || fh.Correlation != 7 {
		t.Fatalf("forwarded header %+v, %v", fh, err)
	}
	fwd := kmsg.NewPtrProduceRequest()
	fwd.Version = fh.Version
	if err := fwd.ReadFrom(out.Frame[fh.Body:]); err != nil {
		t.Fatal(err)
	}
	if len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "a" {
		t.Fatalf("forwarded topics %v, want a alone", fwd.Topics)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = fwd.Version
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "a"
	rt.Partitions = []kmsg.ProduceResponseTopicPartition{{Partition: 0}}
	resp.Topics = append(resp.Topics, rt)
	out.Fix.Apply(resp)
	codes := map[string]int16{}
	for _, t := range resp.Topics {
		codes[t.Topic] = t.Partitions[0].ErrorCode
	}
	if len(codes) != 3 || codes["a"] != 0 || codes["b"] != acl.TopicAuthorizationFailed || codes["c"] != acl.TopicAuthorizationFailed {
		t.Fatalf("answer codes %v", codes)
	}
}

// TestWholeRefusals: a request refused whole is answered at the proxy with
// the key's error answer; an acks=0 one closes.
func TestWholeRefusals(t *testing.T) {
	g := testGuard(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 5
	join.Group = "g"
	h, f := frame(t, join)
	out, err := g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Answer {
		t.Fatalf("JoinGroup: action %v, want Answer", out.Action)
	}
	if r := decodeResponse(t, join, out.Response, h.ResponseFlexible()).(*kmsg.JoinGroupResponse); r.ErrorCode != acl.GroupAuthorizationFailed {
		t.Fatalf("JoinGroup: code %d", r.ErrorCode)
	}
	h, f = frame(t, produce(10, "b"))
	if out, _ := g.Request(nil, alice(g), h, f, nil, true); out.Action != Close {
		t.Fatalf("acks=0 Produce to b: action %v, want Close", out.Action)
	}
	h, f = frame(t, produce(10, "a", "b"))
	if out, _ := g.Request(nil, alice(g), h, f, nil, true); out.Action != Forward || !out.CloseAfter {
		t.Fatalf("acks=0 Produce to a and b: action %v, close after %v, want Forward then close", out.Action, out.CloseAfter)
	}
	h, f = frame(t, produce(10, "b"))
	out, _ = g.Request(nil, alice(g), h, f, nil, false)
	if out.Action != Answer {
		t.Fatalf("Produce to b: action %v, want Answer", out.Action)
	}
}

// TestMetadataAutoCreate: a Metadata that would create a topic the client
// may not create is forwarded without auto-creation; one it may create
// is forwarded as it came.
func TestMetadataAutoCreate(t *testing.T) {
	g := testGuard(t)
	for _, tc := range []struct {
		topic string
		want  bool
	}{{"a", false}, {"made", true}} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		req.AllowAutoTopicCreation = true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(tc.topic)
		req.Topics = append(req.Topics, mt)
		h, f := frame(t, req)
		out, err := g.Request(nil, alice(g), h, f, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		got := true
		if out.Action == Forward {
			fh, _ := wire.ParseRequestHeader(out.Frame)
			fwd := kmsg.NewPtrMetadataRequest()
			fwd.Version = fh.Version
			if err := fwd.ReadFrom(out.Frame[fh.Body:]); err != nil {
				t.Fatal(err)
			}
			got = fwd.AllowAutoTopicCreation
		}
		if got != tc.want {
			t.Errorf("Metadata for %s: auto-creation forwarded %v, want %v", tc.topic, got, tc.want)
		}
		// The upstream, asked not to create it, does not hold it.
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 9
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(tc.topic), 3
		resp.Topics = append(resp.Topics, rt)
		if out.Fix != nil {
			out.Fix.Apply(resp)
		}
		want := int16(3)
		if !tc.want {
			want = acl.TopicAuthorizationFailed
		}
		if resp.Topics[0].ErrorCode != want {
			t.Errorf("Metadata for a missing %s: code %d, want %d", tc.topic, resp.Topics[0].ErrorCode, want)
		}
	}
}

// TestFetchByIDLearned: a Fetch naming a topic by an id learned from a
// Metadata answer is checked by the topic's name.
func TestFetchByIDLearned(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	id := [16]byte{1, 2, 3}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 13
	fetch.ReplicaID = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	ft.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0}}
	fetch.Topics = append(fetch.Topics, ft)
	h, f := frame(t, fetch)
	if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Answer {
		t.Fatalf("Fetch by an unknown id: action %v, want Answer", out.Action)
	}
	md := kmsg.NewPtrMetadataResponse()
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr("b"), id
	md.Topics = append(md.Topics, mt)
	(&Fix{g: g, a: g.Authorizer(), c: c}).Apply(md)
	if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Pass {
		t.Fatalf("Fetch by b's id: action %v, want Pass", out.Action)
	}
}

// BenchmarkProduceAllowed is the cost an allowed Produce pays: the topics
// read in place, one decision each, nothing decoded.
func BenchmarkProduceAllowed(b *testing.B) {
	g := testGuard(b)
	c := alice(g)
	h, f := frame(b, produce(16<<10, "a"))
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Pass {
			b.Fatal(out.Action)
		}
	}
}

// BenchmarkProduceDecoded is the same decision through a decoded request
// and Check, for comparison.
func BenchmarkProduceDecoded(b *testing.B) {
	g := testGuard(b)
	c := alice(g)
	h, f := frame(b, produce(16<<10, "a"))
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		req := kmsg.NewPtrProduceRequest()
		req.Version = h.Version
		if err := req.ReadFrom(f[h.Body:]); err != nil {
			b.Fatal(err)
		}
		if !g.Authorizer().Check(c, req).Allowed() {
			b.Fatal("denied")
		}
	}
}

// TestPartialCreateAndDeleteTopics: the topics the client may not create
// or delete are refused in place while the others are forwarded.
func TestPartialCreateAndDeleteTopics(t *testing.T) {
	g := testGuard(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 5
	for _, n := range []string{"made", "other"} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = n, 1, 1
		create.Topics = append(create.Topics, ct)
	}
	h, f := frame(t, create)
	out, err := g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Forward {
		t.Fatalf("CreateTopics: action %v, want Forward", out.Action)
	}
	fwd := out.Request.(*kmsg.CreateTopicsRequest)
	if len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "made" {
		t.Fatalf("CreateTopics forwarded %v, want made alone", fwd.Topics)
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = 5
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = "made"
	resp.Topics = append(resp.Topics, rt)
	out.Fix.Apply(resp)
	codes := map[string]int16{}
	for _, t := range resp.Topics {
		codes[t.Topic] = t.ErrorCode
	}
	if len(codes) != 2 || codes["made"] != 0 || codes["other"] != acl.TopicAuthorizationFailed {
		t.Fatalf("CreateTopics answer codes %v", codes)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 5
	del.TopicNames = []string{"a", "b"}
	h, f = frame(t, del)
	out, err = g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Answer {
		t.Fatalf("DeleteTopics of topics alice may not delete: action %v, want Answer", out.Action)
	}
	d := decodeResponse(t, del, out.Response, h.ResponseFlexible()).(*kmsg.DeleteTopicsResponse)
	if len(d.Topics) != 2 || d.Topics[0].ErrorCode != acl.TopicAuthorizationFailed || d.Topics[1].ErrorCode != acl.TopicAuthorizationFailed {
		t.Fatalf("DeleteTopics answer %+v", d.Topics)
	}
}

// TestPartialGroups: a batched request's groups the client may not
// describe are refused in place while the others are forwarded.
func TestPartialGroups(t *testing.T) {
	g := testGuard(t)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"theirs", "mine", "other"}
	h, f := frame(t, dg)
	out, err := g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Forward {
		t.Fatalf("DescribeGroups: action %v, want Forward", out.Action)
	}
	if fwd := out.Request.(*kmsg.DescribeGroupsRequest); len(fwd.Groups) != 1 || fwd.Groups[0] != "mine" {
		t.Fatalf("DescribeGroups forwarded %v, want mine alone", fwd.Groups)
	}
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = 5
	resp.Groups = []kmsg.DescribeGroupsResponseGroup{{Group: "mine"}}
	out.Fix.Apply(resp)
	codes := map[string]int16{}
	for _, g := range resp.Groups {
		codes[g.Group] = g.ErrorCode
	}
	if len(codes) != 3 || codes["mine"] != 0 || codes["theirs"] != acl.GroupAuthorizationFailed || codes["other"] != acl.GroupAuthorizationFailed {
		t.Fatalf("DescribeGroups answer codes %v", codes)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"mine", "theirs"}
	h, f = frame(t, fc)
	out, err = g.Request(nil, alice(g), h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if fwd, ok := out.Request.(*kmsg.FindCoordinatorRequest); out.Action != Forward || !ok || len(fwd.CoordinatorKeys) != 1 || fwd.CoordinatorKeys[0] != "mine" {
		t.Fatalf("FindCoordinator: action %v, request %v, want mine alone forwarded", out.Action, out.Request)
	}
}

// TestNothingDeniedForwarded: for every mix of allowed and denied topics
// in each per-topic request, what is forwarded names only topics the
// client may use, and the completed answer names every topic the client
// asked for, each once.
func TestNothingDeniedForwarded(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	names := []string{"a", "b", "c", "made"}
	build := map[string]func([]string) kmsg.Request{
		"Produce": func(ts []string) kmsg.Request { return produce(4, ts...) },
		"Fetch": func(ts []string) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.ReplicaID, r.SessionEpoch = 12, -1, -1
			for _, n := range ts {
				ft := kmsg.NewFetchRequestTopic()
				ft.Topic = n
				ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
				r.Topics = append(r.Topics, ft)
			}
			return r
		},
		"ListOffsets": func(ts []string) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = 5
			for _, n := range ts {
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = n
				lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
				r.Topics = append(r.Topics, lt)
			}
			return r
		},
		"Metadata": func(ts []string) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.Version, r.AllowAutoTopicCreation = 9, false
			for _, n := range ts {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(n)
				r.Topics = append(r.Topics, mt)
			}
			return r
		},
	}
	ops := map[string]acl.Operation{"Produce": acl.Write, "Fetch": acl.Read, "ListOffsets": acl.Describe, "Metadata": acl.Describe}
	topicsOf := func(x any) []string {
		var out []string
		switch r := x.(type) {
		case *kmsg.ProduceRequest:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.FetchRequest:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.ListOffsetsRequest:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.MetadataRequest:
			for _, t := range r.Topics {
				out = append(out, *t.Topic)
			}
		case *kmsg.ProduceResponse:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.FetchResponse:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.ListOffsetsResponse:
			for _, t := range r.Topics {
				out = append(out, t.Topic)
			}
		case *kmsg.MetadataResponse:
			for _, t := range r.Topics {
				out = append(out, *t.Topic)
			}
		}
		return out
	}
	for key, mk := range build {
		for mask := 1; mask < 1<<len(names); mask++ {
			var ts []string
			for i, n := range names {
				if mask&(1<<i) != 0 {
					ts = append(ts, n)
				}
			}
			req := mk(ts)
			h, f := frame(t, req)
			out, err := g.Request(nil, c, h, f, nil, false)
			if err != nil {
				t.Fatalf("%s %v: %v", key, ts, err)
			}
			var answer kmsg.Response
			switch out.Action {
			case Pass, Forward:
				fwd := out.Request
				if out.Action == Pass {
					fwd = req
				}
				for _, n := range topicsOf(fwd) {
					if !g.Authorizer().Authorize(c.Principal, c.Host, ops[key], acl.Topic, n) {
						t.Errorf("%s %v: %s forwarded, which the client may not use", key, ts, n)
					}
				}
				answer = splitmerge.ErrorResponse(fwd, 0, "")
				if out.Fix != nil {
					out.Fix.Apply(answer)
				}
			case Answer:
				answer = decodeResponse(t, req, out.Response, h.ResponseFlexible())
			default:
				t.Fatalf("%s %v: action %v", key, ts, out.Action)
			}
			got := topicsOf(answer)
			slices.Sort(got)
			want := slices.Clone(ts)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s %v: the answer names %v", key, ts, got)
			}
		}
	}
}

// TestFetchSessionAfterReload: an incremental Fetch is forwarded without
// its session on a connection's first fetch and after every reload, so
// that the client names every partition again; otherwise as it came.
func TestFetchSessionAfterReload(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	fetch := func(id, epoch int32) (wire.RequestHeader, []byte) {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.SessionID, r.SessionEpoch = 12, -1, id, epoch
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "b"
		ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		r.Topics = append(r.Topics, ft)
		return frame(t, r)
	}
	var st Conn
	step := func(what string, id, epoch int32, wantSession bool) {
		t.Helper()
		h, f := fetch(id, epoch)
		out, err := g.Request(&st, c, h, f, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case out.Action == Pass && wantSession:
		case out.Action == Forward && !wantSession:
			if r := out.Request.(*kmsg.FetchRequest); r.SessionID != 0 || r.SessionEpoch != -1 {
				t.Fatalf("%s: forwarded session %d epoch %d, want none", what, r.SessionID, r.SessionEpoch)
			}
		default:
			t.Fatalf("%s: action %v, want the session kept: %v", what, out.Action, wantSession)
		}
	}
	step("a connection's first incremental fetch", 7, 3, false)
	step("a full fetch opening a session", 0, 0, true)
	step("the next incremental fetch", 8, 1, true)
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	step("an incremental fetch after a reload", 8, 2, false)
	step("the one after", 9, 1, true)
}

// TestAuthorizedOperationsAreTheClients: the operations the upstream
// answers for the proxy's own principal are replaced by the client's,
// and left alone where they were not asked for.
func TestAuthorizedOperationsAreTheClients(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	a := g.Authorizer()
	all := int32(0x7ffffff8)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 10
	md.IncludeTopicAuthorizedOperations, md.IncludeClusterAuthorizedOperations = true, true
	fix := g.fixFor(a, c, md, acl.Verdict{})
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 10
	mr.AuthorizedOperations = all
	for _, n := range []string{"a", "b"} {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.AuthorizedOperations = kmsg.StringPtr(n), all
		mr.Topics = append(mr.Topics, t)
	}
	fix.Apply(mr)
	if want := int32(0); mr.AuthorizedOperations != want {
		t.Errorf("metadata cluster operations %x, want %x", mr.AuthorizedOperations, want)
	}
	for _, tp := range mr.Topics {
		if want := a.AuthorizedOperations(c, acl.Topic, *tp.Topic); tp.AuthorizedOperations != want || want == all {
			t.Errorf("topic %s operations %x, want %x", *tp.Topic, tp.AuthorizedOperations, want)
		}
	}
	if want := int32(1<<uint(acl.Write) | 1<<uint(acl.Describe)); mr.Topics[0].AuthorizedOperations != want {
		t.Errorf("topic a operations %x, want Write and Describe %x", mr.Topics[0].AuthorizedOperations, want)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	if g.fixFor(a, c, dc, acl.Verdict{}) != nil {
		t.Errorf("DescribeCluster without authorized operations is fixed")
	}
	dc.IncludeClusterAuthorizedOperations = true
	dr := kmsg.NewPtrDescribeClusterResponse()
	dr.ClusterAuthorizedOperations = all
	g.fixFor(a, c, dc, acl.Verdict{}).Apply(dr)
	if dr.ClusterAuthorizedOperations != 0 {
		t.Errorf("cluster operations %x, want none", dr.ClusterAuthorizedOperations)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"mine"}, true
	gr := kmsg.NewPtrDescribeGroupsResponse()
	gr.Version = 5
	grp := kmsg.NewDescribeGroupsResponseGroup()
	grp.Group, grp.AuthorizedOperations = "mine", all
	gr.Groups = append(gr.Groups, grp)
	g.fixFor(a, c, dg, acl.Verdict{}).Apply(gr)
	if want := int32(1 << uint(acl.Describe)); gr.Groups[0].AuthorizedOperations != want {
		t.Errorf("group operations %x, want Describe %x", gr.Groups[0].AuthorizedOperations, want)
	}

	md.IncludeTopicAuthorizedOperations, md.IncludeClusterAuthorizedOperations = false, false
	mr = kmsg.NewPtrMetadataResponse()
	mr.Version = 10
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic = kmsg.StringPtr("a")
	mr.Topics = append(mr.Topics, tp)
	g.fixFor(a, c, md, acl.Verdict{}).Apply(mr)
	if mr.AuthorizedOperations != notAsked || mr.Topics[0].AuthorizedOperations != notAsked {
		t.Errorf("operations not asked for were filled: %x, %x", mr.AuthorizedOperations, mr.Topics[0].AuthorizedOperations)
	}
}

// TestFetchByIDResolvedUpstream: an id no Metadata answer taught is looked
// up in the upstream's listing before the request is decided, and a run
// of unknown ids lists the upstream at most once per resolveEvery.
func TestFetchByIDResolvedUpstream(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	idB, idA, idNone := [16]byte{1}, [16]byte{2}, [16]byte{3}
	lists := 0
	g.ResolveTopicIDsWith(func(context.Context) (map[[16]byte]string, error) {
		lists++
		return map[[16]byte]string{idB: "b", idA: "a"}, nil
	})
	fetchID := func(id [16]byte) (wire.RequestHeader, []byte) {
		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version = 13
		fetch.ReplicaID = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = id
		ft.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0}}
		fetch.Topics = append(fetch.Topics, ft)
		return frame(t, fetch)
	}
	h, f := fetchID(idB)
	if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Pass {
		t.Fatalf("Fetch by b's id, listed upstream: action %v, want Pass", out.Action)
	}
	h, f = fetchID(idA)
	out, _ := g.Request(nil, c, h, f, nil, false)
	if out.Action != Answer {
		t.Fatalf("Fetch by a's id (Write only): action %v, want Answer", out.Action)
	}
	v13 := kmsg.NewPtrFetchRequest()
	v13.Version = 13
	resp := decodeResponse(t, v13, out.Response, h.ResponseFlexible()).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != acl.TopicAuthorizationFailed {
		t.Errorf("Fetch by a's id answered %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	h, f = fetchID(idNone)
	for range 3 {
		if out, _ := g.Request(nil, c, h, f, nil, false); out.Action != Answer {
			t.Fatalf("Fetch by an id of no topic: action %v, want Answer", out.Action)
		}
	}
	if lists != 1 {
		t.Errorf("the upstream was listed %d times, want once", lists)
	}
}

// TestPerResourceRefusals: requests naming several resources, of which
// some are denied, forward the allowed ones and answer each denied one
// with its own code, as Kafka answers per resource.
func TestPerResourceRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(path, []byte(`acls:
  - {principal: User:alice, resourceType: TOPIC, resourceName: a, operation: WRITE}
  - {principal: User:alice, resourceType: TOPIC, resourceName: b, operation: READ}
  - {principal: User:alice, resourceType: TOPIC, resourceName: b, operation: DESCRIBE_CONFIGS}
  - {principal: User:alice, resourceType: TOPIC, resourceName: b, operation: ALTER_CONFIGS}
  - {principal: User:alice, resourceType: GROUP, resourceName: del, operation: DELETE}
  - {principal: User:alice, resourceType: TRANSACTIONAL_ID, resourceName: tx, operation: WRITE}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := New(path, acl.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := alice(g)
	// decide runs req through the Guard and completes resp, the
	// upstream's answer to what was forwarded (none when answered
	// locally), returning the request forwarded.
	decide := func(req kmsg.Request, resp kmsg.Response, want Action) (kmsg.Request, kmsg.Response) {
		t.Helper()
		h, f := frame(t, req)
		out, err := g.Request(nil, c, h, f, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != want {
			t.Fatalf("%s: action %v, want %v", kmsg.NameForKey(req.Key()), out.Action, want)
		}
		if want == Answer {
			return nil, decodeResponse(t, req, out.Response, h.ResponseFlexible())
		}
		resp.SetVersion(req.GetVersion())
		out.Fix.Apply(resp)
		return out.Request, resp
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "b", Partitions: []int32{0}}, {Topic: "a", Partitions: []int32{0}}}
	fwd, resp := decide(dp, &kmsg.DescribeProducersResponse{Topics: []kmsg.DescribeProducersResponseTopic{{Topic: "b", Partitions: []kmsg.DescribeProducersResponseTopicPartition{{Partition: 0}}}}}, Forward)
	if ts := fwd.(*kmsg.DescribeProducersRequest).Topics; len(ts) != 1 || ts[0].Topic != "b" {
		t.Errorf("DescribeProducers forwarded %v, want b alone", ts)
	}
	got := map[string]int16{}
	for _, tp := range resp.(*kmsg.DescribeProducersResponse).Topics {
		got[tp.Topic] = tp.Partitions[0].ErrorCode
	}
	if len(got) != 2 || got["b"] != 0 || got["a"] != acl.TopicAuthorizationFailed {
		t.Errorf("DescribeProducers codes %v", got)
	}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "b"}, {Topic: "c"}}
	fwd, resp = decide(dtp, &kmsg.DescribeTopicPartitionsResponse{Topics: []kmsg.DescribeTopicPartitionsResponseTopic{{Topic: kmsg.StringPtr("b")}}}, Forward)
	if ts := fwd.(*kmsg.DescribeTopicPartitionsRequest).Topics; len(ts) != 1 || ts[0].Topic != "b" {
		t.Errorf("DescribeTopicPartitions forwarded %v, want b alone", ts)
	}
	got = map[string]int16{}
	for _, tp := range resp.(*kmsg.DescribeTopicPartitionsResponse).Topics {
		got[*tp.Topic] = tp.ErrorCode
	}
	if len(got) != 2 || got["b"] != 0 || got["c"] != acl.TopicAuthorizationFailed {
		t.Errorf("DescribeTopicPartitions codes %v", got)
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "del"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "b", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}, {Topic: "a", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	fwd, resp = decide(od, &kmsg.OffsetDeleteResponse{Topics: []kmsg.OffsetDeleteResponseTopic{{Topic: "b", Partitions: []kmsg.OffsetDeleteResponseTopicPartition{{Partition: 0}}}}}, Forward)
	if ts := fwd.(*kmsg.OffsetDeleteRequest).Topics; len(ts) != 1 || ts[0].Topic != "b" {
		t.Errorf("OffsetDelete forwarded %v, want b alone", ts)
	}
	odr := resp.(*kmsg.OffsetDeleteResponse)
	got = map[string]int16{}
	for _, tp := range odr.Topics {
		got[tp.Topic] = tp.Partitions[0].ErrorCode
	}
	if odr.ErrorCode != 0 || len(got) != 2 || got["b"] != 0 || got["a"] != acl.TopicAuthorizationFailed {
		t.Errorf("OffsetDelete group code %d, topic codes %v", odr.ErrorCode, got)
	}

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID = "tx"
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{0}}}
	_, resp = decide(ap, nil, Answer)
	got = map[string]int16{}
	for _, tp := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		got[tp.Topic] = tp.Partitions[0].ErrorCode
	}
	if len(got) != 2 || got["a"] != 55 || got["b"] != acl.TopicAuthorizationFailed {
		t.Errorf("AddPartitionsToTxn codes %v, want a OPERATION_NOT_ATTEMPTED, b TOPIC_AUTHORIZATION_FAILED", got)
	}

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx", "other"}
	fwd, resp = decide(dt, &kmsg.DescribeTransactionsResponse{TransactionStates: []kmsg.DescribeTransactionsResponseTransactionState{{TransactionalID: "tx"}}}, Forward)
	if ids := fwd.(*kmsg.DescribeTransactionsRequest).TransactionalIDs; len(ids) != 1 || ids[0] != "tx" {
		t.Errorf("DescribeTransactions forwarded %v, want tx alone", ids)
	}
	got = map[string]int16{}
	for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
		got[s.TransactionalID] = s.ErrorCode
	}
	if len(got) != 2 || got["tx"] != 0 || got["other"] != acl.TransactionalIDAuthorizationFailed {
		t.Errorf("DescribeTransactions codes %v", got)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}, {ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "a"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	fwd, resp = decide(dc, &kmsg.DescribeConfigsResponse{Resources: []kmsg.DescribeConfigsResponseResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}}}, Forward)
	if rs := fwd.(*kmsg.DescribeConfigsRequest).Resources; len(rs) != 1 || rs[0].ResourceName != "b" {
		t.Errorf("DescribeConfigs forwarded %v, want b alone", rs)
	}
	got = map[string]int16{}
	for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		got[r.ResourceName] = r.ErrorCode
	}
	if len(got) != 3 || got["b"] != 0 || got["a"] != acl.TopicAuthorizationFailed || got["1"] != acl.ClusterAuthorizationFailed {
		t.Errorf("DescribeConfigs codes %v", got)
	}

	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}, {ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}}
	fwd, resp = decide(ia, &kmsg.IncrementalAlterConfigsResponse{Resources: []kmsg.IncrementalAlterConfigsResponseResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}}}, Forward)
	if rs := fwd.(*kmsg.IncrementalAlterConfigsRequest).Resources; len(rs) != 1 || rs[0].ResourceName != "b" {
		t.Errorf("IncrementalAlterConfigs forwarded %v, want b alone", rs)
	}
	got = map[string]int16{}
	for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		got[r.ResourceName] = r.ErrorCode
	}
	if len(got) != 2 || got["b"] != 0 || got["1"] != acl.ClusterAuthorizationFailed {
		t.Errorf("IncrementalAlterConfigs codes %v", got)
	}

	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "a"}, {ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}}
	fwd, resp = decide(ac, &kmsg.AlterConfigsResponse{Resources: []kmsg.AlterConfigsResponseResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "b"}}}, Forward)
	if rs := fwd.(*kmsg.AlterConfigsRequest).Resources; len(rs) != 1 || rs[0].ResourceName != "b" {
		t.Errorf("AlterConfigs forwarded %v, want b alone", rs)
	}
	got = map[string]int16{}
	for _, r := range resp.(*kmsg.AlterConfigsResponse).Resources {
		got[r.ResourceName] = r.ErrorCode
	}
	if len(got) != 2 || got["b"] != 0 || got["a"] != acl.TopicAuthorizationFailed {
		t.Errorf("AlterConfigs codes %v", got)
	}
}

// TestOffsetFetchTopicsInsideGroups: a topic the client may not Describe,
// named in a group it may Describe, is left out of what is forwarded and
// answered TOPIC_AUTHORIZATION_FAILED per partition inside that group's
// answer; a group left with none of its topics is still forwarded, with an
// empty list, not a null one (which would ask for every topic).
func TestOffsetFetchTopicsInsideGroups(t *testing.T) {
	g := testGuard(t)
	c := alice(g)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	mine := kmsg.NewOffsetFetchRequestGroup()
	mine.Group = "mine"
	mine.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "b", Partitions: []int32{0}}, {Topic: "c", Partitions: []int32{0, 1}}}
	only := kmsg.NewOffsetFetchRequestGroup()
	only.Group = "mine"
	of.Groups = []kmsg.OffsetFetchRequestGroup{mine, {Group: "theirs", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "b", Partitions: []int32{0}}}}}
	h, f := frame(t, of)
	out, err := g.Request(nil, c, h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != Forward {
		t.Fatalf("OffsetFetch: action %v, want Forward", out.Action)
	}
	fwd := out.Request.(*kmsg.OffsetFetchRequest)
	if len(fwd.Groups) != 1 || fwd.Groups[0].Group != "mine" || len(fwd.Groups[0].Topics) != 1 || fwd.Groups[0].Topics[0].Topic != "b" {
		t.Fatalf("OffsetFetch forwarded %+v, want mine with b alone", fwd.Groups)
	}
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 8
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = "mine"
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic = "b"
	rt.Partitions = []kmsg.OffsetFetchResponseGroupTopicPartition{{Partition: 0, Offset: 5}}
	rg.Topics = append(rg.Topics, rt)
	resp.Groups = append(resp.Groups, rg)
	out.Fix.Apply(resp)
	if len(resp.Groups) != 2 {
		t.Fatalf("OffsetFetch answered %d groups, want mine and theirs", len(resp.Groups))
	}
	codes := map[string]int16{}
	for _, gr := range resp.Groups {
		codes[gr.Group] = gr.ErrorCode
		for _, tp := range gr.Topics {
			for _, p := range tp.Partitions {
				codes[fmt.Sprintf("%s %s/%d", gr.Group, tp.Topic, p.Partition)] = p.ErrorCode
			}
		}
	}
	want := map[string]int16{"mine": 0, "theirs": acl.GroupAuthorizationFailed, "mine b/0": 0, "mine c/0": acl.TopicAuthorizationFailed, "mine c/1": acl.TopicAuthorizationFailed}
	if !maps.Equal(codes, want) {
		t.Errorf("OffsetFetch codes %v, want %v", codes, want)
	}

	only.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "c", Partitions: []int32{0}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{only}
	h, f = frame(t, of)
	out, err = g.Request(nil, c, h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if fwd, ok := out.Request.(*kmsg.OffsetFetchRequest); out.Action != Forward || !ok || fwd.Groups[0].Topics == nil || len(fwd.Groups[0].Topics) != 0 {
		t.Fatalf("OffsetFetch of a denied topic alone: action %v, request %+v, want mine forwarded with an empty topic list", out.Action, out.Request)
	}

	old := kmsg.NewPtrOffsetFetchRequest()
	old.Version = 7
	old.Group = "mine"
	old.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "b", Partitions: []int32{0}}, {Topic: "c", Partitions: []int32{0}}}
	h, f = frame(t, old)
	out, err = g.Request(nil, c, h, f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if fwd, ok := out.Request.(*kmsg.OffsetFetchRequest); out.Action != Forward || !ok || len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "b" {
		t.Fatalf("OffsetFetch v7: action %v, request %+v, want b alone forwarded", out.Action, out.Request)
	}
	resp = kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 7
	resp.Topics = []kmsg.OffsetFetchResponseTopic{{Topic: "b", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0}}}}
	out.Fix.Apply(resp)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 || resp.Topics[1].Topic != "c" || resp.Topics[1].Partitions[0].ErrorCode != acl.TopicAuthorizationFailed {
		t.Errorf("OffsetFetch v7 answer %+v", resp)
	}
}
