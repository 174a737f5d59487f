package quota

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Kafka drops a client's quota sensors after an hour without a record
// (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
const DefaultIdle = time.Hour

// DefaultMaxRates bounds the rates a Manager keeps when Options say
// nothing: about 100 bytes each, so some 10 MiB at most.
const DefaultMaxRates = 100_000

// Options shape a Manager. The zero Options are Kafka's defaults.
type Options struct {
	// Window is the sliding window of every rate. Zero: 11 samples of 1s.
	Window Window
	// Idle is how long a rate may go without a record before Expire drops
	// it. Zero means DefaultIdle.
	Idle time.Duration
	// MaxRates bounds the rates kept at once. At the bound, the rates with
	// no record for a whole window are dropped first (they measure 0, so
	// nothing is lost); past it still, a client whose rate is not kept yet
	// shares one rate with every other such client of the same configured
	// entity and kind: a stricter quota for the excess, never a looser
	// one. Zero means DefaultMaxRates.
	MaxRates int
}

// Stats are the totals of one configured entity and kind, for metrics:
// label values come from the configured entities only, never from a
// client's own user or client id.
type Stats struct {
	Kind   Kind
	Entity Entity
	// Amount is the bytes recorded (Produce, Fetch) or the nanoseconds
	// (Request). A fetch answered empty because of its quota adds none.
	Amount atomic.Int64
	// Throttle is the throttle time handed out, in nanoseconds, and
	// Throttled the number of times.
	Throttle  atomic.Int64
	Throttled atomic.Int64
}

// rate is one measured rate, shared by every client whose quota resolves
// to the same key, as Kafka shares a sensor among them.
type rate struct {
	mu    sync.Mutex
	r     Rate
	bound float64
	last  int64 // ms of the last record, for expiry
	dead  atomic.Bool
	stats *Stats
}

type rateKey struct {
	kind     Kind
	key      Entity
	overflow bool // the shared rate of a configured entity past MaxRates
}

type statKey struct {
	kind Kind
	e    Entity
}

// state is what a reload swaps whole.
type state struct {
	r   *Resolver
	gen uint64
	on  bool // some entry sets a client quota
	req bool // some entry sets request_percentage
}

// Manager measures the client quotas of one proxy: per kind, one rate
// per key that some client's quota resolves to, each checked against the
// bound of the entity in force. It is safe for concurrent use. A nil
// *Manager, and one whose Config is empty, records nothing and throttles
// no one, without taking a lock.
type Manager struct {
	opts  Options
	state atomic.Pointer[state]

	mu    sync.RWMutex
	rates map[rateKey]*rate
	kept  int   // rates that are not overflow rates
	swept int64 // ms of the last drop of idle rates at MaxRates
	stats map[statKey]*Stats
}

// NewManager returns a Manager enforcing c (nil: nothing) with opts.
func NewManager(c *Config, opts Options) *Manager {
	if opts.Idle <= 0 {
		opts.Idle = DefaultIdle
	}
	if opts.MaxRates <= 0 {
		opts.MaxRates = DefaultMaxRates
	}
	m := &Manager{opts: opts, rates: map[rateKey]*rate{}, stats: map[statKey]*Stats{}}
	m.Update(c)
	return m
}

// Update swaps in the quotas of c, as a reload does. Rates already
// measured keep their samples, under the new bound from the next record
// on, as Kafka updates its sensors' quotas in place; the stats of an
// entity no longer configured are dropped.
func (m *Manager) Update(c *Config) {
	r := NewResolver(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	gen := uint64(1)
	if old := m.state.Load(); old != nil {
		gen = old.gen + 1
	}
	stats := make(map[statKey]*Stats, len(m.stats))
	for k := Kind(0); k < kinds; k++ {
		for _, e := range r.Entities(k) {
			sk := statKey{k, e}
			if s, ok := m.stats[sk]; ok {
				stats[sk] = s
			} else {
				stats[sk] = &Stats{Kind: k, Entity: e}
			}
		}
	}
	m.stats = stats
	on := r.Has(Produce) || r.Has(Fetch) || r.Has(Request)
	m.state.Store(&state{r: r, gen: gen, on: on, req: r.Has(Request)})
}

// On reports whether some client quota is configured: when not, nothing
// is recorded and the caller may skip even looking a client up. A nil
// Manager is off.
func (m *Manager) On() bool {
	return m != nil && m.state.Load().on
}

// RequestOn reports whether some entry sets request_percentage: when not,
// the proxy need not time its work on requests at all. A nil Manager is
// off.
func (m *Manager) RequestOn() bool {
	return m != nil && m.state.Load().req
}

// Stats returns the totals of every configured entity and kind.
func (m *Manager) Stats() []*Stats {
	if m == nil {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Stats, 0, len(m.stats))
	for _, s := range m.stats {
		out = append(out, s)
	}
	return out
}

// Rates returns the number of rates kept.
func (m *Manager) Rates() int {
	if m == nil {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.rates)
}

// Expire drops the rates with no record for Options.Idle before now and
// returns how many it dropped. A client holding a dropped rate resolves a
// new one at its next record.
func (m *Manager) Expire(now time.Time) int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropLocked(ms(now) - m.opts.Idle.Milliseconds())
}

// dropLocked drops the rates with no record after before (ms) and returns
// how many. The caller holds m.mu.
func (m *Manager) dropLocked(before int64) int {
	n := 0
	for k, rt := range m.rates {
		rt.mu.Lock()
		if rt.last <= before {
			rt.dead.Store(true)
			delete(m.rates, k)
			if !k.overflow {
				m.kept--
			}
			n++
		}
		rt.mu.Unlock()
	}
	return n
}

// rateFor returns the rate of res for kind k, made on first use.
func (m *Manager) rateFor(k Kind, res Resolution, now int64) *rate {
	key := rateKey{kind: k, key: res.Key}
	m.mu.RLock()
	rt := m.rates[key]
	stats := m.stats[statKey{k, res.Configured}]
	m.mu.RUnlock()
	if rt == nil {
		m.mu.Lock()
		if rt = m.rates[key]; rt == nil {
			if m.kept >= m.opts.MaxRates && now-m.swept >= m.opts.Window.spanMs() {
				m.swept = now
				m.dropLocked(now - m.opts.Window.spanMs())
			}
			if m.kept >= m.opts.MaxRates {
				key = rateKey{kind: k, key: res.Configured, overflow: true}
				rt = m.rates[key]
			}
			if rt == nil {
				rt = &rate{r: Rate{w: m.opts.Window}, last: now}
				m.rates[key] = rt
				if !key.overflow {
					m.kept++
				}
			}
		}
		m.mu.Unlock()
	}
	// Lock order: Manager.mu before rate.mu (Expire), never the reverse.
	rt.mu.Lock()
	rt.bound, rt.stats = res.Bound, stats
	rt.mu.Unlock()
	return rt
}

// Client is one client's view of the Manager: its user and client id,
// with the rates they resolve to kept until a reload or an expiry. Make
// one per connection (again when the client id changes). A nil *Client
// records nothing. It is safe for concurrent use.
type Client struct {
	m              *Manager
	user, clientID string
	cache          atomic.Pointer[resolved]
}

// resolved is what a Client resolved under one generation of the
// quotas, so that a record looks nothing up.
type resolved struct {
	gen   uint64
	rates [kinds]*rate
	// maxFetch is MaxFetchBytes' answer; 0: no fetch quota.
	maxFetch int64
}

// Client returns the view of a client authenticated as user (Kafka's
// ANONYMOUS when no one authenticated it) sending clientID. On a nil
// Manager it returns nil.
func (m *Manager) Client(user, clientID string) *Client {
	if m == nil {
		return nil
	}
	return &Client{m: m, user: user, clientID: clientID}
}

// rate returns the client's rate of kind k, or nil when no quota of k
// applies to it.
func (c *Client) rate(k Kind, now int64) *rate {
	st := c.m.state.Load()
	if !st.on {
		return nil
	}
	return c.resolve(st, k, now).rates[k]
}

// resolve returns the client's rates under st, resolved again only when
// a reload made st or an expiry dropped the rate of kind k.
func (c *Client) resolve(st *state, k Kind, now int64) *resolved {
	res := c.cache.Load()
	if res != nil && res.gen == st.gen && (res.rates[k] == nil || !res.rates[k].dead.Load()) {
		return res
	}
	res = &resolved{gen: st.gen}
	for kk := Kind(0); kk < kinds; kk++ {
		if q, ok := st.r.Resolve(kk, c.user, c.clientID); ok {
			res.rates[kk] = c.m.rateFor(kk, q, now)
			if kk == Fetch {
				res.maxFetch = c.m.maxFetch(q.Bound)
			}
		}
	}
	c.cache.Store(res)
	return res
}

// unrecord says when record takes its value back once checked.
type unrecord int8

const (
	unrecordNever  unrecord = iota
	unrecordOver            // when over the quota
	unrecordAlways          // whatever the check said
)

// record records value on the client's rate of kind k and returns the
// throttle time, at most limit when positive. It retries once when an
// expiry dropped the rate between the lookup and the record.
func (c *Client) record(k Kind, now time.Time, value float64, amount int64, limit time.Duration, un unrecord) time.Duration {
	if c == nil {
		return 0
	}
	t := ms(now)
	for range 2 {
		rt := c.rate(k, t)
		if rt == nil {
			return 0
		}
		rt.mu.Lock()
		if rt.dead.Load() {
			rt.mu.Unlock()
			continue
		}
		rt.last = max(rt.last, t)
		d := rt.r.check(t, value, rt.bound, limit)
		back := un == unrecordAlways || d > 0 && un == unrecordOver
		if back {
			// Kafka answers a throttled fetch empty and takes its bytes
			// back (ClientQuotaManager.unrecordQuotaSensor).
			rt.r.record(t, -value)
		}
		stats := rt.stats
		rt.mu.Unlock()
		if stats != nil {
			if d > 0 {
				stats.Throttle.Add(int64(d))
				stats.Throttled.Add(1)
			}
			if !back {
				stats.Amount.Add(amount)
			}
		}
		return d
	}
	return 0
}

// RecordProduce records a Produce request of bytes (its header and body,
// the frame less its length prefix, as Kafka records
// request.sizeInBytes) and returns how long the client is
// throttled: the answer goes at once with throttle_time_ms set, and the
// connection is not read for that long. Kafka appends the records of a
// throttled produce all the same.
func (c *Client) RecordProduce(now time.Time, bytes int) time.Duration {
	return c.record(Produce, now, float64(bytes), int64(bytes), 0, unrecordNever)
}

// RecordFetch records a Fetch response of bytes (its body and 4 bytes,
// as Kafka's FetchResponse.sizeOf counts it, so the frame less its length
// prefix for a response header without tags) and returns the throttle
// time. When it is positive the bytes are taken back and the client must
// be answered with the response's throttle_time_ms set and no records, as
// Kafka answers a throttled fetch.
func (c *Client) RecordFetch(now time.Time, bytes int) time.Duration {
	return c.record(Fetch, now, float64(bytes), int64(bytes), 0, unrecordOver)
}

// RecordThrottledFetch is RecordFetch for a Fetch response that another
// quota already throttled, so that it goes empty: its bytes are checked
// against the fetch quota for the throttle, then always taken back, as
// Kafka does when the request quota alone throttles a fetch.
func (c *Client) RecordThrottledFetch(now time.Time, bytes int) time.Duration {
	return c.record(Fetch, now, float64(bytes), int64(bytes), 0, unrecordAlways)
}

// FetchThrottle returns how long the client's fetch rate is already over
// its quota at now, recording nothing: a fetch sent while it is positive
// can be answered empty at once, without asking the broker for records
// that would be dropped.
func (c *Client) FetchThrottle(now time.Time) time.Duration {
	if c == nil {
		return 0
	}
	t := ms(now)
	rt := c.rate(Fetch, t)
	if rt == nil {
		return 0
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.r.over(t, rt.bound, 0)
}

// FetchAnswered counts, in the Stats of the client's fetch quota, a fetch
// answered empty at once for a throttle d that FetchThrottle gave: no
// bytes, but the throttle handed out.
func (c *Client) FetchAnswered(now time.Time, d time.Duration) {
	if c == nil || d <= 0 {
		return
	}
	rt := c.rate(Fetch, ms(now))
	if rt == nil {
		return
	}
	rt.mu.Lock()
	stats := rt.stats
	rt.mu.Unlock()
	if stats != nil {
		stats.Throttle.Add(int64(d))
		stats.Throttled.Add(1)
	}
}

// MaxFetchBytes returns the most a Fetch response may carry without being
// throttled for certain: the quota over Samples-1 windows (Kafka's
// getMaxValueInQuotaWindow), which Kafka takes as the fetch's max_bytes
// when smaller. It is 0 when no fetch quota applies.
func (c *Client) MaxFetchBytes() int64 {
	if c == nil {
		return 0
	}
	st := c.m.state.Load()
	if !st.on {
		return 0
	}
	res := c.cache.Load()
	if res == nil || res.gen != st.gen {
		res = c.resolve(st, Fetch, ms(time.Now()))
	}
	return res.maxFetch
}

// maxFetch is MaxFetchBytes for a fetch quota of bound bytes a second.
func (m *Manager) maxFetch(bound float64) int64 {
	w := m.opts.Window
	v := bound * float64(w.samples()-1) * float64(w.sizeMs()) / 1000
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(v)
}

// nanosToPercent turns time spent into percentage-seconds, so that the
// rate per second is the percentage of one core (Kafka's
// ClientRequestQuotaManager.nanosToPercentage).
const nanosToPercent = 100.0 / float64(time.Second)

// RecordRequestTime records d of the proxy's time spent on one of the
// client's requests and returns the throttle time, at most one sample's
// span, as Kafka bounds the request quota's throttle
// (ClientRequestQuotaManager.maxThrottleTimeMs). Kafka exempts Produce
// with acks=0 from it.
func (c *Client) RecordRequestTime(now time.Time, d time.Duration) time.Duration {
	if c == nil {
		return 0
	}
	limit := time.Duration(c.m.opts.Window.sizeMs()) * time.Millisecond
	return c.record(Request, now, float64(d)*nanosToPercent, int64(d), limit, unrecordNever)
}

// RequestTimed reports whether request_percentage applies to the
// client, now: when not, the proxy need not time its requests.
func (c *Client) RequestTimed(now time.Time) bool {
	return c != nil && c.rate(Request, ms(now)) != nil
}

// RequestExempt reports whether requests of key escape the request quota,
// as Kafka exempts them:
//   - the inter-broker requests (ApiKeys.clusterAction), which Kafka
//     answers unthrottled to a principal it lets take a cluster action;
//     the broker behind the proxy authorizes them;
//   - SaslHandshake, SaslAuthenticate and ApiVersions, which Kafka
//     answers in its authenticator while a connection authenticates,
//     before any quota applies (the proxy, which may only relay the
//     exchange, does not tell an ApiVersions sent afterwards, once per
//     connection, from one sent before).
//
// Kafka also exempts a Produce with acks=0, which has no answer to carry
// a throttle; the caller knows that from the request.
func RequestExempt(key int16) bool {
	switch key {
	case 4, 5, 6, 7, // LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
		27,                         // WriteTxnMarkers
		52, 53, 54, 55, 56, 57, 58, // Vote, Begin/EndQuorumEpoch, DescribeQuorum, AlterPartition, UpdateFeatures, Envelope
		62, 63, 67, // BrokerRegistration, BrokerHeartbeat, AllocateProducerIds
		17, 36, 18: // SaslHandshake, SaslAuthenticate, ApiVersions
		return true
	}
	return false
}

// AddRequestTime records d of the proxy's time on one of the client's
// requests without checking the quota: the time spent after its
// throttle was decided (delivering its answer), which Kafka likewise
// records for the network thread without throttling
// (ClientRequestQuotaManager's recordNoThrottle); the next request's
// check sees it.
func (c *Client) AddRequestTime(now time.Time, d time.Duration) {
	if c == nil {
		return
	}
	t := ms(now)
	rt := c.rate(Request, t)
	if rt == nil {
		return
	}
	rt.mu.Lock()
	if !rt.dead.Load() {
		rt.last = max(rt.last, t)
		rt.r.record(t, float64(d)*nanosToPercent)
	}
	stats := rt.stats
	rt.mu.Unlock()
	if stats != nil {
		stats.Amount.Add(int64(d))
	}
}
