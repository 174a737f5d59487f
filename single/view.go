// Package single holds the single topology (config.TopologySingle): the
// proxy is the cluster's only broker, at --listen's address, and View is
// its view of the cluster that splitmerge.Split reads, shared between
// connections and kept by the proxy's own client. The proxy gives it what
// it needs through Host and Config, and never the reverse: this package
// does not import proxy. What answers teach the view is in learn.go, what
// a split request costs in cost.go. A client connection's upstream
// connections are a Conn (conn.go), which reaches its client connection
// through Client (client.go): the split (forward.go, produce.go), the
// gather (gather.go), the Fetch rounds (fetch.go, fetchdeps.go) and the
// memory they reserve (memory.go). DESIGN.md, "The single endpoint",
// tells the whole.
package single

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/internal/ratelog"
	"github.com/inorder-proxy/inorder/splitmerge"
)

// Host is what the proxy gives the view: the settings that change on a
// reload, and where the outcome of a refresh goes.
type Host interface {
	// Upstreams returns the seed addresses in force.
	Upstreams() []string
	// Allowed reports whether allow-upstream lets the proxy dial host.
	Allowed(host string) bool
	// Health records the outcome of a refresh, the upstream's health.
	Health(err error)
	// Ready is called once a refresh has filled the view.
	Ready()
}

// Config is what the view is built with.
type Config struct {
	Self        splitmerge.Self // the one broker clients see
	Seeds       []string        // the upstreams the proxy's own client starts from
	DialTimeout time.Duration   // zero: kgo's
	// Dial dials a broker for the proxy's own client (TLS and the
	// proxy's SASL included).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds each refresh run does.
	Timeout time.Duration
	Log     *slog.Logger
}

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

// downFor is how long a broker that could not be dialled is down after
// its first failed dial: its parts are answered with their retriable error
// at once, and requests any broker answers pass it over. Each failed dial
// after that doubles it, up to maxDownFor, so that a broker that drops
// connection attempts silently holds a client's parts for the dial
// timeout ever more rarely; a dial that succeeds ends it.
const (
	downFor    = time.Second
	maxDownFor = 8 * time.Second
)

// View is the proxy's view of the cluster in the single topology.
// Leaders and brokers come from Metadata, asked for every topic by the
// proxy's own client (at start, every viewEvery and when an answer says
// the view is stale) and learned from the Metadata answers clients get;
// coordinators are looked up with FindCoordinator when a request needs
// one the cache lacks.
type View struct {
	host    Host
	log     *slog.Logger
	timeout time.Duration
	self    splitmerge.Self
	cl      *kgo.Client // the proxy's own: Metadata and FindCoordinator

	// snap is read by every split and replaced whole: a split reads a
	// table nobody changes. wmu makes the writers one at a time.
	snap atomic.Pointer[viewSnap]
	wmu  sync.Mutex
	// refreshMu makes refreshes one at a time; last is when the last
	// one started (guarded by refreshMu).
	refreshMu sync.Mutex
	last      time.Time
	kick      chan struct{} // a refresh is wanted; capacity one, so asks coalesce
	failures  ratelog.Log

	coords coordCache

	downMu sync.Mutex
	down   map[int32]downState // brokers the last dial to failed, or that stalled

	dialTimeout time.Duration // bounds a probe of a broker that stalled (stall.go)
}

// downState is a broker the last dial to failed, or that stalled: until
// when it is passed over, and how many dials (or stalls and probes) in a
// row failed. stalled: a connection to it is used only once it answered
// a probe (stall.go).
type downState struct {
	until   time.Time
	fails   int
	stalled bool
}

// viewSnap is one state of the view: the table splitmerge reads, the
// brokers' addresses as the upstream advertises them, and the broker it
// names as the controller (-1: none).
type viewSnap struct {
	table      *splitmerge.Table
	addrs      map[int32]string
	controller int32
}

// NewView returns the view, empty until Discover or Run fills it.
func NewView(host Host, cfg Config) (*View, error) {
	// Its connections close after viewIdle unused, so that an idle
	// proxy holds none between refreshes.
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Seeds...), kgo.RequestRetries(2), kgo.Dialer(cfg.Dial), kgo.ConnIdleTimeout(viewIdle),
		kgo.RetryBackoffFn(viewRetryBackoff)}
	if cfg.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(cfg.DialTimeout))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("the proxy's client for --topology single: %w", err)
	}
	v := &View{
		host:    host,
		log:     cfg.Log,
		timeout: cfg.Timeout,
		self:    cfg.Self,
		cl:      cl,
		kick:    make(chan struct{}, 1),
		down:    make(map[int32]downState),

		dialTimeout: cfg.DialTimeout,
	}
	v.snap.Store(&viewSnap{table: new(splitmerge.Table), addrs: map[int32]string{}, controller: -1})
	return v, nil
}

// viewRetryBackoff is the proxy's own client's wait before trying a
// request again. A coordinator lookup runs on a client connection's
// path, and a broker that is down is refused at once (Shunned), so
// the first retry, which kgo sends to the next broker, goes at once
// rather than after kgo's default 250 ms.
func viewRetryBackoff(tries int) time.Duration {
	if tries <= 1 {
		return 0
	}
	return min(100*time.Millisecond<<(tries-2), time.Second)
}

// SelfNodeID is the node id of the one broker clients see.
const SelfNodeID = 0

// Addr is the address clients reach the single endpoint at.
func (v *View) Addr() string {
	return net.JoinHostPort(v.self.Host, strconv.Itoa(int(v.self.Port)))
}

// Advertised implements rewrite.Addresser: the single endpoint stands for
// every broker, so each broker's listeners name its address.
func (v *View) Advertised(id int32) (string, int32, bool) {
	return v.self.Host, v.self.Port, id >= 0
}

// Upstream implements rewrite.Addresser: whether host:port is a seed or
// the address the view has for a broker.
func (v *View) Upstream(host string, port int32) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	for _, u := range v.host.Upstreams() {
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

// Run refreshes the view every viewEvery and when asked, until ctx (the
// proxy's) ends; it closes the proxy's client on its way out.
func (v *View) Run(ctx context.Context) {
	defer v.cl.Close()
	t := time.NewTicker(viewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.kick:
		}
		v.refreshMu.Lock()
		wait := time.Until(v.last.Add(refreshSpacing))
		v.refreshMu.Unlock()
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		rctx, cancel := context.WithTimeout(ctx, v.timeout)
		err := v.Refresh(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			if skipped, ok := v.failures.Allow("refresh", time.Now()); ok {
				v.log.Warn("the single endpoint's view of the cluster could not be refreshed", "err", err, "similar_not_logged", skipped)
			}
		}
	}
}

// Stale asks for a refresh; asks coalesce.
func (v *View) Stale() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// Refresh asks the upstream for every topic and makes the answer the
// view. Its outcome is the upstream's health, as a discovery's is in the
// other topologies.
func (v *View) Refresh(ctx context.Context) error {
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
		err = fmt.Errorf("%w: metadata: %v", proxyerr.UpstreamFailed, err)
	}
	v.host.Health(err)
	if err != nil {
		return err
	}
	v.applyMetadata(resp, true)
	v.host.Ready()
	return nil
}

// applyMetadata makes what resp says the view; all says it answers a
// request for every topic, so that topics it does not list are gone.
func (v *View) applyMetadata(resp *kmsg.MetadataResponse, all bool) {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	old := v.snap.Load()
	t := new(splitmerge.Table)
	if !all {
		t = old.table.Clone()
	} else {
		t.KeepIDs(old.table)
	}
	t.ApplyMetadata(resp, all)
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if old.addrs[b.NodeID] != addrs[b.NodeID] && !v.host.Allowed(b.Host) {
			v.log.Warn("broker outside allow-upstream; its partitions are unreachable through the single endpoint", "node", b.NodeID, "upstream", addrs[b.NodeID])
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
func (v *View) setLeaders(moves []leaderMove) {
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

// Split returns what a split reads now.
func (v *View) Split() SplitView {
	return SplitView{snap: v.snap.Load(), coords: &v.coords}
}

// Table returns the table the view holds now; nobody changes it.
func (v *View) Table() *splitmerge.Table { return v.snap.Load().table }

// Controller returns the broker the view names as the controller; -1:
// none.
func (v *View) Controller() int32 { return v.snap.Load().controller }

// Self returns the one broker clients see.
func (v *View) Self() splitmerge.Self { return v.self }

// Broker returns the proxy's own client's connection to broker id.
func (v *View) Broker(id int32) *kgo.Broker { return v.cl.Broker(int(id)) }

// MissingCoordinators returns the keys of typ among keys the view has no
// coordinator for, each once.
func (v *View) MissingCoordinators(typ int8, keys []string) []string {
	return v.coords.missing(typ, keys)
}

// Address returns where node is, and whether the proxy may dial it.
func (v *View) Address(node int32) (string, error) {
	addr, ok := v.snap.Load().addrs[node]
	if !ok {
		return "", fmt.Errorf("%w: node %d is not in the upstream's metadata", proxyerr.UpstreamFailed, node)
	}
	host, _, _ := net.SplitHostPort(addr)
	if !v.host.Allowed(host) {
		return "", fmt.Errorf("%w: node %d at %s", proxyerr.NotAllowed, node, addr)
	}
	return addr, nil
}

// DialFailed marks node down: no connection is dialled to it, and its
// parts are answered with their retriable error, until its backoff ends.
func (v *View) DialFailed(node int32) {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	v.downLocked(node, v.down[node].stalled)
}

// downLocked marks node down for its next backoff. The caller holds
// v.downMu.
func (v *View) downLocked(node int32, stalled bool) {
	d := v.down[node]
	wait := min(downFor<<min(d.fails, 8), maxDownFor)
	v.down[node] = downState{until: time.Now().Add(wait), fails: d.fails + 1, stalled: stalled}
}

// Dialed records that a dial to node succeeded: its backoff starts over,
// unless it stalled, when only an answer ends it (Answered).
func (v *View) Dialed(node int32) {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	if !v.down[node].stalled {
		delete(v.down, node)
	}
}

// Stalled marks node down as DialFailed does, and suspect until it answers
// a probe; a connection to it left a part unanswered past its deadline,
// or a probe went unanswered. It reports whether node was not suspect
// before.
func (v *View) Stalled(node int32) bool {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	news := !v.down[node].stalled
	v.downLocked(node, true)
	return news
}

// Suspect reports whether node stalled and has not answered since.
func (v *View) Suspect(node int32) bool {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	return v.down[node].stalled
}

// Answered records that node answered a probe: it is up.
func (v *View) Answered(node int32) {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	delete(v.down, node)
}

// Shunned reports whether the proxy's own client should not dial node:
// the last dial to it failed, and not to every broker. Its lookups run
// on client connections' paths, where a dial would hold every request
// behind it, so it leaves a broker that failed to the client
// connections' dials, which run on their own goroutines and end this
// when one succeeds; when every broker failed it dials them, as nothing
// else would bring the view back.
func (v *View) Shunned(node int32) bool {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	if v.down[node].fails == 0 {
		return false
	}
	for n := range v.snap.Load().addrs {
		if v.down[n].fails == 0 {
			return true
		}
	}
	return false
}

// NodeAt returns the broker at addr, as the upstream advertises it.
func (v *View) NodeAt(addr string) (int32, bool) {
	for n, a := range v.snap.Load().addrs {
		if a == addr {
			return n, true
		}
	}
	return -1, false
}

// IsDown reports whether node is down: the last dial to it failed, or it
// stalled, and its backoff has not ended.
func (v *View) IsDown(node int32) bool {
	v.downMu.Lock()
	defer v.downMu.Unlock()
	d, ok := v.down[node]
	return ok && time.Now().Before(d.until)
}

// Lookup asks the upstream for the coordinators of keys of type typ and
// remembers those it names. A key it has no coordinator for stays
// unknown: the plan answers it COORDINATOR_NOT_AVAILABLE and the client
// asks again.
func (v *View) Lookup(ctx context.Context, typ int8, keys []string) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = typ
	req.CoordinatorKeys = keys
	if len(keys) == 1 {
		req.CoordinatorKey = keys[0]
	}
	resp, err := req.RequestWith(ctx, v.cl)
	if err != nil {
		return fmt.Errorf("%w: find coordinator: %v", proxyerr.UpstreamFailed, err)
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode == 0 && c.NodeID >= 0 {
			v.coords.set(typ, c.Key, c.NodeID)
		}
	}
	return nil
}

// Discover fills the view at start; the proxy's Discover in this
// topology.
func (v *View) Discover(ctx context.Context) error {
	return v.Refresh(ctx)
}

// SplitView is the splitmerge.View of one split: a snapshot of the table
// and the coordinators as they are.
type SplitView struct {
	snap   *viewSnap
	coords *coordCache
}

var _ splitmerge.View = SplitView{}

func (s SplitView) Leader(topic string, id [16]byte, partition int32) int32 {
	return s.snap.table.Leader(topic, id, partition)
}

func (s SplitView) Coordinator(typ int8, key string) int32 { return s.coords.get(typ, key) }

func (s SplitView) Brokers() []int32 { return s.snap.table.Brokers() }

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
