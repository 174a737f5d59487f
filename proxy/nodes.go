package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/sni"
)

// maxNodes bounds the listeners an upstream can make the proxy open, so a
// broken or hostile backend cannot exhaust its descriptors through metadata.
const maxNodes = 1024

// reopenAfter spaces the retries of a node listener that could not open
// (its port taken, say): metadata naming the node retries it no more often.
const reopenAfter = 10 * time.Second

// nodeTable maps upstream node ids to what stands for them at the proxy.
// It is the rewrite.Mapper of every connection, for either topology:
//
//   - ports: the first response naming a node opens that node's
//     listener, and the node is advertised at the proxy's host and that
//     listener's port;
//   - sni: no listener opens; the node is advertised under its name (the
//     node pattern with its id) on the one port, and the SNI listener looks
//     the node up here by id when a client asks for that name.
//
// In both, a later response that moves the node to another upstream
// address redirects new connections there.
//
// A node the proxy will not or cannot serve (outside the allow-list, a
// listener that cannot open, past the listener cap, a controller while
// controllers are not exposed, the proxy closing) is mapped to the
// advertised host with port 0: the response is still answered, clients
// find that one node unreachable, and nothing sends them to the upstream's
// own address. Only Discover, at start, reports such a node as an error.
type nodeTable struct {
	p *Proxy
	// base is the port of node 0; -1 gives every node an ephemeral port.
	base  int
	allow allowList
	limit int // maxNodes, lowered by tests
	// names is set in the sni topology: nodes and controllers are
	// advertised under their names on port advPort, and nothing listens
	// for them. Nil in the ports topology.
	names   *sni.Names
	advPort int32

	mu          sync.Mutex
	nodes       map[int32]*node
	controllers map[string]*node // by upstream address; by name (sni) too
	overLogged  bool             // the cap was reported
}

type node struct {
	id       int32
	port     int32 // the proxy's listener port; 0 while it has none
	upstream string
	allowed  bool      // upstream matches the allow-list
	failedAt time.Time // the last time its listener could not open
	// otherSeen: a controller named by id (sni) was advertised at another
	// address, which was logged.
	otherSeen bool
}

func (t *nodeTable) init(p *Proxy, bootPort int) {
	t.p = p
	t.nodes = make(map[int32]*node)
	t.controllers = make(map[string]*node)
	t.allow = newAllowList(p.cfg.AllowUpstream)
	t.limit = maxNodes
	if p.cfg.Topology == config.TopologySNI {
		names := p.cfg.Names()
		t.names = &names
		t.advPort = int32(bootPort)
		if p.cfg.AdvertisedPort != 0 {
			t.advPort = int32(p.cfg.AdvertisedPort)
		}
	}
	switch {
	case p.cfg.NodePortBase > 0:
		t.base = p.cfg.NodePortBase
	case listenPortZero(p.cfg.Listen):
		t.base = -1
	default:
		t.base = bootPort + 1
	}
}

func listenPortZero(listen string) bool {
	_, port, _ := net.SplitHostPort(listen)
	return port == "0"
}

func (t *nodeTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nodes)
}

// target returns where connections to n go, read at each connection so a
// moved node's new connections follow it; a node moved outside the
// allow-list resolves to nothing and its new connections are refused.
func (t *nodeTable) target(n *node) target {
	return target{node: n.id, resolve: func() (string, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !n.allowed {
			return "", fmt.Errorf("%w: node %d at %s", ErrNotAllowed, n.id, n.upstream)
		}
		return n.upstream, nil
	}}
}

// MapNode implements rewrite.Mapper: a node that cannot be served maps to
// port 0 (see nodeTable), and the reason is logged. In the sni topology
// the host is the node's name, so a node id and its name always agree.
func (t *nodeTable) MapNode(id int32, host string, port int32) (string, int32, error) {
	p, _ := t.mapNode(id, host, port)
	if t.names != nil {
		if id < 0 {
			return t.names.Bootstrap, 0, nil
		}
		return t.names.Node.Name(id), p, nil
	}
	return t.p.advHost, p, nil
}

// mapNode returns the proxy port standing for node id at host:port, and
// why it is 0.
func (t *nodeTable) mapNode(id int32, host string, port int32) (int32, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[id]
	switch {
	case ok && n.upstream != addr:
		t.p.log.Info("node moved", "node", id, "from", n.upstream, "to", addr)
		n.upstream = addr
		n.allowed = t.checkAllowed("node", id, host, addr)
	case !ok:
		if len(t.nodes) >= t.limit {
			err := fmt.Errorf("%w: node %d: the upstream named more than %d nodes", ErrNodePort, id, t.limit)
			if !t.overLogged {
				t.overLogged = true
				t.p.log.Warn("node listener cap reached; further nodes are unreachable through the proxy", "node", id, "upstream", addr, "cap", t.limit)
			}
			return 0, err
		}
		n = &node{id: id, upstream: addr, allowed: t.checkAllowed("node", id, host, addr)}
		t.nodes[id] = n
	}
	if !n.allowed {
		return 0, fmt.Errorf("%w: node %d at %s", ErrNotAllowed, id, addr)
	}
	if t.names != nil {
		if id < 0 {
			return 0, fmt.Errorf("%w: node %d has no name: a node id is not negative", ErrNodePort, id)
		}
		return t.advPort, nil
	}
	if n.port != 0 {
		return n.port, nil
	}
	if !n.failedAt.IsZero() && time.Since(n.failedAt) < reopenAfter {
		return 0, fmt.Errorf("%w: node %d: its listener failed to open %s ago", ErrNodePort, id, time.Since(n.failedAt).Round(time.Second))
	}
	lport := 0
	if t.base >= 0 {
		if id < 0 || int64(t.base)+int64(id) > 65535 {
			n.failedAt = time.Now()
			err := fmt.Errorf("%w: node %d would listen on port %d, out of range: set --node-port-base so that base + node id stays below 65536", ErrNodePort, id, int64(t.base)+int64(id))
			t.p.log.Warn("node unreachable through the proxy", "node", id, "upstream", addr, "err", err)
			return 0, err
		}
		lport = t.base + int(id)
	}
	if err := t.open("node", n, lport); err != nil {
		n.failedAt = time.Now()
		if !errors.Is(err, ErrClosed) {
			t.p.log.Warn("node unreachable through the proxy", "node", id, "upstream", addr, "err", err)
		}
		return 0, err
	}
	return n.port, nil
}

// checkAllowed reports whether the allow-list lets the proxy reach addr,
// and logs the node it refuses. The caller holds t.mu.
func (t *nodeTable) checkAllowed(role string, id int32, host, addr string) bool {
	if t.allow.allows(host) {
		return true
	}
	t.p.log.Warn(role+" outside allow-upstream; no listener, unreachable through the proxy", "node", id, "upstream", addr)
	return false
}

// MapController implements rewrite.Mapper. Controllers are reachable
// through the proxy only with ExposeControllers; then each controller
// address gets a listener of its own on a free port (their ids may equal
// broker ids), kept for the proxy's life. Otherwise they map to port 0.
func (t *nodeTable) MapController(id int32, host string, port int32) (string, int32, error) {
	if t.names != nil {
		return t.mapControllerName(id, host, port)
	}
	if !t.p.cfg.ExposeControllers {
		return t.p.advHost, 0, nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.controllers[addr]
	if !ok {
		if len(t.controllers) >= t.limit {
			if !t.overLogged {
				t.overLogged = true
				t.p.log.Warn("controller listener cap reached; further controllers are unreachable through the proxy", "node", id, "upstream", addr, "cap", t.limit)
			}
			return t.p.advHost, 0, nil
		}
		n = &node{id: id, upstream: addr, allowed: t.checkAllowed("controller", id, host, addr)}
		t.controllers[addr] = n
	}
	if !n.allowed || (n.port == 0 && !n.failedAt.IsZero() && time.Since(n.failedAt) < reopenAfter) {
		return t.p.advHost, n.port, nil
	}
	if n.port == 0 {
		if err := t.open("controller", n, 0); err != nil {
			n.failedAt = time.Now()
			if !errors.Is(err, ErrClosed) {
				t.p.log.Warn("controller unreachable through the proxy", "node", id, "upstream", addr, "err", err)
			}
		}
	}
	return t.p.advHost, n.port, nil
}

// Advertised implements rewrite.Addresser: the address MapNode last gave
// broker id, if the proxy serves it, read without opening a listener or
// moving the node, for the config values that name it.
func (t *nodeTable) Advertised(id int32) (string, int32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[id]
	switch {
	case !ok || !n.allowed || id < 0:
		return "", 0, false
	case t.names != nil:
		return t.names.Node.Name(id), t.advPort, true
	case n.port == 0:
		return "", 0, false
	}
	return t.p.advHost, n.port, true
}

// Upstream implements rewrite.Addresser: whether host:port is a seed, or
// the address of a broker or controller a response named.
func (t *nodeTable) Upstream(host string, port int32) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	for _, u := range t.p.current().Upstreams {
		if strings.EqualFold(u, addr) {
			return true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if strings.EqualFold(n.upstream, addr) {
			return true
		}
	}
	for _, n := range t.controllers {
		if strings.EqualFold(n.upstream, addr) {
			return true
		}
	}
	return false
}

// mapControllerName is MapController in the sni topology. A controller's
// name carries only its id, so controllers are kept by id: the first
// address seen for an id is the one its name reaches for the proxy's life
// (a controller advertising several listeners is reached on the first),
// and a later address for the same id is logged once and otherwise not
// taken. Without ExposeControllers, or past the cap, every controller is
// the bootstrap name with port 0.
func (t *nodeTable) mapControllerName(id int32, host string, port int32) (string, int32, error) {
	if !t.p.cfg.ExposeControllers || id < 0 {
		return t.names.Bootstrap, 0, nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	key := controllerKey(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.controllers[key]
	switch {
	case !ok && len(t.controllers) >= t.limit:
		if !t.overLogged {
			t.overLogged = true
			t.p.log.Warn("controller cap reached; further controllers are unreachable through the proxy", "node", id, "upstream", addr, "cap", t.limit)
		}
		return t.names.Bootstrap, 0, nil
	case !ok:
		n = &node{id: id, upstream: addr, allowed: t.checkAllowed("controller", id, host, addr)}
		t.controllers[key] = n
		t.p.log.Info("controller reachable by name", "node", id, "name", t.names.Controller.Name(id), "upstream", addr)
	case n.upstream != addr && !n.otherSeen:
		n.otherSeen = true
		t.p.log.Info("controller advertised at another address; its name keeps reaching the first", "node", id, "upstream", n.upstream, "other", addr)
	}
	if !n.allowed {
		return t.names.Controller.Name(id), 0, nil
	}
	return t.names.Controller.Name(id), t.advPort, nil
}

// controllerKey is a controller's key in nodeTable.controllers in the sni
// topology; upstream addresses, the keys of the ports topology, always
// hold a colon and never collide with it.
func controllerKey(id int32) string { return "id " + strconv.Itoa(int(id)) }

// byName returns the broker (or, with controller, the controller) with
// node id, for a connection that asked for its name, and why there is
// none: the upstream never advertised it, or advertised it outside the
// allow-list.
func (t *nodeTable) byName(id int32, controller bool) (*node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n *node
	if controller {
		n = t.controllers[controllerKey(id)]
	} else {
		n = t.nodes[id]
	}
	switch {
	case n == nil:
		return nil, errUnknownNode
	case !n.allowed:
		return nil, fmt.Errorf("%w: node %d at %s", ErrNotAllowed, id, n.upstream)
	}
	return n, nil
}

// openErr returns an error naming a node or controller the proxy should
// serve but whose listener could not open, or nil.
func (t *nodeTable) openErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n.allowed && n.port == 0 && !n.failedAt.IsZero() {
			return fmt.Errorf("%w: node %d: its listener could not open", ErrNodePort, n.id)
		}
	}
	for _, n := range t.controllers {
		if n.allowed && n.port == 0 && !n.failedAt.IsZero() {
			return fmt.Errorf("%w: controller %d at %s: its listener could not open", ErrNodePort, n.id, n.upstream)
		}
	}
	return nil
}

// listening counts the node and controller listeners open.
func (t *nodeTable) listening() (nodes, controllers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n.port != 0 {
			nodes++
		}
	}
	for _, n := range t.controllers {
		if n.port != 0 {
			controllers++
		}
	}
	return nodes, controllers
}

// open listens on port (0: a free one) of the listen host and serves
// connections to n there, setting n.port. The caller holds t.mu.
func (t *nodeTable) open(role string, n *node, port int) error {
	ln, err := t.p.listen(net.JoinHostPort(t.p.listenHost, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w: %s %d on port %d: %s (free the port, or choose another --node-port-base)", ErrNodePort, role, n.id, port, config.ListenReason(err))
	}
	tg := t.target(n)
	tg.controller = role == "controller"
	if err := t.p.serveTarget(ln, tg); err != nil {
		ln.Close()
		return err
	}
	n.port = int32(ln.Addr().(*net.TCPAddr).Port)
	t.p.log.Info(role+" listener open", "node", n.id, "listen", ln.Addr().String(), "upstream", n.upstream)
	return nil
}

// fetchBrokers asks the upstream for its brokers with a metadata request
// that names no topics, on connections made by dial.
func fetchBrokers(ctx context.Context, seeds []string, dialTimeout time.Duration, dial func(context.Context, string, string) (net.Conn, error)) ([]kmsg.MetadataResponseBroker, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestRetries(2), kgo.Dialer(dial)}
	if dialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(dialTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrUpstreamFailed, err)
	}
	return resp.Brokers, nil
}
