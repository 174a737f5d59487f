package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// maxNodes bounds the listeners an upstream can make the proxy open, so a
// broken or hostile backend cannot exhaust its descriptors through metadata.
const maxNodes = 1024

// reopenAfter spaces the retries of a node listener that could not open
// (its port taken, say): metadata naming the node retries it no more often.
const reopenAfter = 10 * time.Second

// nodeTable maps upstream node ids to the proxy listeners that stand for
// them. It is the rewrite.Mapper of every connection: the first response
// naming a node opens that node's listener, and a later one that moves the
// node to another upstream address redirects new connections there.
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

	mu          sync.Mutex
	nodes       map[int32]*node
	controllers map[string]*node // by upstream address
	overLogged  bool             // the cap was reported
}

type node struct {
	id       int32
	port     int32 // the proxy's listener port; 0 while it has none
	upstream string
	allowed  bool      // upstream matches the allow-list
	failedAt time.Time // the last time its listener could not open
}

func (t *nodeTable) init(p *Proxy, bootPort int) {
	t.p = p
	t.nodes = make(map[int32]*node)
	t.controllers = make(map[string]*node)
	t.allow = newAllowList(p.cfg.AllowUpstream)
	t.limit = maxNodes
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
// port 0 (see nodeTable), and the reason is logged.
func (t *nodeTable) MapNode(id int32, host string, port int32) (string, int32, error) {
	p, _ := t.mapNode(id, host, port)
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
