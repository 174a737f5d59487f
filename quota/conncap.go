package quota

import (
	"net/netip"
	"sync"
	"time"
)

// ConnLimits are the caps on connections by address, Kafka's broker
// settings of the same names.
type ConnLimits struct {
	// PerIP is max.connections.per.ip: the connections one address may
	// have open at once. Zero means no cap.
	PerIP int
	// PerIPOverrides is max.connections.per.ip.overrides: a cap per
	// address in place of PerIP; 0 refuses every connection from it, as
	// in Kafka. Nil overrides nothing.
	PerIPOverrides map[netip.Addr]int
}

func (l *ConnLimits) of(ip netip.Addr) int {
	if n, ok := l.PerIPOverrides[ip]; ok {
		return n
	}
	if l.PerIP > 0 {
		return l.PerIP
	}
	return -1
}

// connRate is one address's connection creation rate.
type connRate struct {
	r      Rate
	last   int64
	shared bool // counted in Conns.shared
}

// Conns counts open connections per address and per user against their
// caps, and measures each address's connection creation rate against its
// connection_creation_rate, as Kafka's ConnectionQuotas does. It is safe
// for concurrent use; the zero Conns is not, use NewConns.
type Conns struct {
	opts Options

	mu     sync.Mutex
	limits ConnLimits
	r      *Resolver
	byIP   map[netip.Addr]int
	byUser map[string]int
	rates  map[netip.Addr]*connRate
	// shared counts the rates of addresses under the <default> entry;
	// overflow is the one they share past Options.MaxRates.
	shared   int
	overflow *connRate
	swept    int64 // ms of the last drop of idle rates at MaxRates
}

// NewConns returns the caps of l and q (nil: no quota entries).
func NewConns(l ConnLimits, q *Config, opts Options) *Conns {
	if opts.Idle <= 0 {
		opts.Idle = DefaultIdle
	}
	if opts.MaxRates <= 0 {
		opts.MaxRates = DefaultMaxRates
	}
	c := &Conns{opts: opts, byIP: map[netip.Addr]int{}, byUser: map[string]int{}, rates: map[netip.Addr]*connRate{}}
	c.Update(l, q)
	return c
}

// Update swaps in new caps, as a reload does. Connections already open
// stay open; the new caps count them.
func (c *Conns) Update(l ConnLimits, q *Config) {
	ov := make(map[netip.Addr]int, len(l.PerIPOverrides))
	for a, n := range l.PerIPOverrides {
		ov[a.Unmap()] = n
	}
	l.PerIPOverrides = ov
	r := NewResolver(q)
	c.mu.Lock()
	c.limits, c.r = l, r
	c.mu.Unlock()
}

// Accept counts a new connection from ip at now. A positive throttle
// means the address is over its connection_creation_rate: Kafka neither
// serves nor counts such a connection, and closes it once the throttle
// (at most one sample's span) has passed. ErrTooManyConnections means
// the address has its most connections open: close it at once. With
// neither, the connection counts until Release.
func (c *Conns) Accept(now time.Time, ip netip.Addr) (throttle time.Duration, err error) {
	ip = ip.Unmap()
	t := ms(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if bound := c.r.ConnectionRate(ip); bound > 0 {
		cr := c.rateLocked(ip, t)
		cr.last = t
		limit := time.Duration(c.opts.Window.sizeMs()) * time.Millisecond
		if d := cr.r.check(t, 1, float64(bound), limit); d > 0 {
			// Kafka takes the refused connection back out of the rate.
			cr.r.record(t, -1)
			return d, nil
		}
	}
	if max := c.limits.of(ip); max >= 0 && c.byIP[ip] >= max {
		return 0, ErrTooManyConnections
	}
	c.byIP[ip]++
	return 0, nil
}

// rateLocked returns ip's connection rate, made on first use. Addresses
// with an entry of their own always get one; those under the <default>
// entry are bounded by Options.MaxRates: at the bound the rates with no
// connection for a whole window are dropped (they measure 0), and past it
// still the address shares one rate with every other such address, a
// stricter quota, never a looser one. The caller holds c.mu.
func (c *Conns) rateLocked(ip netip.Addr, now int64) *connRate {
	if cr := c.rates[ip]; cr != nil {
		return cr
	}
	shared := !c.r.ownConnectionRate(ip)
	if shared {
		if c.shared >= c.opts.MaxRates && now-c.swept >= c.opts.Window.spanMs() {
			c.swept = now
			c.dropLocked(now - c.opts.Window.spanMs())
		}
		if c.shared >= c.opts.MaxRates {
			if c.overflow == nil {
				c.overflow = &connRate{r: Rate{w: c.opts.Window}}
			}
			return c.overflow
		}
		c.shared++
	}
	cr := &connRate{r: Rate{w: c.opts.Window}, shared: shared}
	c.rates[ip] = cr
	return cr
}

// dropLocked drops the rates with no connection after before (ms) and
// returns how many. The caller holds c.mu.
func (c *Conns) dropLocked(before int64) int {
	n := 0
	for ip, cr := range c.rates {
		if cr.last <= before {
			delete(c.rates, ip)
			if cr.shared {
				c.shared--
			}
			n++
		}
	}
	if c.overflow != nil && c.overflow.last <= before {
		c.overflow = nil
	}
	return n
}

// Release uncounts a connection Accept counted.
func (c *Conns) Release(ip netip.Addr) {
	ip = ip.Unmap()
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byIP[ip]; n <= 1 {
		delete(c.byIP, ip)
	} else {
		c.byIP[ip] = n - 1
	}
}

// AcquireUser counts a connection that authenticated as user, or returns
// ErrTooManyUserConnections when user already has the max_connections of
// users/<user> (else users/<default>) open. A counted connection is
// uncounted by ReleaseUser.
func (c *Conns) AcquireUser(user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max := c.r.MaxConnections(user); max > 0 && c.byUser[user] >= max {
		return ErrTooManyUserConnections
	}
	c.byUser[user]++
	return nil
}

// ReleaseUser uncounts a connection AcquireUser counted.
func (c *Conns) ReleaseUser(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byUser[user]; n <= 1 {
		delete(c.byUser, user)
	} else {
		c.byUser[user] = n - 1
	}
}

// Open returns the connections counted for ip and for user.
func (c *Conns) Open(ip netip.Addr, user string) (byIP, byUser int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byIP[ip.Unmap()], c.byUser[user]
}

// Expire drops the connection rates of addresses that opened no
// connection for Options.Idle before now, and returns how many.
func (c *Conns) Expire(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropLocked(ms(now) - c.opts.Idle.Milliseconds())
}
