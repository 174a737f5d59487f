package rewrite

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rewrittenKeys are the response keys whose addresses Response rewrites.
var rewrittenKeys = []int16{0, 1, 3, 10, 32, 52, 53, 54, 55, 59, 60, 78, 79, 82}

var errBoom = errors.New("mapper boom")

// fakeMapper maps node n to p<n>.proxy.test:30000+n%1000, so a test can tell
// from an address alone which node it was mapped for.
// Every int32 is a node id a response may carry (the fuzzer finds them
// all), so failing is a flag of its own, not a reserved id.
type fakeMapper struct {
	fail     bool  // MapNode fails for failNode
	failNode int32 // with fail set
	calls    int
}

func newFakeMapper() *fakeMapper { return &fakeMapper{} }

func (m *fakeMapper) MapController(id int32, host string, port int32) (string, int32, error) {
	return m.MapNode(id, host, port)
}

func (m *fakeMapper) MapNode(id int32, _ string, _ int32) (string, int32, error) {
	m.calls++
	if m.fail && id == m.failNode {
		return "", 0, errBoom
	}
	return proxyHost(id), proxyPort(id), nil
}

func proxyHost(id int32) string { return fmt.Sprintf("p%d.proxy.test", id) }
func proxyPort(id int32) int32  { return 30000 + int32(uint32(id)%1000) }

func upstreamHost(id int32) string { return fmt.Sprintf("b%d.upstream.test", id) }
func upstreamPort(id int32) int32  { return 9092 + id }

// addr is one address found in a response. mustMap is false for addresses
// that name no node (failed or unknown coordinators and leaders), which
// Response clears instead (see cleared).
type addr struct {
	id      int32
	host    string
	port    int32
	mustMap bool
}

// addrs lists every address resp carries on the wire at its version. It is
// written independently of Response so that each checks the other.
func addrs(resp kmsg.Response) []addr {
	var out []addr
	add := func(id int32, host string, port int32, mustMap bool) {
		out = append(out, addr{id, host, port, mustMap})
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, true)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version <= 3 {
			add(r.NodeID, r.Host, r.Port, r.ErrorCode == 0 && r.NodeID >= 0)
		}
		for _, c := range r.Coordinators {
			add(c.NodeID, c.Host, c.Port, c.ErrorCode == 0 && c.NodeID >= 0)
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, true)
		}
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, true)
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, true)
		}
	case *kmsg.ShareFetchResponse:
		for _, e := range r.NodeEndpoints {
			add(e.NodeID, e.Host, e.Port, true)
		}
	case *kmsg.ShareAcknowledgeResponse:
		for _, e := range r.NodeEndpoints {
			add(e.NodeID, e.Host, e.Port, true)
		}
	case *kmsg.DescribeQuorumResponse:
		for _, n := range r.Nodes {
			for _, l := range n.Listeners {
				add(n.NodeID, l.Host, int32(l.Port), true)
			}
		}
	case *kmsg.VoteResponse:
		if r.Version >= 1 {
			for _, e := range r.NodeEndpoints {
				add(e.NodeID, e.Host, int32(e.Port), true)
			}
		}
	case *kmsg.BeginQuorumEpochResponse:
		if r.Version >= 1 {
			for _, e := range r.NodeEndpoints {
				add(e.NodeID, e.Host, int32(e.Port), true)
			}
		}
	case *kmsg.EndQuorumEpochResponse:
		if r.Version >= 1 {
			for _, e := range r.NodeEndpoints {
				add(e.NodeID, e.Host, int32(e.Port), true)
			}
		}
	case *kmsg.FetchSnapshotResponse:
		if r.Version >= 1 {
			for _, e := range r.NodeEndpoints {
				add(e.NodeID, e.Host, int32(e.Port), true)
			}
		}
	case *kmsg.UpdateRaftVoterResponse:
		l := r.CurrentLeader
		add(l.LeaderID, l.Host, l.Port, l.LeaderID >= 0)
	}
	return out
}

// roundtrip encodes resp and decodes it into a fresh response of the same
// key and version, as the proxy does with upstream bytes.
func roundtrip(resp kmsg.Response) (kmsg.Response, error) {
	raw := resp.AppendTo(nil)
	out := kmsg.ResponseForKey(resp.Key())
	out.SetVersion(resp.GetVersion())
	if err := out.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return out, nil
}

// cleared reports whether a is the address Response leaves where it maps
// nothing: an empty host and port -1.
func (a addr) cleared() bool { return a.host == "" && a.port == -1 }
