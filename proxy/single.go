package proxy

// The single topology (config.TopologySingle): the proxy is the cluster's
// only broker, at --listen's address. What every connection shares lives
// here: Self, the one broker clients see, and the view of the cluster that
// splitmerge.Split reads, kept by the proxy's own client. A client
// connection's upstream connections are in single_conn.go, the life of a
// split request in single_forward.go and single_gather.go, the Fetch
// rounds in single_fetch.go, what orders a Fetch after the writes before
// it in single_fetchdeps.go, and what answers teach the view in
// single_learn.go. DESIGN.md, "The single endpoint", tells the whole.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
)

// viewEvery is how often the view is refreshed with no reason to: what a
// client's own metadata.max.age.ms does for it.
const viewEvery = 30 * time.Second

// refreshSpacing is the least time between two refreshes asked for by
// answers, so that a client spinning on a topic that does not exist
// cannot make the proxy hammer the upstream.
const refreshSpacing = 100 * time.Millisecond

// maxCoordinators bounds the coordinators the view remembers; a full
// cache forgets one at random, which costs one lookup.
const maxCoordinators = 10000

// viewIdle is how long a connection of the proxy's own client may stay
// unused.
const viewIdle = 5 * time.Second

// downFor is how long a broker that could not be dialled is passed over
// for requests any broker answers.
const downFor = time.Second

// singleView is the proxy's view of the cluster in the single topology.
// Leaders and brokers come from Metadata, asked for every topic by the
// proxy's own client (at start, every viewEvery and when an answer says
// the view is stale) and learned from the Metadata answers clients get;
// coordinators are looked up with FindCoordinator when a request needs
// one the cache lacks.
type singleView struct {
	p    *Proxy
	self splitmerge.Self
	cl   *kgo.Client // the proxy's own: Metadata and FindCoordinator

	// snap is read by every split and replaced whole: a split reads a
	// table nobody changes. wmu makes the writers one at a time.
	snap atomic.Pointer[viewSnap]
	wmu  sync.Mutex
	// refreshMu makes refreshes one at a time; last is when the last
	// one started (guarded by refreshMu).
	refreshMu sync.Mutex
	last      time.Time
	kick      chan struct{} // a refresh is wanted; capacity one, so asks coalesce
	failures  rateLog

	coords coordCache

	downMu sync.Mutex
	down   map[int32]time.Time // brokers a dial failed to, until when
}

// viewSnap is one state of the view: the table splitmerge reads, the
// brokers' addresses as the upstream advertises them, and the broker it
// names as the controller (-1: none).
type viewSnap struct {
	table      *splitmerge.Table
	addrs      map[int32]string
	controller int32
}

func newSingleView(p *Proxy) (*singleView, error) {
	port := p.boot.Addr().(*net.TCPAddr).Port
	if p.cfg.AdvertisedPort != 0 {
		port = p.cfg.AdvertisedPort
	}
	// Its connections close after viewIdle unused, so that an idle
	// proxy holds none between refreshes.
	opts := []kgo.Opt{kgo.SeedBrokers(p.cfg.Upstreams...), kgo.RequestRetries(2), kgo.Dialer(p.dialDiscovery), kgo.ConnIdleTimeout(viewIdle)}
	if p.cfg.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(p.cfg.DialTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("the proxy's client for --topology single: %w", err)
	}
	v := &singleView{
		p:    p,
		self: splitmerge.Self{NodeID: selfNodeID, Host: p.advHost, Port: int32(port)},
		cl:   cl,
		kick: make(chan struct{}, 1),
		down: make(map[int32]time.Time),
	}
	v.snap.Store(&viewSnap{table: new(splitmerge.Table), addrs: map[int32]string{}, controller: -1})
	return v, nil
}

// selfNodeID is the node id of the one broker clients see.
const selfNodeID = 0

// addr is the address clients reach the single endpoint at.
func (v *singleView) addr() string {
	return net.JoinHostPort(v.self.Host, strconv.Itoa(int(v.self.Port)))
}

// Advertised implements rewrite.Addresser: the single endpoint stands for
// every broker, so each broker's listeners name its address.
func (v *singleView) Advertised(id int32) (string, int32, bool) {
	return v.self.Host, v.self.Port, id >= 0
}

// Upstream implements rewrite.Addresser: whether host:port is a seed or
// the address the view has for a broker.
func (v *singleView) Upstream(host string, port int32) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	for _, u := range v.p.current().Upstreams {
		if strings.EqualFold(u, addr) {
			return true
		}
	}
	for _, a := range v.snap.Load().addrs {
		if strings.EqualFold(a, addr) {
			return true
		}
	}
	return false
}

// run refreshes the view every viewEvery and when asked, until the proxy
// closes; it closes the proxy's client on its way out.
func (v *singleView) run() {
	defer v.p.wg.Done()
	defer v.cl.Close()
	t := time.NewTicker(viewEvery)
	defer t.Stop()
	for {
		select {
		case <-v.p.ctx.Done():
			return
		case <-t.C:
		case <-v.kick:
		}
		v.refreshMu.Lock()
		wait := time.Until(v.last.Add(refreshSpacing))
		v.refreshMu.Unlock()
		if wait > 0 {
			select {
			case <-v.p.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		ctx, cancel := context.WithTimeout(v.p.ctx, probeTimeout)
		err := v.refresh(ctx)
		cancel()
		if err != nil && v.p.ctx.Err() == nil {
			if skipped, ok := v.failures.allow("refresh", time.Now()); ok {
				v.p.log.Warn("the single endpoint's view of the cluster could not be refreshed", "err", err, "similar_not_logged", skipped)
			}
		}
	}
}

// stale asks for a refresh; asks coalesce.
func (v *singleView) stale() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// refresh asks the upstream for every topic and makes the answer the
// view. Its outcome is the upstream's health, as a discovery's is in the
// other topologies.
func (v *singleView) refresh(ctx context.Context) error {
	v.refreshMu.Lock()
	defer v.refreshMu.Unlock()
	v.last = time.Now()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, v.cl)
	if err == nil && len(resp.Brokers) == 0 {
		err = errors.New("the upstream's metadata names no broker")
	}
	if err != nil {
		err = fmt.Errorf("%w: metadata: %v", ErrUpstreamFailed, err)
	}
	v.p.health.record(err)
	if err != nil {
		return err
	}
	v.applyMetadata(resp, true)
	v.p.noteReady()
	return nil
}

// applyMetadata makes what resp says the view; all says it answers a
// request for every topic, so that topics it does not list are gone.
func (v *singleView) applyMetadata(resp *kmsg.MetadataResponse, all bool) {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	old := v.snap.Load()
	t := new(splitmerge.Table)
	if !all {
		t = old.table.Clone()
	}
	t.ApplyMetadata(resp, all)
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if old.addrs[b.NodeID] != addrs[b.NodeID] && !v.p.nodes.allow.allows(b.Host) {
			v.p.log.Warn("broker outside allow-upstream; its partitions are unreachable through the single endpoint", "node", b.NodeID, "upstream", addrs[b.NodeID])
		}
	}
	// Metadata v0 carries no controller (kmsg reads it as -1): an answer
	// at v0, a client's as much as any, keeps the controller the view
	// knows, or CreateTopics would go to any broker and be answered
	// NOT_CONTROLLER by one that does not forward it.
	controller := resp.ControllerID
	if resp.Version < 1 {
		controller = old.controller
	}
	if _, ok := addrs[controller]; !ok {
		controller = -1
	}
	v.snap.Store(&viewSnap{table: t, addrs: addrs, controller: controller})
}

// setLeaders records the leaders KIP-951 answers named, before a refresh
// confirms them.
func (v *singleView) setLeaders(moves []leaderMove) {
	if len(moves) == 0 {
		return
	}
	v.wmu.Lock()
	defer v.wmu.Unlock()
	old := v.snap.Load()
	t := old.table.Clone()
	for _, m := range moves {
		t.SetLeader(m.topic, m.id, m.partition, m.node)
	}
	v.snap.Store(&viewSnap{table: t, addrs: old.addrs, controller: old.controller})
}

// leaderMove is a partition's new leader as an answer named it.
type leaderMove struct {
	topic     string
	id        [16]byte
	partition int32
	node      int32
}

// view returns what a split reads now.
func (v *singleView) view() splitView {
	return splitView{snap: v.snap.Load(), coords: &v.coords}
}

// address returns where node is, and whether the proxy may dial it.
func (v *singleView) address(node int32) (string, error) {
	addr, ok := v.snap.Load().addrs[node]
	if !ok {
		return "", fmt.Errorf("%w: node %d is not in the upstream's metadata", ErrUpstreamFailed, node)
	}
	host, _, _ := net.SplitHostPort(addr)
	if !v.p.nodes.allow.allows(host) {
		return "", fmt.Errorf("%w: node %d at %s", ErrNotAllowed, node, addr)
	}
	return addr, nil
}

// dialFailed passes node over for a while where any broker will do.
func (v *singleView) dialFailed(node int32) {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	v.down[node] = time.Now().Add(downFor)
}

// isDown reports whether a dial to node failed within downFor.
func (v *singleView) isDown(node int32) bool {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	until, ok := v.down[node]
	if ok && time.Now().After(until) {
		delete(v.down, node)
		return false
	}
	return ok
}

// lookup asks the upstream for the coordinators of keys of type typ and
// remembers those it names. A key it has no coordinator for stays
// unknown: the plan answers it COORDINATOR_NOT_AVAILABLE and the client
// asks again.
func (v *singleView) lookup(ctx context.Context, typ int8, keys []string) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = typ
	req.CoordinatorKeys = keys
	if len(keys) == 1 {
		req.CoordinatorKey = keys[0]
	}
	resp, err := req.RequestWith(ctx, v.cl)
	if err != nil {
		return fmt.Errorf("%w: find coordinator: %v", ErrUpstreamFailed, err)
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode == 0 && c.NodeID >= 0 {
			v.coords.set(typ, c.Key, c.NodeID)
		}
	}
	return nil
}

// discover fills the view at start; Discover in this topology.
func (v *singleView) discover(ctx context.Context) error {
	return v.refresh(ctx)
}

// splitView is the splitmerge.View of one split: a snapshot of the table
// and the coordinators as they are.
type splitView struct {
	snap   *viewSnap
	coords *coordCache
}

var _ splitmerge.View = splitView{}

func (s splitView) Leader(topic string, id [16]byte, partition int32) int32 {
	return s.snap.table.Leader(topic, id, partition)
}

func (s splitView) Coordinator(typ int8, key string) int32 { return s.coords.get(typ, key) }

func (s splitView) Brokers() []int32 { return s.snap.table.Brokers() }

// coordCache holds the coordinators the proxy looked up, bounded by
// maxCoordinators. The zero value is empty.
type coordCache struct {
	mu sync.Mutex
	m  map[coordKey]int32
}

type coordKey struct {
	typ int8
	key string
}

func (c *coordCache) get(typ int8, key string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.m[coordKey{typ, key}]; ok {
		return n
	}
	return splitmerge.NoCoordinator
}

func (c *coordCache) set(typ int8, key string, node int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[coordKey]int32)
	}
	if _, ok := c.m[coordKey{typ, key}]; !ok && len(c.m) >= maxCoordinators {
		for k := range c.m { // a random one: map order
			delete(c.m, k)
			break
		}
	}
	c.m[coordKey{typ, key}] = node
}

// forget drops key, whose coordinator answered that it is not, or failed.
func (c *coordCache) forget(typ int8, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, coordKey{typ, key})
}

// missing returns the keys of typ among keys the cache has no coordinator
// for, each once.
func (c *coordCache) missing(typ int8, keys []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if _, ok := c.m[coordKey{typ, k}]; !ok && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
