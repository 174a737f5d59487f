package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// TestMutatedAddresses runs pipelines of the requests whose responses carry
// broker addresses (Metadata, FindCoordinator, DescribeCluster for brokers
// and for controllers, Produce v10 and later and Fetch v16 and later with
// KIP-951 endpoints, and both without them, DescribeConfigs of a broker
// whose listeners and quorum name the backend) through the proxy to a backend
// that names its nodes at its own address and damages one response of each
// connection, as TestMutatedResponses does. In both modes:
//   - no response the client can read names the upstream's address, the
//     damaged ones included: every broker endpoint is the proxy's host and
//     one of its listeners, or port 0 (a node it will not serve), and every
//     controller endpoint has port 0 (controllers are not exposed);
//   - a node id has one proxy port in every response of every connection;
//   - an undamaged response names every node the backend named, and
//     answers its own request (id, tag, partitions), in order;
//   - every request before the damaged one is answered, every connection
//     ends, the memory budget is whole again and the proxy serves a new
//     client.
func TestMutatedAddresses(t *testing.T) {
	mutateResponses(t, answerAddressed, func(b *damagingBackend) (responsePipeline, func(*testing.T)) {
		book := &addressBook{upstream: b.addr, ports: map[int32]int32{}}
		return responsePipeline{backend: b, request: randomAddressed, check: book.check}, book.checkListening
	})
}

// addressedNodes are the node ids the backend names in its answer to the
// request with this tag (every one at the backend's own address): one to
// three brokers, the third with an id far from the others.
func addressedNodes(tag int64) []int32 {
	return []int32{0, 1, 2 << 20}[:1+tag%3]
}

// randomAddressed is a Metadata (v0 to v13), FindCoordinator (v0 to v6),
// DescribeCluster (v0 to v2, for brokers or controllers), Produce (v10 to
// v13), DescribeConfigs (v0 to v4, of the last node of addressedNodes) or
// Fetch (v16 to v18) request; its client id names its tag.
func randomAddressed(rng *rand.Rand, corr int32) tagged {
	tag := nextTag.Add(1)
	name := "a" + strconv.FormatInt(tag, 10)
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID(name))
	var req kmsg.Request
	var parts []string
	switch rng.IntN(6) {
	case 0:
		r := kmsg.NewPtrMetadataRequest()
		r.Version = int16(rng.IntN(14))
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		r.Topics = append(r.Topics, rt)
		parts = append(parts, name+"/0")
		req = r
	case 1:
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version = int16(rng.IntN(7))
		r.CoordinatorKey = name
		r.CoordinatorKeys = []string{name}
		req = r
	case 2:
		r := kmsg.NewPtrDescribeClusterRequest()
		r.Version = int16(rng.IntN(3))
		if r.Version >= 1 && rng.IntN(2) == 0 {
			r.EndpointType = 2 // controllers
		}
		req = r
	case 3:
		r := kmsg.NewPtrProduceRequest()
		r.Version = int16(10 + rng.IntN(4))
		r.Acks, r.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = name
		binary.BigEndian.PutUint64(rt.TopicID[:], uint64(tag))
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(rng.IntN(4))
		rp.Records = largeBatch(50 + rng.IntN(40<<10))
		rt.Partitions = append(rt.Partitions, rp)
		parts = append(parts, fmt.Sprintf("%d/%d", tag, rp.Partition))
		r.Topics = append(r.Topics, rt)
		req = r
	case 4:
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Version = int16(rng.IntN(5))
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeBroker
		ids := addressedNodes(tag)
		rr.ResourceName = strconv.Itoa(int(ids[len(ids)-1]))
		r.Resources = append(r.Resources, rr)
		req = r
	default:
		r := kmsg.NewPtrFetchRequest()
		r.Version = int16(16 + rng.IntN(3))
		r.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		binary.BigEndian.PutUint64(rt.TopicID[:], uint64(tag))
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(rng.IntN(4))
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		parts = append(parts, fmt.Sprintf("%d/%d", tag, rp.Partition))
		r.Topics = append(r.Topics, rt)
		req = r
	}
	return tagged{corr: corr, key: req.Key(), version: req.GetVersion(), tag: tag, parts: parts,
		frame: fmtr.AppendRequest(nil, req, corr)}
}

// answerAddressed answers a request of randomAddressed, naming the nodes
// of addressedNodes at self (a DescribeConfigs, its broker's listeners
// and its quorum). Produce and Fetch partitions answer
// NOT_LEADER_FOR_PARTITION with a current leader, as a broker that moved
// them does, and carry the endpoints when the tag is odd.
func answerAddressed(frame []byte, self net.Addr, rng *rand.Rand) ([]byte, int64, bool) {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil || len(frame) < 14 {
		return nil, 0, false
	}
	idLen := int(int16(binary.BigEndian.Uint16(frame[12:])))
	if idLen < 2 || 14+idLen > len(frame) || frame[14] != 'a' {
		return nil, 0, false
	}
	tag, err := strconv.ParseInt(string(frame[15:14+idLen]), 10, 64)
	if err != nil {
		return nil, 0, false
	}
	name := "a" + strconv.FormatInt(tag, 10)
	ta := self.(*net.TCPAddr)
	host, port := ta.IP.String(), int32(ta.Port)
	nodes := addressedNodes(tag)
	endpoints := tag%2 == 1
	leaderID := nodes[len(nodes)-1]
	var resp kmsg.Response
	switch h.Key {
	case 3:
		r := kmsg.NewPtrMetadataResponse()
		r.Version = h.Version
		r.ClusterID = kmsg.StringPtr(name)
		for _, id := range nodes {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, host, port
			r.Brokers = append(r.Brokers, b)
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Leader, rp.Replicas, rp.ISR = nodes[0], nodes, nodes
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp = r
	case 10:
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		r := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		r.NodeID, r.Host, r.Port, r.ErrorMessage = leaderID, host, port, kmsg.StringPtr(name)
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = key, leaderID, host, port
			r.Coordinators = append(r.Coordinators, c)
		}
		resp = r
	case 60:
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		r := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		r.ClusterID, r.EndpointType = name, req.EndpointType
		for _, id := range nodes {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port = id, host, port
			r.Brokers = append(r.Brokers, b)
		}
		resp = r
	case 32:
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		r := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorMessage = rr.ResourceType, rr.ResourceName, kmsg.StringPtr(name)
			res.Configs = brokerAddressConfigs(rr.ResourceName, host, port)
			r.Resources = append(r.Resources, res)
		}
		resp = r
	case 0:
		req := kmsg.NewPtrProduceRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		r := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic, tp.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				pp := kmsg.NewProduceResponseTopicPartition()
				pp.Partition, pp.BaseOffset = rp.Partition, tag
				pp.ErrorCode = kerr.NotLeaderForPartition.Code
				pp.CurrentLeader.LeaderID, pp.CurrentLeader.LeaderEpoch = leaderID, 7
				tp.Partitions = append(tp.Partitions, pp)
			}
			r.Topics = append(r.Topics, tp)
		}
		if endpoints {
			for _, id := range nodes {
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port = id, host, port
				r.Brokers = append(r.Brokers, b)
			}
		}
		resp = r
	case 1:
		req := kmsg.NewPtrFetchRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		r := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			tp := kmsg.NewFetchResponseTopic()
			tp.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				pp := kmsg.NewFetchResponseTopicPartition()
				pp.Partition, pp.HighWatermark = rp.Partition, tag
				pp.ErrorCode = kerr.NotLeaderForPartition.Code
				pp.CurrentLeader.LeaderID, pp.CurrentLeader.LeaderEpoch = leaderID, 7
				pp.RecordBatches = largeBatch(50 + rng.IntN(80<<10))
				tp.Partitions = append(tp.Partitions, pp)
			}
			r.Topics = append(r.Topics, tp)
		}
		if endpoints {
			for _, id := range nodes {
				b := kmsg.NewFetchResponseBroker()
				b.NodeID, b.Host, b.Port = id, host, port
				r.Brokers = append(r.Brokers, b)
			}
		}
		resp = r
	default:
		return nil, 0, false
	}
	return encodeResponse(h, resp), tag, true
}

// endpoint is one address a response names. other marks an address in a
// config value that names no broker listener: the proxy redacts every one
// the backend sends, but one that damage made up (a key or an address
// altered) it cannot tell from any other value, so only the upstream's own
// address is wrong there in a damaged response.
type endpoint struct {
	id         int32
	host       string
	port       int32
	controller bool
	other      bool
}

// addressBook checks the addresses in the responses clients get, and
// remembers the port given to each node id.
type addressBook struct {
	upstream string

	mu    sync.Mutex
	ports map[int32]int32 // broker node id to its proxy port
}

// check checks a response (id first) delivered to s. A response that does
// not parse, or that answers another request, is wrong only if the backend
// sent it undamaged; the addresses in any response that parses must be the
// proxy's, damaged or not.
func (ab *addressBook) check(s tagged, resp []byte, damaged bool) error {
	body := resp[4:]
	if wire.Flexible(s.key, s.version) {
		if len(body) == 0 || body[0] != 0 {
			if damaged {
				return nil
			}
			return errors.New("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	eps, tag, parts, err := readAddressed(s.key, s.version, body)
	if err != nil {
		if damaged {
			return nil
		}
		return fmt.Errorf("does not parse: %w", err)
	}
	if err := ab.note(eps); err != nil {
		return err
	}
	if damaged {
		return nil
	}
	if tag != s.tag && tag != -1 {
		return fmt.Errorf("answers the request tagged %d, not %d", tag, s.tag)
	}
	if fmt.Sprint(parts) != fmt.Sprint(s.parts) {
		return fmt.Errorf("answers partitions %v, not the request's %v", parts, s.parts)
	}
	want := len(addressedNodes(s.tag))
	switch {
	case s.key == 10:
		want = 1 // the coordinator
	case (s.key == 0 || s.key == 1) && s.tag%2 == 0:
		want = 0 // a Produce or Fetch answered without endpoints
	case s.key == 32 && len(eps) == 0:
		want = 0 // a broker the proxy did not serve yet: its listeners redacted
	case s.key == 32 && s.version == 0:
		want = 2 // the broker listener of advertised.listeners and of listeners
	case s.key == 32:
		want = 3 // and of advertised.listeners' synonym
	}
	if len(eps) != want {
		return fmt.Errorf("names %d endpoints, the backend named %d", len(eps), want)
	}
	for _, e := range eps {
		if e.other {
			return fmt.Errorf("a config value names %s:%d in a response the backend sent whole", e.host, e.port)
		}
		if !e.controller && e.port == 0 {
			return fmt.Errorf("node %d was given port 0 in a response the backend sent whole", e.id)
		}
	}
	return nil
}

// note checks the endpoints of one response and records their ports.
func (ab *addressBook) note(eps []endpoint) error {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	for _, e := range eps {
		addr := net.JoinHostPort(e.host, strconv.Itoa(int(e.port)))
		switch {
		case addr == ab.upstream:
			return fmt.Errorf("node %d is named at the upstream's own address %s", e.id, addr)
		case e.port <= 0: // a node the proxy does not serve, or none
			continue
		case e.other: // a damaged config value; see check
			continue
		case e.controller:
			return fmt.Errorf("controller %d is named at %s, but controllers are not exposed", e.id, addr)
		case e.host != "127.0.0.1":
			return fmt.Errorf("node %d is named at %s, not at the proxy's host", e.id, addr)
		}
		if was, ok := ab.ports[e.id]; ok && was != e.port {
			return fmt.Errorf("node %d is named at port %d, and before at %d", e.id, e.port, was)
		}
		ab.ports[e.id] = e.port
	}
	return nil
}

// checkListening checks that every port a response gave a node is a
// proxy listener that accepts a connection.
func (ab *addressBook) checkListening(t *testing.T) {
	t.Helper()
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if len(ab.ports) < 3 {
		t.Fatalf("responses named %d nodes, want at least the backend's 3", len(ab.ports))
	}
	for id, port := range ab.ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		if addr == ab.upstream {
			t.Fatalf("node %d is named at the upstream's address", id)
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("node %d is named at %s, where nothing listens: %v", id, addr, err)
		}
		c.Close()
	}
}

// readAddressed reads a response to a request of randomAddressed: the
// endpoints it names, its tag (-1 where the response has no place for it)
// and the partitions it answers.
func readAddressed(key, version int16, body []byte) (eps []endpoint, tag int64, parts []string, err error) {
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, 0, nil, err
	}
	tag = -1
	named := func(s *string) {
		if s != nil && len(*s) > 1 && (*s)[0] == 'a' {
			if n, err := strconv.ParseInt((*s)[1:], 10, 64); err == nil {
				tag = n
			} else {
				tag = -2
			}
		}
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for _, b := range r.Brokers {
			eps = append(eps, endpoint{id: b.NodeID, host: b.Host, port: b.Port})
		}
		if version >= 2 {
			named(r.ClusterID)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				topic := "<null>"
				if t.Topic != nil {
					topic = *t.Topic
				}
				parts = append(parts, fmt.Sprintf("%s/%d", topic, p.Partition))
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if version < 4 {
			eps = append(eps, endpoint{id: r.NodeID, host: r.Host, port: r.Port})
			if version >= 1 {
				named(r.ErrorMessage)
			}
		}
		for _, c := range r.Coordinators {
			eps = append(eps, endpoint{id: c.NodeID, host: c.Host, port: c.Port})
			named(&c.Key)
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			eps = append(eps, endpoint{id: b.NodeID, host: b.Host, port: b.Port, controller: r.EndpointType == 2})
		}
		named(&r.ClusterID)
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			eps = append(eps, endpoint{id: b.NodeID, host: b.Host, port: b.Port})
		}
		for _, t := range r.Topics {
			topic := fmt.Sprint(binary.BigEndian.Uint64(t.TopicID[:]))
			if version < 13 {
				topic = strings.TrimPrefix(t.Topic, "a")
			}
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d", topic, p.Partition))
				tag = p.BaseOffset
			}
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			eps = append(eps, endpoint{id: b.NodeID, host: b.Host, port: b.Port})
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%d/%d", binary.BigEndian.Uint64(t.TopicID[:]), p.Partition))
				tag = p.HighWatermark
			}
		}
	case *kmsg.DescribeConfigsResponse:
		for _, res := range r.Resources {
			named(res.ErrorMessage)
			id := int32(-1)
			if n, err := strconv.ParseInt(res.ResourceName, 10, 32); err == nil && res.ResourceType == kmsg.ConfigResourceTypeBroker {
				id = int32(n)
			}
			for _, c := range res.Configs {
				eps = append(eps, configEndpoints(id, c.Name, c.Value)...)
				for _, syn := range c.ConfigSynonyms {
					eps = append(eps, configEndpoints(id, syn.Name, syn.Value)...)
				}
			}
		}
	}
	return eps, tag, parts, nil
}

// brokerAddressConfigs is what Apache Kafka answers a DescribeConfigs of
// broker id running both KRaft roles at host:port (its controller one port
// above): its listeners, its quorum, and a value naming the broker.
func brokerAddressConfigs(id, host string, port int32) []kmsg.DescribeConfigsResponseResourceConfig {
	self := net.JoinHostPort(host, strconv.Itoa(int(port)))
	ctl := net.JoinHostPort(host, strconv.Itoa(int(port)+1))
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, kv := range [][3]string{
		{"advertised.listeners", "PLAINTEXT://" + self + ",CONTROLLER://" + ctl, "PLAINTEXT://" + self},
		{"listeners", "PLAINTEXT://0.0.0.0:" + strconv.Itoa(int(port)) + ",CONTROLLER://:" + strconv.Itoa(int(port)+1)},
		{"controller.listener.names", "CONTROLLER"},
		{"controller.quorum.voters", id + "@" + ctl, id + "@" + ctl},
		{"controller.quorum.bootstrap.servers", ctl},
		{"metric.reporter.endpoint", "http://" + self + "/metrics"},
		{"log.dirs", "/var/lib/kafka"},
	} {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		if kv[2] != "" {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = kv[0], kmsg.StringPtr(kv[2]), kmsg.ConfigSourceStaticBrokerConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
		out = append(out, c)
	}
	return out
}

// configEndpoints reads the addresses in a config value of broker id (-1
// for a resource that is no broker): a listener list names the broker's
// endpoints; any other host:port in a value is a controller's, or another
// server's (other), which no response may name.
func configEndpoints(id int32, name string, value *string) []endpoint {
	if value == nil {
		return nil
	}
	var eps []endpoint
	listeners := name == "advertised.listeners" || name == "listeners"
	for _, item := range strings.FieldsFunc(*value, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
		if _, rest, ok := strings.Cut(item, "://"); ok {
			item = rest
		}
		if i := strings.LastIndexByte(item, '@'); i >= 0 {
			item = item[i+1:]
		}
		item, _, _ = strings.Cut(item, "/")
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		eps = append(eps, endpoint{id: id, host: host, port: int32(p), other: !listeners})
	}
	return eps
}
