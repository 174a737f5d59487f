package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/quota"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/verify"
)

// Option adjusts a Proxy beyond its Config.
type Option func(*Proxy)

// WithVersions limits the API keys and versions the proxy forwards and
// advertises to those for which fn returns ok, up to the returned maximum.
// It protects a backend that fails on keys it does not know, such as an
// embedded kfake, which panics the process on an unknown key.
func WithVersions(fn func(key int16) (max int16, ok bool)) Option {
	return func(p *Proxy) { p.versions = fn }
}

// Fixup patches the responses of a backend known to deviate from Kafka in
// a way that breaks clients, such as an embedded fake.
type Fixup interface {
	// Needs reports whether responses to key at version must be decoded
	// and passed to Fix; it is called for every response.
	Needs(key, version int16) bool
	// Fix patches resp in place and reports whether it changed it.
	Fix(resp kmsg.Response) bool
}

// WithFixup applies f to the upstream's responses.
func WithFixup(f Fixup) Option {
	return func(p *Proxy) { p.fixup = f }
}

// WithListener makes ln, already bound, the bootstrap listener instead of
// one opened on cfg.Listen, so that a command can hold its port before it
// starts anything else. The proxy closes ln when it closes; if New fails,
// the caller still owns it.
func WithListener(ln net.Listener) Option {
	return func(p *Proxy) { p.bound = ln }
}

// WithoutSplice reads every request whole into the proxy's memory, as the
// None mode does, instead of splicing large produce bodies between sockets.
// It exists to measure what splicing saves.
func WithoutSplice() Option {
	return func(p *Proxy) { p.noSplice = true }
}

// Proxy is one inorder instance: a bootstrap listener, a listener per
// upstream node, and the connections they accept.
type Proxy struct {
	// cfg is the configuration the proxy started with: the settings read
	// only at start come from it. live is the one new connections and
	// dials use, swapped by Reload.
	cfg      config.Config
	live     atomic.Pointer[config.Config]
	log      *slog.Logger
	versions func(int16) (int16, bool)
	fixup    Fixup
	bound    net.Listener     // the bootstrap listener WithListener gave, or nil
	verifier *verify.Verifier // nil without --verify
	noSplice bool
	metrics  *metrics.Metrics // nil records nothing
	single   *single.View     // the single topology's view; nil in the others
	// singleEnv is what its connections share (single_host.go).
	singleEnv *single.Env
	// clientAuth authenticates clients at the proxy; nil: none.
	clientAuth ClientAuth
	// identities map principals to upstream credentials; nil: every
	// client reaches the upstream as the proxy (upidentity.go).
	identities UpstreamIdentities
	// upVersions are the upstream's API versions, for the ApiVersions
	// answered before a client's upstream is dialled.
	upVersions upauth.Versions
	// quotas and connCaps enforce the client quotas and connection caps
	// (quota.go); Reload updates them.
	quotas   *quota.Manager
	connCaps *quota.Conns
	// authz enforces ACLs; nil: nothing is checked.
	authz Authorizer
	aud   proxyAudit // the audit trail's seam (audit.go)

	listenHost string
	advHost    string
	boot       net.Listener
	nodes      nodeTable
	nextUp     atomic.Uint32
	health     health
	dialFails  dialFailures
	sec        security

	budget        *budget.Budget // memory across every connection
	fetchRooms    atomic.Int64   // the single topology's Fetches' rooms, as reserved (single/memory.go)
	refused       atomic.Int64   // connections closed at the cap
	refusedLogged atomic.Int64   // unix nanos of the last refusal logged
	readyLogged   atomic.Bool    // "proxy ready" was logged
	streamWork    streamWork     // what None-mode request streams cost
	// fetchCalls counts the calls on the sockets, each a system call at
	// most, that walking audited Fetch responses made (fetchstream.go);
	// tests read it.
	fetchCalls atomic.Int64
	// flushHandOffs counts the goroutines started to write requests
	// upstream that a response released (None mode); tests read it.
	flushHandOffs atomic.Int64
	// fetchVectors counts the merged Fetch answers written as vectors
	// (single/fetchmerge.go); tests read it.
	fetchVectors atomic.Int64
	// fetchParks and fetchPiped count the single topology's Fetch
	// answers read with record sets parked in pipes, and the merged
	// answers written with pieces spliced from them, fetchParkCuts the
	// answers whose read failed with record sets parked
	// (single/fetchpark.go), fetchParkDrops the answers whose parked
	// record sets were dropped unread (single/memory.go); tests read
	// them.
	fetchParks, fetchPiped, fetchParkCuts, fetchParkDrops atomic.Int64
	// produceSplices counts the single topology's Produce requests whose
	// records went from the client socket to the brokers' in the kernel
	// (single/producesplice.go); tests read it.
	produceSplices atomic.Int64
	// producePeeks counts the Produce frames peeked at rather than read
	// (single_unread.go); tests read it.
	producePeeks atomic.Int64
	// fetchCuts counts the single topology's Fetch answers cut short
	// (single/fetchcut.go), exported as a counter at scrape time.
	fetchCuts atomic.Int64
	// fetchEarly, fetchKept and fetchKeptTaken count the single
	// topology's Fetch requests answered early, the parts' answers kept
	// for the next Fetch and those it took (single/fetchkeep.go),
	// exported as counters at scrape time.
	fetchEarly, fetchKept, fetchKeptTaken atomic.Int64
	// fetchLate counts the single topology's Fetch parts still out when
	// their Fetch's wait ended (single/fetchlate.go).
	fetchLate atomic.Int64
	// fetchTrimmed counts the single topology's Fetch parts sent with
	// only the partitions their maximum holds (single/fetchtrim.go).
	fetchTrimmed atomic.Int64
	// brokerStalls counts the single topology's upstream connections
	// failed on a broker that stalled (single/stall.go).
	brokerStalls atomic.Int64

	mu        sync.Mutex
	closing   bool
	serving   bool // the bootstrap listener's accept loop runs (Start or Serve)
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup  // accept loops and connections
	ctx       context.Context // canceled by Shutdown and Close
	cancel    context.CancelFunc
}

// New validates cfg, opens the bootstrap listener and returns the proxy.
// Call Serve to accept connections.
func New(cfg config.Config, log *slog.Logger, opts ...Option) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Upstreams) == 0 {
		return nil, &config.FieldError{Field: "--upstream", Reason: "(or upstream: in the config file) is required"}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		cfg:       cfg,
		log:       log,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.budget = budget.New(cfg.Memory())
	p.live.Store(&cfg)
	p.initQuotas(&cfg)
	for _, o := range opts {
		o(p)
	}
	p.metrics.SetGaugeSource(p.gauges)
	p.metrics.SetQuotaSource(p.quotaStats)
	if cfg.Verify {
		p.verifier = verify.New(p.metrics)
	}
	host, _, _ := net.SplitHostPort(cfg.Listen)
	p.listenHost = host
	p.advHost = cfg.AdvertisedHost
	if p.advHost == "" {
		p.advHost = host
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			name, err := os.Hostname()
			if err != nil {
				return nil, fmt.Errorf("--listen %s binds every interface and the hostname is unknown (%w): set --advertised-host", cfg.Listen, err)
			}
			p.advHost = name
		}
	}
	if err := p.initSecurity(); err != nil {
		return nil, err
	}
	ln, err := p.listenBoot(cfg.Listen)
	if err != nil {
		p.closeSecurity()
		return nil, config.ListenError("--listen", cfg.Listen, err, "")
	}
	p.boot = ln
	p.listeners[ln] = struct{}{}
	p.nodes.init(p, ln.Addr().(*net.TCPAddr).Port)
	if p.nodes.names != nil {
		p.checkCertificateNames()
	}
	if cfg.Topology == config.TopologySingle {
		if p.single, err = newSingleView(p); err != nil {
			ln.Close()
			p.closeSecurity()
			return nil, err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.single.Run(p.ctx)
		}()
	}
	if r, ok := p.authz.(topicIDResolver); ok {
		r.ResolveTopicIDsWith(p.listTopicIDs)
	}
	p.wg.Add(1)
	go p.watchUpstreams()
	p.wg.Add(1)
	go p.watchClients()
	return p, nil
}

// Addr returns the bootstrap address clients should use: in the sni
// topology, the bootstrap name and the advertised port; in the single
// topology, the one address.
func (p *Proxy) Addr() string {
	if n := p.nodes.names; n != nil {
		return net.JoinHostPort(n.Bootstrap, strconv.Itoa(int(p.nodes.advPort)))
	}
	if p.single != nil {
		return p.single.Addr()
	}
	_, port, _ := net.SplitHostPort(p.boot.Addr().String())
	return net.JoinHostPort(p.advHost, port)
}

// Discover asks the upstream for its brokers and opens their listeners now,
// so that clients holding metadata from before a restart find them. It
// returns ErrNodePort if a listener cannot open, and the upstream's error if
// it cannot be reached (the proxy still serves; listeners then open when
// metadata first names them). A broker outside the allow-list is logged and
// skipped.
func (p *Proxy) Discover(ctx context.Context) error {
	if p.single != nil {
		err := p.single.Discover(ctx)
		p.learnEarlyVersions(ctx)
		return err
	}
	cfg := p.current()
	brokers, err := fetchBrokers(ctx, cfg.Upstreams, cfg.DialTimeout, p.dialDiscovery)
	p.learnEarlyVersions(ctx)
	if err != nil && p.sec.auth == nil && upauth.Unauthenticated(ctx, cfg.Upstreams, p.probeVersions) == nil {
		p.health.record(nil)
		p.noteReady()
		return ErrUpstreamNeedsCredentials
	}
	p.health.record(err)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		if _, err := p.nodes.mapNode(b.NodeID, b.Host, b.Port); err != nil && !errors.Is(err, ErrNotAllowed) {
			return err
		}
	}
	p.noteReady()
	return nil
}

// Start accepts connections on the bootstrap listener, on a tracked
// goroutine, until Shutdown or Close, and returns at once; ErrClosed if
// the proxy is closing. The listener is open from New on, so a client
// that connects before Start waits in the kernel's queue until then.
func (p *Proxy) Start() error {
	if err := p.beginServing(); err != nil {
		return err
	}
	go func() {
		defer p.wg.Done()
		_ = p.acceptLoop(p.boot, p.bootTarget())
	}()
	p.noteReady()
	return nil
}

// Serve is Start that accepts on the calling goroutine: it returns
// ErrClosed after Shutdown or Close.
func (p *Proxy) Serve() error {
	if err := p.beginServing(); err != nil {
		return err
	}
	defer p.wg.Done()
	p.noteReady()
	return p.acceptLoop(p.boot, p.bootTarget())
}

// beginServing marks the proxy as accepting and counts the accept loop
// about to run in p.wg.
func (p *Proxy) beginServing() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	p.serving = true
	p.wg.Add(1)
	return nil
}

// target is where a listener's connections go: the bootstrap upstreams
// (resolve nil), or one node whose address resolve returns.
type target struct {
	node       int32
	controller bool // a controller's listener
	// byName: the SNI listener's, whose connections learn their target
	// from their server name in the handshake (routeByName).
	byName  bool
	resolve func() (string, error)
}

// serveTarget starts the accept loop of a node or controller listener.
func (p *Proxy) serveTarget(ln net.Listener, t target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.acceptLoop(ln, t)
	}()
	return nil
}

// acceptLoop accepts until the listener closes, backing off on temporary
// errors as net/http does, so that running out of file descriptors slows
// the proxy down instead of killing it.
func (p *Proxy) acceptLoop(ln net.Listener, t target) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-p.ctx.Done():
				return ErrClosed
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return ErrClosed
			}
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			p.log.Warn("accept failed; retrying", "listener", ln.Addr().String(), "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-p.ctx.Done():
				return ErrClosed
			}
			continue
		}
		delay = 0
		ip, ok := p.admitAddress(nc)
		if !ok {
			continue
		}
		c := newConn(p, nc, t)
		c.quota.ip = ip
		switch err := p.track(c); {
		case errors.Is(err, errTooManyConns):
			c.releaseQuota()
			p.refuse(c)
			continue
		case err != nil:
			c.releaseQuota()
			nc.Close()
			p.metrics.ConnRejected(metrics.RejectShutdown)
			return err
		}
		p.metrics.ConnAccepted(t.listenerKind())
		go c.serve()
	}
}

// track registers c, or refuses it when closing or at the connection cap.
func (p *Proxy) track(c *conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	if !p.admitLocked() {
		return errTooManyConns
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return nil
}

// untrack removes c from the open connections; its goroutine, counted in
// p.wg by track, ends in conn.serve.
func (p *Proxy) untrack(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// stopAccepting closes every listener; later accepts and node listeners
// are refused.
func (p *Proxy) stopAccepting() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closing {
		p.closeSecurity()
	}
	p.closing = true
	p.cancel()
	for ln := range p.listeners {
		ln.Close()
		delete(p.listeners, ln)
	}
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	return conns
}

// Shutdown stops accepting, stops reading new requests, and waits for every
// connection to deliver its in-flight responses, until ctx is done; then it
// closes what remains. It returns ctx's error if connections had to be cut.
func (p *Proxy) Shutdown(ctx context.Context) error {
	for _, c := range p.stopAccepting() {
		c.drain()
	}
	finished := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		p.Close()
		<-finished
		return ctx.Err()
	}
}

// Close closes every listener and connection at once and waits for their
// goroutines.
func (p *Proxy) Close() error {
	for _, c := range p.stopAccepting() {
		c.die(ErrShutdown)
	}
	p.wg.Wait()
	return nil
}

// Stats is a snapshot of the proxy's connections.
type Stats struct {
	Conns int
	Nodes int
	// Refused counts connections closed at accept because max-connections
	// was reached.
	Refused int64
	// MemoryUsed and MemoryLimit are the process-wide memory budget.
	MemoryUsed, MemoryLimit int64
	// MemoryWaits and MemoryWaited count reads held back for lack of
	// memory and the time they waited in total.
	MemoryWaits  int64
	MemoryWaited time.Duration
}

// Stats returns how many client connections and node listeners are open,
// and the state of the memory budget.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	n := len(p.conns)
	p.mu.Unlock()
	waits, waited := p.budget.Waited()
	return Stats{Conns: n, Nodes: p.nodes.count(), Refused: p.refused.Load(),
		MemoryUsed: p.budget.Used(), MemoryLimit: p.budget.Limit(), MemoryWaits: waits, MemoryWaited: waited}
}

// dialUpstream connects to addr, bounded by the dial timeout and by ctx
// (the proxy's, carrying the identity to authenticate as), and makes the connection ready for requests (see
// dialSecure).
func (p *Proxy) dialUpstream(ctx context.Context, addr string) (net.Conn, upauth.Session, error) {
	return p.dialSecure(ctx, addr, slices.Contains(p.current().Upstreams, addr))
}

// dialDiscovery is the start-up discovery's dialer: the same TLS and SASL
// as every other upstream connection. A failure past TCP (TLS, SASL, an
// address backing off after a refusal) is returned as a *net.OpError, the
// dial error on which kgo tries the next seed instead of failing the
// request: another address may well answer.
//
// In the single topology a broker the last dial to failed is not dialled
// (single.View.Shunned), so that a coordinator lookup on a client
// connection's path does not wait out a dial to it, and a failed dial
// marks the broker down.
func (p *Proxy) dialDiscovery(ctx context.Context, network, addr string) (net.Conn, error) {
	node, known := int32(-1), false
	if p.single != nil {
		node, known = p.single.NodeAt(addr)
		if known && p.single.Shunned(node) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("node %d at %s: %w", node, addr, errBrokerDown)}
		}
	}
	nc, _, err := p.dialSecure(ctx, addr, slices.Contains(p.current().Upstreams, addr))
	if err != nil && known && p.ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		p.single.DialFailed(node)
	} else if err == nil && known {
		p.single.Dialed(node)
	}
	if _, ok := errors.AsType[*upauth.ClosedError](err); ok {
		// kgo takes a dial error that wraps io.EOF for a TLS mismatch
		// and says that instead of the error; this one says what to
		// check already.
		err = errors.New(err.Error())
	}
	if _, ok := errors.AsType[*net.OpError](err); err != nil && !ok {
		err = &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return nc, err
}

// bootstrapUpstream dials the configured upstreams, starting at a rotating
// index so bootstrap load spreads, and returns the first that answers. An
// address that fails, refuses the proxy's credentials or backs off after
// refusing them is passed over for the next: a refusal can be one
// broker's, and each address's back-off bounds what the search costs the
// ones that refuse.
func (p *Proxy) bootstrapUpstream(ctx context.Context) (net.Conn, string, upauth.Session, error) {
	ups := p.current().Upstreams
	start := int(p.nextUp.Add(1))
	var errs []error
	for i := range ups {
		addr := ups[(start+i)%len(ups)]
		nc, sess, err := p.dialUpstream(ctx, addr)
		if err == nil {
			return nc, addr, sess, nil
		}
		errs = append(errs, err)
	}
	err := oneLine(errs...)
	for _, e := range errs {
		if !errors.Is(e, ErrUpstreamAuth) {
			// Not every address refused: the connection failed,
			// whatever some of them said.
			return nil, "", upauth.Session{}, errors.New(err.Error())
		}
	}
	return nil, "", upauth.Session{}, err
}
