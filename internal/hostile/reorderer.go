package hostile

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Defaults for ReordererConfig's zero fields.
const (
	DefaultMaxDelay      = 2 * time.Millisecond
	DefaultUpstreamConns = 32
)

// ReordererConfig configures a Reorderer.
type ReordererConfig struct {
	// MinDelay and MaxDelay bound the random delay each request waits
	// before it is forwarded. If MaxDelay is zero, DefaultMaxDelay is
	// used; MinDelay's zero value means no lower bound. A MaxDelay of 1ns
	// leaves only goroutine scheduling to reorder.
	MinDelay, MaxDelay time.Duration
	// Seed seeds the delays. If zero, a seed is taken from the clock;
	// Reorderer.Seed reports it. Goroutine scheduling also shapes the
	// completion order, so a seed makes a run likelier, not certain, to
	// repeat.
	Seed uint64
	// UpstreamConns bounds the connections to kfake, and so the requests
	// in flight at once across all clients. If zero, DefaultUpstreamConns.
	UpstreamConns int
	// KfakeOpts are passed to kfake.NewCluster, e.g. kfake.SeedTopics.
	// NumBrokers and ListenFn are overridden.
	KfakeOpts []kfake.Opt
	// Listen is the HOST:PORT the backend accepts clients on. If empty,
	// a free loopback port.
	Listen string
}

// Default returns c with its zero fields filled in.
func (c ReordererConfig) Default() ReordererConfig {
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.UpstreamConns == 0 {
		c.UpstreamConns = DefaultUpstreamConns
	}
	return c
}

// Validate reports the first field that cannot be used, after Default.
func (c ReordererConfig) Validate() error {
	switch {
	case c.MinDelay < 0:
		return fmt.Errorf("hostile: ReordererConfig.MinDelay %v is negative", c.MinDelay)
	case c.MaxDelay < c.MinDelay:
		return fmt.Errorf("hostile: ReordererConfig.MaxDelay %v is below MinDelay %v", c.MaxDelay, c.MinDelay)
	case c.UpstreamConns < 1:
		return fmt.Errorf("hostile: ReordererConfig.UpstreamConns %d is below 1", c.UpstreamConns)
	}
	return nil
}

// Reorderer is a Kafka backend that breaks per-connection ordering. It
// reads pipelined requests from each client connection and forwards each
// one, after a random delay, to kfake over a pooled connection of its own,
// so requests race. Responses go back to the client in completion order,
// with the client's correlation ids. Two pipelined Produce requests to one
// partition can therefore be appended in the wrong order and answered out
// of order. Because requests of one client spread over many kfake
// connections, state kfake keeps per connection (SASL) does not carry over.
type Reorderer struct {
	base
	cfg  ReordererConfig
	pool *pool

	rng *seededRand

	requests  atomic.Int64
	reordered atomic.Int64
	byClient  clientCounts
}

// NewReorderer starts a Reorderer and the kfake cluster behind it.
func NewReorderer(cfg ReordererConfig) (*Reorderer, error) {
	cfg = cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := newBase(cfg.Listen, cfg.KfakeOpts)
	if err != nil {
		return nil, err
	}
	r := &Reorderer{
		base: b,
		cfg:  cfg,
		rng:  newSeededRand(cfg.Seed),
	}
	r.pool = newPool(b.srv, b.kfakeAddr, cfg.UpstreamConns)
	b.srv.start(r.serveClient)
	return r, nil
}

// Seed returns the seed of the delays.
func (r *Reorderer) Seed() uint64 { return r.cfg.Seed }

// Requests returns how many requests the Reorderer has read from clients.
func (r *Reorderer) Requests() int64 { return r.requests.Load() }

// Reordered returns how many responses were written before a response to a
// request that the same client sent earlier.
func (r *Reorderer) Reordered() int64 { return r.reordered.Load() }

// ReorderedFor returns how many of Reordered answered requests whose header
// carried clientID.
func (r *Reorderer) ReorderedFor(clientID string) int64 { return r.byClient.get(clientID) }

func (r *Reorderer) delay() time.Duration {
	span := r.cfg.MaxDelay - r.cfg.MinDelay
	if span <= 0 {
		return r.cfg.MinDelay
	}
	return r.cfg.MinDelay + time.Duration(r.rng.int64N(int64(span)+1))
}

// clientConn is the state one client connection's requests share.
type clientConn struct {
	c net.Conn

	mu      sync.Mutex // one response frame at a time on c
	next    uint64     // arrival sequence of the next request read
	pending map[uint64]struct{}
}

// serveClient reads until the client stops sending, then waits for the
// requests already read so that a client that half-closes still gets its
// answers.
func (r *Reorderer) serveClient(c net.Conn) {
	cc := &clientConn{c: c, pending: make(map[uint64]struct{})}
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		req, err := readRequest(c)
		if err != nil {
			return
		}
		r.requests.Add(1)
		cc.mu.Lock()
		seq := cc.next
		cc.next++
		if !req.noResponse {
			cc.pending[seq] = struct{}{}
		}
		cc.mu.Unlock()
		inflight.Add(1)
		if !r.srv.spawn(func() {
			defer inflight.Done()
			r.forward(cc, seq, req)
		}) {
			inflight.Done()
			return
		}
	}
}

// forward sends one request to kfake and its response to the client. Any
// failure closes the client connection: a client must never wait for a
// response that will not come.
func (r *Reorderer) forward(cc *clientConn, seq uint64, req request) {
	if !r.srv.sleep(r.delay()) {
		return
	}
	resp, err := r.pool.roundTrip(req)
	if err != nil || (resp != nil && responseCorr(resp) != req.corr) {
		cc.c.Close()
		return
	}
	if resp == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	delete(cc.pending, seq)
	for s := range cc.pending {
		if s < seq {
			r.reordered.Add(1)
			r.byClient.add(req.clientID)
			break
		}
	}
	if _, err := cc.c.Write(resp); err != nil {
		cc.c.Close()
	}
}

// pool holds idle connections to kfake. kfake serves one request at a
// time per connection, so requests that must race need one each.
type pool struct {
	srv  *server
	addr string
	sem  chan struct{}

	mu   sync.Mutex
	idle []net.Conn
}

func newPool(srv *server, addr string, size int) *pool {
	return &pool{srv: srv, addr: addr, sem: make(chan struct{}, size)}
}

// roundTrip forwards req on a connection of its own and returns the
// response frame, or nil for a request Kafka does not answer.
func (p *pool) roundTrip(req request) ([]byte, error) {
	select {
	case p.sem <- struct{}{}:
	case <-p.srv.done:
		return nil, net.ErrClosed
	}
	defer func() { <-p.sem }()
	c, err := p.get()
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(req.frame); err != nil {
		p.srv.release(c)
		return nil, err
	}
	if req.noResponse {
		p.put(c)
		return nil, nil
	}
	resp, err := readFrame(c, minResponse)
	if err != nil {
		p.srv.release(c)
		return nil, err
	}
	p.put(c)
	return resp, nil
}

func (p *pool) get() (net.Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return p.srv.dial(p.addr)
}

func (p *pool) put(c net.Conn) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// seededRand is a seeded source safe for concurrent use.
type seededRand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeededRand(seed uint64) *seededRand {
	return &seededRand{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *seededRand) int64N(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Int64N(n)
}
