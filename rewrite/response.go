package rewrite

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Mapper maps an upstream broker (its node id and advertised host/port) to
// the proxy listener that stands for it. It may open that listener on first use.
//
// One node id can come with several addresses: a KRaft node running both
// roles advertises its broker listener in Metadata and its controller
// listeners in DescribeQuorum, the KRaft RPCs and DescribeCluster with
// EndpointType 2. Broker endpoints go to MapNode and controller endpoints
// to MapController, so a Mapper can key brokers by node id without a
// controller listener moving a broker.
type Mapper interface {
	// MapNode maps a broker endpoint.
	MapNode(nodeID int32, host string, port int32) (proxyHost string, proxyPort int32, err error)
	// MapController maps a controller endpoint.
	MapController(nodeID int32, host string, port int32) (proxyHost string, proxyPort int32, err error)
}

// endpointTypeController is DescribeCluster's EndpointType for controllers
// (KIP-919).
const endpointTypeController = 2

// Response rewrites resp in place, replacing every broker address it carries
// with the one m maps it to. Node ids are kept, so they stay consistent with
// the partition leaders and replicas in the same response.
//
// It rewrites every address that kmsg encodes at resp's version, which is a
// little more than Needs asks for: kmsg decodes and encodes the KIP-951
// Produce and Fetch endpoints at every flexible version, so an out-of-spec
// upstream that sends them early is still rewritten. ApiVersions and
// responses without addresses are left alone; the proxy clamps ApiVersions
// with ClampVersions.
//
// On error resp may be partly rewritten and must not be forwarded.
func Response(resp kmsg.Response, m Mapper) error {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		return metadata(r, m)
	case *kmsg.FindCoordinatorResponse:
		return findCoordinator(r, m)
	case *kmsg.DescribeClusterResponse:
		return describeCluster(r, m)
	case *kmsg.ProduceResponse:
		return produce(r, m)
	case *kmsg.FetchResponse:
		return fetch(r, m)
	case *kmsg.ShareFetchResponse:
		return shareFetch(r, m)
	case *kmsg.ShareAcknowledgeResponse:
		return shareAcknowledge(r, m)
	case *kmsg.DescribeQuorumResponse:
		return describeQuorum(r, m)
	case *kmsg.VoteResponse:
		return vote(r, m)
	case *kmsg.BeginQuorumEpochResponse:
		return beginQuorumEpoch(r, m)
	case *kmsg.EndQuorumEpochResponse:
		return endQuorumEpoch(r, m)
	case *kmsg.FetchSnapshotResponse:
		return fetchSnapshot(r, m)
	case *kmsg.UpdateRaftVoterResponse:
		return updateRaftVoter(r, m)
	case *kmsg.DescribeConfigsResponse:
		// A Mapper that cannot say where a node is advertised without
		// mapping it leaves listener values to be redacted.
		a, _ := m.(Addresser)
		DescribeConfigs(r, a)
	}
	return nil
}

// mapAddr rewrites one int32-port broker address.
func mapAddr(m Mapper, id int32, host *string, port *int32) error {
	return mapWith(m.MapNode, id, host, port)
}

func mapWith(fn func(int32, string, int32) (string, int32, error), id int32, host *string, port *int32) error {
	h, p, err := fn(id, *host, *port)
	if err != nil {
		return fmt.Errorf("%w: node %d at %s:%d: %w", ErrMap, id, *host, *port, err)
	}
	*host, *port = h, p
	return nil
}

// unmapped clears an address that names no node (a failed or unknown
// coordinator, an unknown leader) to what Kafka sends there: an empty host
// and port -1. Clients ignore it, but an upstream may fill it with its own
// address, which must not reach them.
func unmapped(host *string, port *int32) {
	*host, *port = "", -1
}

// mapAddr16 rewrites one controller address whose port is a uint16 on the
// wire; every such field is a controller endpoint.
func mapAddr16(m Mapper, id int32, host *string, port *uint16) error {
	h, p, err := m.MapController(id, *host, int32(*port))
	if err != nil {
		return fmt.Errorf("%w: node %d at %s:%d: %w", ErrMap, id, *host, *port, err)
	}
	if p < 0 || p > math.MaxUint16 {
		return fmt.Errorf("%w: node %d at %s:%d mapped to port %d", ErrPortRange, id, *host, *port, p)
	}
	*host, *port = h, uint16(p)
	return nil
}

func metadata(r *kmsg.MetadataResponse, m Mapper) error {
	return brokerList(m, r.Brokers, func(b *kmsg.MetadataResponseBroker) (int32, *string, *int32) { return b.NodeID, &b.Host, &b.Port })
}

// findCoordinator maps no coordinator that failed or is unknown: there is
// no listener to stand for it. Its address is cleared instead (see unmapped).
func findCoordinator(r *kmsg.FindCoordinatorResponse, m Mapper) error {
	// v0-3 carry one coordinator at the top level, v4+ a list (KIP-699);
	// the fields of the other layout are not on the wire and read as zero.
	if r.Version <= 3 {
		if r.ErrorCode != 0 || r.NodeID < 0 {
			unmapped(&r.Host, &r.Port)
			return nil
		}
		return mapAddr(m, r.NodeID, &r.Host, &r.Port)
	}
	for i := range r.Coordinators {
		c := &r.Coordinators[i]
		if c.ErrorCode != 0 || c.NodeID < 0 {
			unmapped(&c.Host, &c.Port)
			continue
		}
		if err := mapAddr(m, c.NodeID, &c.Host, &c.Port); err != nil {
			return err
		}
	}
	return nil
}

func describeCluster(r *kmsg.DescribeClusterResponse, m Mapper) error {
	fn := m.MapNode
	if r.EndpointType == endpointTypeController {
		fn = m.MapController
	}
	for i := range r.Brokers {
		b := &r.Brokers[i]
		if err := mapWith(fn, b.NodeID, &b.Host, &b.Port); err != nil {
			return err
		}
	}
	return nil
}

// brokerList maps every broker endpoint of list; at returns an entry's
// node id and the fields to rewrite.
func brokerList[E any](m Mapper, list []E, at func(*E) (int32, *string, *int32)) error {
	for i := range list {
		id, host, port := at(&list[i])
		if err := mapAddr(m, id, host, port); err != nil {
			return err
		}
	}
	return nil
}

// controllerList maps the KRaft endpoint list of a response at version.
// These lists are tagged fields whose entries carry a node id, host and
// port only from v1; at v0 kmsg decodes empty entries, which must not
// reach the Mapper as node 0.
func controllerList[E any](m Mapper, version int16, list []E, at func(*E) (int32, *string, *uint16)) error {
	if version < 1 {
		return nil
	}
	for i := range list {
		id, host, port := at(&list[i])
		if err := mapAddr16(m, id, host, port); err != nil {
			return err
		}
	}
	return nil
}

func produce(r *kmsg.ProduceResponse, m Mapper) error {
	return brokerList(m, r.Brokers, func(b *kmsg.ProduceResponseBroker) (int32, *string, *int32) { return b.NodeID, &b.Host, &b.Port })
}

func fetch(r *kmsg.FetchResponse, m Mapper) error {
	return brokerList(m, r.Brokers, func(b *kmsg.FetchResponseBroker) (int32, *string, *int32) { return b.NodeID, &b.Host, &b.Port })
}

func shareFetch(r *kmsg.ShareFetchResponse, m Mapper) error {
	return brokerList(m, r.NodeEndpoints, func(e *kmsg.ShareFetchResponseNodeEndpoint) (int32, *string, *int32) {
		return e.NodeID, &e.Host, &e.Port
	})
}

func shareAcknowledge(r *kmsg.ShareAcknowledgeResponse, m Mapper) error {
	return brokerList(m, r.NodeEndpoints, func(e *kmsg.ShareAcknowledgeResponseNodeEndpoint) (int32, *string, *int32) {
		return e.NodeID, &e.Host, &e.Port
	})
}

// describeQuorum maps every listener of a controller separately: a node
// may advertise several, and the Mapper tells them apart by host and port.
func describeQuorum(r *kmsg.DescribeQuorumResponse, m Mapper) error {
	for i := range r.Nodes {
		n := &r.Nodes[i]
		for j := range n.Listeners {
			l := &n.Listeners[j]
			if err := mapAddr16(m, n.NodeID, &l.Host, &l.Port); err != nil {
				return err
			}
		}
	}
	return nil
}

func vote(r *kmsg.VoteResponse, m Mapper) error {
	return controllerList(m, r.Version, r.NodeEndpoints, func(e *kmsg.VoteResponseNodeEndpoint) (int32, *string, *uint16) { return e.NodeID, &e.Host, &e.Port })
}

func beginQuorumEpoch(r *kmsg.BeginQuorumEpochResponse, m Mapper) error {
	return controllerList(m, r.Version, r.NodeEndpoints, func(e *kmsg.BeginQuorumEpochResponseNodeEndpoint) (int32, *string, *uint16) {
		return e.NodeID, &e.Host, &e.Port
	})
}

func endQuorumEpoch(r *kmsg.EndQuorumEpochResponse, m Mapper) error {
	return controllerList(m, r.Version, r.NodeEndpoints, func(e *kmsg.EndQuorumEpochResponseNodeEndpoint) (int32, *string, *uint16) {
		return e.NodeID, &e.Host, &e.Port
	})
}

func fetchSnapshot(r *kmsg.FetchSnapshotResponse, m Mapper) error {
	return controllerList(m, r.Version, r.NodeEndpoints, func(e *kmsg.FetchSnapshotResponseNodeEndpoint) (int32, *string, *uint16) {
		return e.NodeID, &e.Host, &e.Port
	})
}

// updateRaftVoter rewrites the leader only when one is known; an unknown
// leader (-1, the tag's default) has no address, and its fields are
// cleared (see unmapped).
func updateRaftVoter(r *kmsg.UpdateRaftVoterResponse, m Mapper) error {
	l := &r.CurrentLeader
	if l.LeaderID < 0 {
		unmapped(&l.Host, &l.Port)
		return nil
	}
	return mapWith(m.MapController, l.LeaderID, &l.Host, &l.Port)
}
