package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxNodes bounds the listeners an upstream can make the proxy open, so a
// broken or hostile backend cannot exhaust its descriptors through metadata.
const maxNodes = 1024

// nodeTable maps upstream node ids to the proxy listeners that stand for
// them. It is the rewrite.Mapper of every connection: the first response
// naming a node opens that node's listener, and a later one that moves the
// node to another upstream address redirects new connections there.
type nodeTable struct {
	p *Proxy
	// base is the port of node 0; -1 gives every node an ephemeral port.
	base int

	mu          sync.Mutex
	nodes       map[int32]*node
	controllers map[string]*node // by upstream address
}

type node struct {
	id       int32
	port     int32 // the proxy's listener port
	upstream string
}

func (t *nodeTable) init(p *Proxy, bootPort int) {
	t.p = p
	t.nodes = make(map[int32]*node)
	t.controllers = make(map[string]*node)
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
// moved node's new connections follow it.
func (t *nodeTable) target(n *node) target {
	return target{node: n.id, resolve: func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return n.upstream
	}}
}

// MapNode implements rewrite.Mapper.
func (t *nodeTable) MapNode(id int32, host string, port int32) (string, int32, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.nodes[id]; ok {
		if n.upstream != addr {
			t.p.log.Info("node moved", "node", id, "from", n.upstream, "to", addr)
			n.upstream = addr
		}
		return t.p.advHost, n.port, nil
	}
	if len(t.nodes) >= maxNodes {
		return "", 0, fmt.Errorf("%w: node %d: the upstream named more than %d nodes", ErrNodePort, id, maxNodes)
	}
	lport := 0
	if t.base >= 0 {
		if id < 0 || int64(t.base)+int64(id) > 65535 {
			return "", 0, fmt.Errorf("%w: node %d would listen on port %d, out of range; set node-port-base", ErrNodePort, id, int64(t.base)+int64(id))
		}
		lport = t.base + int(id)
	}
	n, err := t.open("node", id, lport, addr)
	if err != nil {
		return "", 0, err
	}
	t.nodes[id] = n
	return t.p.advHost, n.port, nil
}

// MapController implements rewrite.Mapper. Controllers are few and their
// ids may equal broker ids, so each controller address gets a listener of
// its own on a free port, kept for the proxy's life.
func (t *nodeTable) MapController(id int32, host string, port int32) (string, int32, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.controllers[addr]; ok {
		return t.p.advHost, n.port, nil
	}
	if len(t.controllers) >= maxNodes {
		return "", 0, fmt.Errorf("%w: controller %d: the upstream named more than %d controller endpoints", ErrNodePort, id, maxNodes)
	}
	n, err := t.open("controller", id, 0, addr)
	if err != nil {
		return "", 0, err
	}
	t.controllers[addr] = n
	return t.p.advHost, n.port, nil
}

// open listens on port (0: a free one) of the listen host and serves
// connections to upstream addr there. The caller holds t.mu.
func (t *nodeTable) open(role string, id int32, port int, addr string) (*node, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(t.p.listenHost, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %d on port %d: %v", ErrNodePort, role, id, port, err)
	}
	n := &node{id: id, port: int32(ln.Addr().(*net.TCPAddr).Port), upstream: addr}
	if err := t.p.serveTarget(ln, t.target(n)); err != nil {
		ln.Close()
		return nil, err
	}
	t.p.log.Info(role+" listener open", "node", id, "listen", ln.Addr().String(), "upstream", addr)
	return n, nil
}

// fetchBrokers asks the upstream for its brokers with a metadata request
// that names no topics.
func fetchBrokers(ctx context.Context, seeds []string, dialTimeout time.Duration) ([]kmsg.MetadataResponseBroker, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestRetries(2)}
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
