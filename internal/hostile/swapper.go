package hostile

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultSwapEvery is SwapperConfig.Every's default: one response in 200.
const DefaultSwapEvery = 200

// SwapperConfig configures a Swapper.
type SwapperConfig struct {
	// Every is the rarity of a swap: each response is held back with
	// probability 1/Every. If zero, DefaultSwapEvery; 1 swaps every pair.
	Every int
	// Seed seeds the choice. If zero, a seed is taken from the clock;
	// Swapper.Seed reports it.
	Seed uint64
	// KfakeOpts are passed to kfake.NewCluster. NumBrokers and ListenFn
	// are overridden.
	KfakeOpts []kfake.Opt
	// Listen is the HOST:PORT the backend accepts clients on. If empty,
	// a free loopback port.
	Listen string
}

// Swapper is a Kafka backend that breaks per-connection ordering rarely.
// It processes each client connection's requests one at a time, in order,
// over a kfake connection of its own, so the log keeps the order sent; but
// now and then it holds a response back and writes it after the next one.
// A response is held only when the client has already sent the next
// request, so a client waiting for it never hangs.
type Swapper struct {
	base
	cfg SwapperConfig

	rng *seededRand

	requests atomic.Int64
	swapped  atomic.Int64
	byClient clientCounts
}

// NewSwapper starts a Swapper and the kfake cluster behind it.
func NewSwapper(cfg SwapperConfig) (*Swapper, error) {
	if cfg.Every <= 0 {
		cfg.Every = DefaultSwapEvery
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	b, err := newBase(cfg.Listen, cfg.KfakeOpts)
	if err != nil {
		return nil, err
	}
	s := &Swapper{base: b, cfg: cfg, rng: newSeededRand(cfg.Seed)}
	b.srv.start(s.serveClient)
	return s, nil
}

// Seed returns the seed of the choices.
func (s *Swapper) Seed() uint64 { return s.cfg.Seed }

// Requests returns how many requests the Swapper has read from clients.
func (s *Swapper) Requests() int64 { return s.requests.Load() }

// Swapped returns how many responses were written before the response to
// the request sent just before them.
func (s *Swapper) Swapped() int64 { return s.swapped.Load() }

// SwappedFor returns how many of Swapped answered requests whose header
// carried clientID.
func (s *Swapper) SwappedFor(clientID string) int64 { return s.byClient.get(clientID) }

func (s *Swapper) hold() bool {
	return s.rng.int64N(int64(s.cfg.Every)) == 0
}

func (s *Swapper) serveClient(c net.Conn) {
	up, err := s.srv.dial(s.kfakeAddr)
	if err != nil {
		return
	}
	defer s.srv.release(up)
	// A reader of its own lets the loop below see whether the client has
	// already sent the next request.
	reqs := make(chan request, 64)
	quit := make(chan struct{})
	defer close(quit)
	if !s.srv.spawn(func() { readRequests(c, reqs, quit) }) {
		return
	}
	var held []byte
	defer func() {
		if held != nil {
			c.Write(held)
		}
	}()
	for req := range reqs {
		s.requests.Add(1)
		if _, err := up.Write(req.frame); err != nil {
			return
		}
		if req.noResponse {
			if held != nil {
				if _, err := c.Write(held); err != nil {
					return
				}
				held = nil
			}
			continue
		}
		resp, err := readFrame(up, minResponse)
		if err != nil {
			return
		}
		switch {
		case held != nil:
			s.swapped.Add(1)
			s.byClient.add(req.clientID)
			if _, err := c.Write(append(resp, held...)); err != nil {
				return
			}
			held = nil
		case len(reqs) > 0 && s.hold():
			held = resp
		default:
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	}
}

// readRequests sends c's requests to reqs until c ends or quit closes, and
// then closes reqs.
func readRequests(c net.Conn, reqs chan<- request, quit <-chan struct{}) {
	defer close(reqs)
	for {
		req, err := readRequest(c)
		if err != nil {
			return
		}
		select {
		case reqs <- req:
		case <-quit:
			return
		}
	}
}

// clientCounts counts events by client id.
type clientCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (cc *clientCounts) add(id string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = make(map[string]int64)
	}
	cc.m[id]++
}

func (cc *clientCounts) get(id string) int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.m[id]
}
