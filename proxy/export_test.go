package proxy

import (
	"reflect"
	"sync"
	"time"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/quota"
)

// WithQuotaWindow measures the quotas over w in place of Kafka's 11
// samples of one second, so that a test sees a rate held within seconds.
func WithQuotaWindow(w quota.Window) Option {
	return func(p *Proxy) {
		opts := quota.Options{Window: w}
		p.quotas = quota.NewManager(p.cfg.Quotas, opts)
		p.connCaps = quota.NewConns(quotaLimits(&p.cfg), p.cfg.Quotas, opts)
	}
}

// SetEOFDrain sets the bound on requests sent before a client's EOF for a
// test, which must call the function returned once its proxies are
// closed.
func SetEOFDrain(d time.Duration) (restore func()) {
	old := eofDrain
	eofDrain = d
	return func() { eofDrain = old }
}

// WithMemory gives the proxy a memory budget of limit bytes whatever its
// configuration says, so that tests can reach the budget's bounds with
// little traffic at sizes --max-memory refuses.
func WithMemory(limit int64) Option {
	return func(p *Proxy) { p.budget = budget.New(limit) }
}

// SetResponseWait sets the bound on a response's wait for memory for a
// test, which must call the function returned once its proxies are closed.
func SetResponseWait(d time.Duration) (restore func()) {
	old := responseWait
	responseWait = d
	return func() { responseWait = old }
}

// Retained returns the bytes the open connections keep of the requests
// they classified and sequenced, between requests: a walk of every
// connection's decoder, sequencer and queues that counts what their
// slices, strings, maps and pointers reach (a string or slice that aliases
// a frame counts for its own length, not the frame's).
func (p *Proxy) Retained() int {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		for _, v := range []any{c.dec, c.seq, c.outq, c.bs} {
			n += reached(reflect.ValueOf(v), map[uintptr]bool{})
		}
		c.mu.Unlock()
	}
	return n
}

// reached counts the memory v refers to beyond its own inline bytes.
func reached(v reflect.Value, seen map[uintptr]bool) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		return int(v.Type().Elem().Size()) + reached(v.Elem(), seen)
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return reached(v.Elem(), seen)
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += reached(v.Field(i), seen)
		}
		return n
	case reflect.Array:
		n := 0
		for i := range v.Len() {
			n += reached(v.Index(i), seen)
		}
		return n
	case reflect.Slice:
		if v.IsNil() {
			return 0
		}
		n := v.Cap() * int(v.Type().Elem().Size())
		for i := range v.Len() {
			n += reached(v.Index(i), seen)
		}
		return n
	case reflect.String:
		return v.Len()
	case reflect.Map:
		n := 0
		it := v.MapRange()
		for it.Next() {
			n += int(v.Type().Key().Size()+v.Type().Elem().Size()) + reached(it.Key(), seen) + reached(it.Value(), seen)
		}
		return n
	}
	return 0
}

// CountSingleDials counts the dials client connections start in the
// single topology, by address, for a test, which must call restore once
// its proxies are closed.
func CountSingleDials() (count func(addr string) int, restore func()) {
	var (
		mu sync.Mutex
		n  = map[string]int{}
	)
	dialStarted = func(addr string) {
		mu.Lock()
		n[addr]++
		mu.Unlock()
	}
	return func(addr string) int {
			mu.Lock()
			defer mu.Unlock()
			return n[addr]
		}, func() {
			dialStarted = nil
		}
}

// StreamWork returns what streaming request bodies in none mode has cost
// so far, over every connection: calls on the sockets that may each be a
// system call, and partitions handed to the sequencer.
func (p *Proxy) StreamWork() (calls, extends int64) {
	return p.streamWork.calls.Load(), p.streamWork.extends.Load()
}

// FetchCalls returns how many calls on the sockets, each a system call at
// most, walking audited Fetch responses has made so far, over every
// connection.
func (p *Proxy) FetchCalls() int64 { return p.fetchCalls.Load() }

// FlushHandOffs returns how many goroutines were started, over every
// connection, to write upstream requests that a response released.
func (p *Proxy) FlushHandOffs() int64 { return p.flushHandOffs.Load() }

// FetchVectors counts the merged Fetch answers written as vectors.
func (p *Proxy) FetchVectors() int64 { return p.fetchVectors.Load() }

// FetchCuts counts the Fetch answers cut short.
func (p *Proxy) FetchCuts() int64 { return p.fetchCuts.Load() }

func (p *Proxy) ProduceSplices() int64 { return p.produceSplices.Load() }

// FetchParks counts the Fetch answers read with record sets parked in
// pipes, FetchPiped the merged answers written with pieces spliced from
// them, FetchParkCuts the answers whose read failed with record sets
// parked, FetchParkDrops the answers whose parked record sets were
// dropped unread.
func (p *Proxy) FetchParks() int64     { return p.fetchParks.Load() }
func (p *Proxy) FetchPiped() int64     { return p.fetchPiped.Load() }
func (p *Proxy) FetchParkCuts() int64  { return p.fetchParkCuts.Load() }
func (p *Proxy) FetchParkDrops() int64 { return p.fetchParkDrops.Load() }

func (p *Proxy) ProducePeeks() int64 { return p.producePeeks.Load() }

// RequestTime is the proxy's time counted against the request_percentage
// of the configured entity named entity (Entity.String()).
func (p *Proxy) RequestTime(entity string) time.Duration {
	for _, s := range p.quotas.Stats() {
		if s.Kind == quota.Request && s.Entity.String() == entity {
			return time.Duration(s.Amount.Load())
		}
	}
	return 0
}

// FetchEarly, FetchKept and FetchKeptTaken count the single topology's
// Fetch requests answered from the parts that were in, the parts'
// answers kept for the next Fetch, and those it took.
func (p *Proxy) FetchEarly() int64     { return p.fetchEarly.Load() }
func (p *Proxy) FetchKept() int64      { return p.fetchKept.Load() }
func (p *Proxy) FetchKeptTaken() int64 { return p.fetchKeptTaken.Load() }

// FetchLate counts the single topology's Fetch parts still out when their
// Fetch's wait ended.
func (p *Proxy) FetchLate() int64 { return p.fetchLate.Load() }

// FetchTrimmed counts the single topology's Fetch parts sent with only
// the partitions their maximum holds.
func (p *Proxy) FetchTrimmed() int64 { return p.fetchTrimmed.Load() }

// BrokerStalls counts the single topology's upstream connections failed
// on a broker that stalled.
func (p *Proxy) BrokerStalls() int64 { return p.brokerStalls.Load() }
