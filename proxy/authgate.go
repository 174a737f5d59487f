package proxy

import (
	"fmt"
	"sync"
	"time"
)

// authGates back off, per upstream address, after that address refused
// the proxy's credentials: while an address's gate is closed nothing is
// dialled there, so clients retrying cannot hammer a broker that refuses,
// and the password or token file can be fixed in the meantime. Other
// addresses are still dialled: a refusal can be one broker's alone (a
// credential not yet known to it, a listener of its own configuration).
//
// Only an answer refuses (upauth.ErrRefused, or no secret to send): an
// upstream that drops the connection during the exchange has refused
// nothing, and that is a connection failure, retried as a failed dial is.
//
// The zero value holds no refusal. An address has an entry only while its
// last authentication was refused, and the addresses are those the
// configuration and the upstream's metadata name, so the map is bounded
// by the node table.
type authGates struct {
	mu     sync.Mutex
	byAddr map[string]*authGate
}

// authGate is one address's back-off.
type authGate struct {
	wait  time.Duration // the current back-off
	until time.Time     // no dial before this
	last  error         // the refusal
}

const (
	authBackoffMin = time.Second
	authBackoffMax = 30 * time.Second
)

// check returns an error wrapping ErrUpstreamAuth while addr backs off.
func (g *authGates) check(addr string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.byAddr[addr]
	if a == nil || !time.Now().Before(a.until) {
		return nil
	}
	return fmt.Errorf("%w: %s: backing off until %s after: %v", ErrUpstreamAuth, addr, a.until.Format(time.TimeOnly), a.last)
}

// failed records a refusal by addr and returns how long addr is not
// dialled: 1s after a first refusal, twice the last wait after each
// further one, at most 30s.
func (g *authGates) failed(addr string, err error) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byAddr == nil {
		g.byAddr = make(map[string]*authGate)
	}
	a := g.byAddr[addr]
	if a == nil {
		a = &authGate{}
		g.byAddr[addr] = a
	}
	a.wait = min(max(2*a.wait, authBackoffMin), authBackoffMax)
	a.until, a.last = time.Now().Add(a.wait), err
	return a.wait
}

// succeeded forgets addr's refusals.
func (g *authGates) succeeded(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byAddr, addr)
}

// refusing returns an error wrapping ErrUpstreamAuth when the last
// authentication at every one of addrs was refused (the proxy then
// reaches no bootstrap upstream at all), and nil otherwise.
func (g *authGates) refusing(addrs []string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var last error
	for _, addr := range addrs {
		a := g.byAddr[addr]
		if a == nil {
			return nil
		}
		last = a.last
	}
	if last == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUpstreamAuth, last)
}
