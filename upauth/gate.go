package upauth

import (
	"fmt"
	"sync"
	"time"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
)

// Gates back off, per upstream address, after that address refused the
// proxy's credentials: while an address's gate is closed nothing is
// dialled there, so clients retrying cannot hammer a broker that refuses,
// and the password or token file can be fixed in the meantime. Other
// addresses are still dialled: a refusal can be one broker's alone (a
// credential not yet known to it, a listener of its own configuration).
//
// Only an answer refuses (ErrRefused, or no secret to send): an upstream
// that drops the connection during the exchange has refused nothing, and
// that is a connection failure, retried as a failed dial is.
//
// The zero value holds no refusal. An address has an entry only while its
// last authentication was refused, and the addresses are those the
// configuration and the upstream's metadata name, so the map is bounded
// by the node table. The errors it returns wrap proxyerr.UpstreamAuth.
type Gates struct {
	mu     sync.Mutex
	byAddr map[string]*gate
}

// gate is one address's back-off.
type gate struct {
	wait  time.Duration // the current back-off
	until time.Time     // no dial before this
	last  error         // the refusal
}

const (
	backoffMin = time.Second
	backoffMax = 30 * time.Second
)

// GateKey is the key of an authentication's back-off: the address for the
// proxy's own identity (own), the address and user for another, so that
// one principal's refused credentials hold back no one else's dials.
func GateKey(addr string, auth, own *Authenticator) string {
	if auth == nil || auth == own {
		return addr
	}
	return addr + " as " + auth.Mechanism() + " " + auth.User()
}

// Check returns an error wrapping proxyerr.UpstreamAuth while addr backs
// off.
func (g *Gates) Check(addr string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.byAddr[addr]
	if a == nil || !time.Now().Before(a.until) {
		return nil
	}
	return fmt.Errorf("%w: %s: backing off until %s after: %v", proxyerr.UpstreamAuth, addr, a.until.Format(time.TimeOnly), a.last)
}

// Failed records a refusal by addr and returns how long addr is not
// dialled: 1s after a first refusal, twice the last wait after each
// further one, at most 30s.
func (g *Gates) Failed(addr string, err error) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byAddr == nil {
		g.byAddr = make(map[string]*gate)
	}
	a := g.byAddr[addr]
	if a == nil {
		a = &gate{}
		g.byAddr[addr] = a
	}
	a.wait = min(max(2*a.wait, backoffMin), backoffMax)
	a.until, a.last = time.Now().Add(a.wait), err
	return a.wait
}

// Succeeded forgets addr's refusals.
func (g *Gates) Succeeded(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byAddr, addr)
}

// Refusing returns an error wrapping proxyerr.UpstreamAuth when the last
// authentication at every one of addrs was refused (the proxy then
// reaches no bootstrap upstream at all), and nil otherwise.
func (g *Gates) Refusing(addrs []string) error {
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
	return fmt.Errorf("%w: %v", proxyerr.UpstreamAuth, last)
}
