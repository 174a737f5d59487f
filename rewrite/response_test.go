package rewrite

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nodes are the upstream brokers every test response advertises. Node 2 is
// always mapped, so a Mapper failing on it must surface in every API.
var nodes = []int32{1, 2, 3}

type apiCase struct {
	name     string
	versions []int16
	build    func(version int16) kmsg.Response
}

var apiCases = []apiCase{
	{"Metadata", []int16{0, 1, 9, 12, 13}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrMetadataResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), upstreamPort(id)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{"FindCoordinator", []int16{0, 3, 4, 6}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrFindCoordinatorResponse()
		r.SetVersion(v)
		if v <= 3 {
			r.NodeID, r.Host, r.Port = 2, upstreamHost(2), upstreamPort(2)
			return r
		}
		for _, id := range nodes {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = fmt.Sprint("group-", id)
			c.NodeID, c.Host, c.Port = id, upstreamHost(id), upstreamPort(id)
			r.Coordinators = append(r.Coordinators, c)
		}
		// A failed lookup and an unknown coordinator carry no address.
		failed := kmsg.NewFindCoordinatorResponseCoordinator()
		failed.Key, failed.ErrorCode, failed.NodeID, failed.Host, failed.Port = "failed", 15, 1, "", -1
		unknown := kmsg.NewFindCoordinatorResponseCoordinator()
		unknown.Key, unknown.NodeID, unknown.Host, unknown.Port = "unknown", -1, "", -1
		// A failed lookup that still names a broker's address: cleared.
		filled := kmsg.NewFindCoordinatorResponseCoordinator()
		filled.Key, filled.ErrorCode, filled.NodeID, filled.Host, filled.Port = "filled", 15, 3, upstreamHost(3), upstreamPort(3)
		r.Coordinators = append(r.Coordinators, failed, unknown, filled)
		return r
	}},
	{"DescribeCluster", []int16{0, 1, 2}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrDescribeClusterResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), upstreamPort(id)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{"Produce", []int16{10, 13}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrProduceResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			b := kmsg.NewProduceResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), upstreamPort(id)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{"Fetch", []int16{16, 18}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrFetchResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), upstreamPort(id)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{"ShareFetch", []int16{0, 2}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrShareFetchResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewShareFetchResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), upstreamPort(id)
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"ShareAcknowledge", []int16{0, 2}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrShareAcknowledgeResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), upstreamPort(id)
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"DescribeQuorum", []int16{2}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrDescribeQuorumResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = id
			for i, name := range []string{"CONTROLLER", "CONTROLLER_TLS"} {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = name, upstreamHost(id), uint16(upstreamPort(id))+uint16(100*i)
				n.Listeners = append(n.Listeners, l)
			}
			r.Nodes = append(r.Nodes, n)
		}
		return r
	}},
	{"Vote", []int16{1, 2}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrVoteResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewVoteResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), uint16(upstreamPort(id))
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"BeginQuorumEpoch", []int16{1}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrBeginQuorumEpochResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewBeginQuorumEpochResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), uint16(upstreamPort(id))
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"EndQuorumEpoch", []int16{1}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrEndQuorumEpochResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewEndQuorumEpochResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), uint16(upstreamPort(id))
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"FetchSnapshot", []int16{1}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrFetchSnapshotResponse()
		r.SetVersion(v)
		for _, id := range nodes {
			e := kmsg.NewFetchSnapshotResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port = id, upstreamHost(id), uint16(upstreamPort(id))
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
		return r
	}},
	{"UpdateRaftVoter", []int16{0}, func(v int16) kmsg.Response {
		r := kmsg.NewPtrUpdateRaftVoterResponse()
		r.SetVersion(v)
		r.CurrentLeader.LeaderID, r.CurrentLeader.LeaderEpoch = 2, 7
		r.CurrentLeader.Host, r.CurrentLeader.Port = upstreamHost(2), upstreamPort(2)
		return r
	}},
}

func caseNamed(t *testing.T, name string) apiCase {
	t.Helper()
	for _, c := range apiCases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no api case %q", name)
	return apiCase{}
}

// decoded builds a response and passes it through the wire, so tests see
// exactly what the proxy will decode from upstream bytes.
func decoded(t *testing.T, c apiCase, v int16) kmsg.Response {
	t.Helper()
	resp, err := roundtrip(c.build(v))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestResponseRewritesEveryAddress(t *testing.T) {
	for _, c := range apiCases {
		for _, v := range c.versions {
			t.Run(fmt.Sprintf("%s/v%d", c.name, v), func(t *testing.T) {
				resp := decoded(t, c, v)
				if !Needs(resp.Key(), v) {
					t.Errorf("Needs(%d, %d) = false for a response with addresses", resp.Key(), v)
				}
				before := addrs(resp)
				wantCalls := 0
				for _, a := range before {
					if a.mustMap {
						wantCalls++
						if a.host != upstreamHost(a.id) {
							t.Fatalf("decoded address %+v is not the upstream one", a)
						}
					}
				}
				if wantCalls == 0 {
					t.Fatal("test response carries no address to rewrite")
				}

				m := newFakeMapper()
				if err := Response(resp, m); err != nil {
					t.Fatalf("Response: %v", err)
				}
				if m.calls != wantCalls {
					t.Errorf("Mapper called %d times, want %d", m.calls, wantCalls)
				}

				out, err := roundtrip(resp)
				if err != nil {
					t.Fatal(err)
				}
				after := addrs(out)
				if len(after) != len(before) {
					t.Fatalf("got %d addresses after rewrite, want %d", len(after), len(before))
				}
				for i, a := range after {
					b := before[i]
					if a.id != b.id {
						t.Errorf("address %d: node id %d, want %d kept", i, a.id, b.id)
					}
					switch {
					case b.mustMap && (a.host != proxyHost(b.id) || a.port != proxyPort(b.id)):
						t.Errorf("address %d of node %d: %s:%d, want %s:%d", i, b.id, a.host, a.port, proxyHost(b.id), proxyPort(b.id))
					case !b.mustMap && !a.cleared():
						t.Errorf("address %d: %+v, naming no node, became %+v, want it cleared", i, b, a)
					}
				}
			})
		}
	}
}

func TestResponseReturnsMapperError(t *testing.T) {
	for _, c := range apiCases {
		for _, v := range c.versions {
			t.Run(fmt.Sprintf("%s/v%d", c.name, v), func(t *testing.T) {
				m := newFakeMapper()
				m.fail, m.failNode = true, 2
				err := Response(decoded(t, c, v), m)
				if !errors.Is(err, ErrMap) || !errors.Is(err, errBoom) {
					t.Fatalf("Response error = %v, want one wrapping ErrMap and the Mapper's error", err)
				}
			})
		}
	}
}

// portMapper maps every node to a fixed port.
type portMapper int32

func (p portMapper) MapController(int32, string, int32) (string, int32, error) {
	return "proxy.test", int32(p), nil
}

func (p portMapper) MapNode(int32, string, int32) (string, int32, error) {
	return "proxy.test", int32(p), nil
}

func TestResponseRejectsPortsBeyondUint16(t *testing.T) {
	for _, c := range apiCases {
		resp := c.build(c.versions[0])
		uint16Port := false
		switch resp.(type) {
		case *kmsg.DescribeQuorumResponse, *kmsg.VoteResponse, *kmsg.BeginQuorumEpochResponse,
			*kmsg.EndQuorumEpochResponse, *kmsg.FetchSnapshotResponse:
			uint16Port = true
		}
		for _, port := range []int32{-1, 65536} {
			err := Response(resp, portMapper(port))
			if uint16Port && !errors.Is(err, ErrPortRange) {
				t.Errorf("%s: mapping to port %d: error %v, want ErrPortRange", c.name, port, err)
			}
			if !uint16Port && err != nil {
				t.Errorf("%s: mapping to port %d: %v", c.name, port, err)
			}
		}
	}
	if err := Response(caseNamed(t, "DescribeQuorum").build(2), portMapper(65535)); err != nil {
		t.Errorf("port 65535 rejected: %v", err)
	}
}

// TestResponseSkipsAbsentAddresses covers versions whose address fields
// are not on the wire: kmsg decodes them as zero values, and node 0 at ""
// must never reach the Mapper.
func TestResponseSkipsAbsentAddresses(t *testing.T) {
	vote0 := kmsg.NewPtrVoteResponse()
	vote0.NodeEndpoints = []kmsg.VoteResponseNodeEndpoint{{NodeID: 1, Host: "h", Port: 1}}
	begin0 := kmsg.NewPtrBeginQuorumEpochResponse()
	begin0.NodeEndpoints = []kmsg.BeginQuorumEpochResponseNodeEndpoint{{NodeID: 1, Host: "h", Port: 1}}
	end0 := kmsg.NewPtrEndQuorumEpochResponse()
	end0.NodeEndpoints = []kmsg.EndQuorumEpochResponseNodeEndpoint{{NodeID: 1, Host: "h", Port: 1}}
	snap0 := kmsg.NewPtrFetchSnapshotResponse()
	snap0.NodeEndpoints = []kmsg.FetchSnapshotResponseNodeEndpoint{{NodeID: 1, Host: "h", Port: 1}}
	coord4 := kmsg.NewPtrFindCoordinatorResponse()
	coord4.SetVersion(4)
	coord4.NodeID, coord4.Host, coord4.Port = 1, "h", 1
	quorum1 := kmsg.NewPtrDescribeQuorumResponse()
	quorum1.SetVersion(1)
	quorum1.Nodes = []kmsg.DescribeQuorumResponseNode{{NodeID: 1, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Host: "h", Port: 1}}}}
	leaderless := kmsg.NewPtrUpdateRaftVoterResponse()
	versions := kmsg.NewPtrApiVersionsResponse()
	versions.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 13}}

	for _, r := range []kmsg.Response{vote0, begin0, end0, snap0, coord4, quorum1, leaderless, versions} {
		rewriteWithoutMapper(t, r)
	}
}

// rewriteWithoutMapper decodes r as the proxy would and rewrites it,
// failing t if Response asks the Mapper for anything; it returns the
// rewritten response.
func rewriteWithoutMapper(t *testing.T, r kmsg.Response) kmsg.Response {
	t.Helper()
	name := fmt.Sprintf("%s/v%d", kmsg.NameForKey(r.Key()), r.GetVersion())
	resp, err := roundtrip(r)
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMapper()
	if err := Response(resp, m); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if m.calls != 0 {
		t.Errorf("%s: Mapper called %d times for a response that names no node", name, m.calls)
	}
	return resp
}

// TestResponseClearsAddressesNamingNoNode gives the addresses Response
// maps no node for (a failed or unknown coordinator, an unknown leader) an
// upstream's address, as an upstream outside the protocol might: none
// reaches the client, and the Mapper is not asked to open a listener.
func TestResponseClearsAddressesNamingNoNode(t *testing.T) {
	var cases []kmsg.Response
	for _, v := range []int16{0, 1, 3} {
		failed := kmsg.NewPtrFindCoordinatorResponse()
		failed.SetVersion(v)
		failed.ErrorCode, failed.NodeID, failed.Host, failed.Port = 15, 2, upstreamHost(2), upstreamPort(2)
		unknown := kmsg.NewPtrFindCoordinatorResponse()
		unknown.SetVersion(v)
		unknown.NodeID, unknown.Host, unknown.Port = -1, upstreamHost(2), upstreamPort(2)
		cases = append(cases, failed, unknown)
	}
	leaderless := kmsg.NewPtrUpdateRaftVoterResponse()
	leaderless.CurrentLeader.LeaderID = -1
	leaderless.CurrentLeader.Host, leaderless.CurrentLeader.Port = upstreamHost(2), upstreamPort(2)
	cases = append(cases, leaderless)
	for _, r := range cases {
		out, err := roundtrip(rewriteWithoutMapper(t, r))
		if err != nil {
			t.Fatal(err)
		}
		if as := addrs(out); len(as) != 1 || as[0].mustMap || !as[0].cleared() {
			t.Errorf("%s v%d: addresses %+v after Response, want one cleared to \"\":-1", kmsg.NameForKey(r.Key()), r.GetVersion(), as)
		}
	}
}

// TestResponseRewritesEarlyKIP951Endpoints pins down that the KIP-951
// endpoints are rewritten whenever kmsg decodes them, which it does at every
// flexible version, not only from the version where Kafka defines them.
func TestResponseRewritesEarlyKIP951Endpoints(t *testing.T) {
	produce := caseNamed(t, "Produce").build(9)
	fetch := caseNamed(t, "Fetch").build(12)
	for _, r := range []kmsg.Response{produce, fetch} {
		resp, err := roundtrip(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(addrs(resp)) != len(nodes) {
			t.Fatalf("%s v%d: kmsg no longer decodes early endpoints; update the package doc", kmsg.NameForKey(r.Key()), r.GetVersion())
		}
		if err := Response(resp, newFakeMapper()); err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs(resp) {
			if a.host != proxyHost(a.id) {
				t.Errorf("%s v%d: node %d left at %s", kmsg.NameForKey(r.Key()), r.GetVersion(), a.id, a.host)
			}
		}
	}
}

func TestResponseIgnoresOtherTypes(t *testing.T) {
	m := newFakeMapper()
	for _, r := range []kmsg.Response{nil, kmsg.NewPtrListOffsetsResponse(), kmsg.NewPtrDescribeACLsResponse()} {
		if err := Response(r, m); err != nil {
			t.Errorf("Response(%T): %v", r, err)
		}
	}
	if m.calls != 0 {
		t.Errorf("Mapper called %d times", m.calls)
	}
}

// roleMapper records which method mapped each address.
type roleMapper struct{ nodes, controllers int }

func (m *roleMapper) MapNode(id int32, _ string, _ int32) (string, int32, error) {
	m.nodes++
	return "broker.proxy.test", 1000 + id, nil
}

func (m *roleMapper) MapController(id int32, _ string, _ int32) (string, int32, error) {
	m.controllers++
	return "controller.proxy.test", 2000 + id, nil
}

func TestControllerEndpointsUseMapController(t *testing.T) {
	for _, tc := range []struct {
		endpointType int8
		nodes, ctrls int
	}{{1, 2, 0}, {endpointTypeController, 0, 2}} {
		r := kmsg.NewPtrDescribeClusterResponse()
		r.SetVersion(1)
		r.EndpointType = tc.endpointType
		for id := int32(1); id <= 2; id++ {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port = id, "upstream", 9092
			r.Brokers = append(r.Brokers, b)
		}
		var m roleMapper
		if err := Response(r, &m); err != nil {
			t.Fatal(err)
		}
		if m.nodes != tc.nodes || m.controllers != tc.ctrls {
			t.Fatalf("endpoint type %d: %d broker and %d controller mappings, want %d and %d", tc.endpointType, m.nodes, m.controllers, tc.nodes, tc.ctrls)
		}
	}
	q := kmsg.NewPtrDescribeQuorumResponse()
	q.SetVersion(2)
	n := kmsg.NewDescribeQuorumResponseNode()
	n.NodeID = 1
	l := kmsg.NewDescribeQuorumResponseNodeListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "upstream", 9093
	n.Listeners = append(n.Listeners, l)
	q.Nodes = append(q.Nodes, n)
	var m roleMapper
	if err := Response(q, &m); err != nil {
		t.Fatal(err)
	}
	if m.nodes != 0 || m.controllers != 1 {
		t.Fatalf("DescribeQuorum: %d broker and %d controller mappings", m.nodes, m.controllers)
	}
}
