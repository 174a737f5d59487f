package quota

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestPerIPCap: Kafka refuses a connection when the address already has
// its cap open (ConnectionQuotas.inc: count >= max), so a cap of 2 lets 2
// in; an override replaces the cap for its address, 0 refusing all.
func TestPerIPCap(t *testing.T) {
	a, b, z := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	c := NewConns(ConnLimits{PerIP: 2, PerIPOverrides: map[netip.Addr]int{b: 3, z: 0}}, nil, Options{})
	for i := range 2 {
		if _, err := c.Accept(at(0), a); err != nil {
			t.Fatalf("connection %d from a: %v", i+1, err)
		}
	}
	if _, err := c.Accept(at(0), a); !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("third from a: %v, want ErrTooManyConnections", err)
	}
	// The same address written as IPv4-mapped IPv6 is the same address.
	if _, err := c.Accept(at(0), netip.MustParseAddr("::ffff:10.0.0.1")); !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("a as ::ffff: %v, want ErrTooManyConnections", err)
	}
	c.Release(a)
	if _, err := c.Accept(at(0), a); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	for i := range 3 {
		if _, err := c.Accept(at(0), b); err != nil {
			t.Fatalf("connection %d from b (override 3): %v", i+1, err)
		}
	}
	if _, err := c.Accept(at(0), b); !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("fourth from b: %v", err)
	}
	if _, err := c.Accept(at(0), z); !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("z (override 0): %v", err)
	}
	if n, _ := c.Open(a, ""); n != 2 {
		t.Fatalf("a has %d open, want 2", n)
	}
	// No cap at all.
	c = NewConns(ConnLimits{}, nil, Options{})
	for range 1000 {
		if _, err := c.Accept(at(0), a); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPerUserCap(t *testing.T) {
	c := NewConns(ConnLimits{}, mustParse(t, "- user: alice\n  max_connections: 1\n- user: <default>\n  max_connections: 2\n"), Options{})
	if err := c.AcquireUser("alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.AcquireUser("alice"); !errors.Is(err, ErrTooManyUserConnections) {
		t.Fatalf("alice's second: %v", err)
	}
	for range 2 {
		if err := c.AcquireUser("bob"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AcquireUser("bob"); !errors.Is(err, ErrTooManyUserConnections) {
		t.Fatalf("bob's third (users/<default>): %v", err)
	}
	c.ReleaseUser("bob")
	if err := c.AcquireUser("bob"); err != nil {
		t.Fatal(err)
	}
	if _, n := c.Open(netip.Addr{}, "bob"); n != 2 {
		t.Fatalf("bob has %d, want 2", n)
	}
	// A reload lowers the cap: the open ones stay, new ones wait for it.
	c.Update(ConnLimits{}, mustParse(t, "- user: bob\n  max_connections: 1\n"))
	if err := c.AcquireUser("bob"); !errors.Is(err, ErrTooManyUserConnections) {
		t.Fatalf("bob over the new cap: %v", err)
	}
	if err := c.AcquireUser("alice"); err != nil {
		t.Fatalf("alice without a cap now: %v", err)
	}
}

// TestConnectionRate: connection_creation_rate 2 with Kafka's window. 20
// connections at t=0 are 20 over W = 10 s, 2/s: at the bound. The 21st
// makes 2.1/s: throttled (2.1-2)/2*10000 = 500 ms, and Kafka takes it back
// out of the rate and does not count it, so the 22nd is throttled the
// same. The throttle is bounded by one sample's span (1 s): 60 more at
// once would want far more.
func TestConnectionRate(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.7")
	c := NewConns(ConnLimits{}, mustParse(t, "- ip: 192.0.2.7\n  connection_creation_rate: 2\n"), Options{})
	for i := range 20 {
		if d, err := c.Accept(at(0), ip); d != 0 || err != nil {
			t.Fatalf("connection %d: %v, %v", i+1, d, err)
		}
	}
	for range 2 {
		if d, err := c.Accept(at(0), ip); d != 500*time.Millisecond || err != nil {
			t.Fatalf("21st: %v, %v; want a 500ms throttle", d, err)
		}
	}
	if n, _ := c.Open(ip, ""); n != 20 {
		t.Fatalf("%d open, want 20: throttled connections do not count", n)
	}
	// Another address has no quota.
	if d, _ := c.Accept(at(0), netip.MustParseAddr("192.0.2.8")); d != 0 {
		t.Fatalf("an address without a quota throttled %v", d)
	}
	c = NewConns(ConnLimits{}, mustParse(t, "- ip: <default>\n  connection_creation_rate: 1\n"), Options{})
	var last time.Duration
	for range 80 {
		last, _ = c.Accept(at(0), ip)
	}
	if last != time.Second {
		t.Fatalf("throttle %v, want it bounded to 1s", last)
	}
	if n := c.Expire(at(3600*1000 - 1)); n != 0 {
		t.Fatalf("expired %d before an hour", n)
	}
	if n := c.Expire(at(3600 * 1000)); n != 1 {
		t.Fatalf("expired %d, want the one rate", n)
	}
}

// TestConnectionRatesBounded: addresses under the <default> entry keep at
// most MaxRates rates; at the bound, rates idle for a whole window are
// dropped (nothing lost), and past it the newcomers share one rate.
func TestConnectionRatesBounded(t *testing.T) {
	own := netip.MustParseAddr("192.0.2.1")
	c := NewConns(ConnLimits{}, mustParse(t, "- ip: <default>\n  connection_creation_rate: 1\n- ip: 192.0.2.1\n  connection_creation_rate: 1\n"), Options{MaxRates: 2})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := range 2 {
		c.Accept(at(0), addr(i))
	}
	c.Accept(at(0), own) // an address with its own entry always has its rate
	// Past the bound: addr(2) and addr(3) share one rate, 10 connections
	// each at once make 20 over 10 s: throttled.
	for range 5 {
		c.Accept(at(0), addr(2))
	}
	if d, _ := c.Accept(at(0), addr(3)); d != 0 {
		t.Fatalf("the shared rate at 0.6/s throttled %v", d)
	}
	for range 10 {
		c.Accept(at(0), addr(3))
	}
	if d, _ := c.Accept(at(0), addr(2)); d == 0 {
		t.Fatal("addresses past the bound do not share a rate")
	}
	c.mu.Lock()
	n := len(c.rates)
	c.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d rates, want 2 under <default> and the own one", n)
	}
	// A whole window later the idle rates are dropped to make room.
	if d, _ := c.Accept(at(11000), addr(4)); d != 0 {
		t.Fatalf("a new address after the idle ones went: throttled %v", d)
	}
	c.mu.Lock()
	_, kept := c.rates[addr(4)]
	c.mu.Unlock()
	if !kept {
		t.Fatal("the new address shares a rate though idle ones could go")
	}
}
