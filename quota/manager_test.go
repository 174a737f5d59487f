package quota

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProduceThrottle drives a Manager with the sequence of
// TestRateSteadyStart: Produce requests of 100 bytes, one every 100 ms,
// against producer_byte_rate 200. At t ms (t < 10000) the sum is t+100
// and W = t + (10-floor(t/1000))*1000 = 10000 + t mod 1000, so the
// throttle is ((t+100)*1000 - 200*W)/200 ms when positive: 0 at t=1900
// (2000 over 10.9 s), 500 at t=2000 (2100 over 10 s), 900 at t=2100
// (2200 over 10.1 s), 4100 at t=2900 (3000 over 10.9 s). A burst of 3000
// bytes more at t=2900 makes it (6000000-200*10900)/200 = 19100 ms.
// Kafka records a throttled produce all the same.
func TestProduceThrottle(t *testing.T) {
	m := NewManager(mustParse(t, "- user: alice\n  producer_byte_rate: 200\n"), Options{})
	c := m.Client("alice", "app")
	want := map[int64]time.Duration{1900: 0, 2000: 500 * time.Millisecond, 2100: 900 * time.Millisecond, 2900: 4100 * time.Millisecond}
	throttles := 0
	for ms := int64(0); ms <= 2900; ms += 100 {
		d := c.RecordProduce(at(ms), 100)
		if w, ok := want[ms]; ok && d != w {
			t.Fatalf("t=%d: throttle %v, want %v", ms, d, w)
		}
		if ms < 2000 && d != 0 {
			t.Fatalf("t=%d: throttled %v within the quota", ms, d)
		}
		if d > 0 {
			throttles++
		}
	}
	if d := c.RecordProduce(at(2900), 3000); d != 19100*time.Millisecond {
		t.Fatalf("burst: throttle %v, want 19.1s", d)
	}
	throttles++
	// Another client of alice shares the rate (users/alice keys by user).
	if d := m.Client("alice", "other").RecordProduce(at(2900), 0); d == 0 {
		t.Fatal("alice's other client is not throttled by the shared rate")
	}
	// Nothing else is throttled: no entry for bob.
	if d := m.Client("bob", "app").RecordProduce(at(2900), 1<<30); d != 0 {
		t.Fatalf("bob throttled %v with no quota", d)
	}
	var got *Stats
	for _, s := range m.Stats() {
		if s.Kind == Produce && s.Entity == (Entity{User: "alice"}) {
			got = s
		}
	}
	if got == nil || got.Amount.Load() != 6000 || got.Throttled.Load() != int64(throttles+1) {
		t.Fatalf("stats %+v, want 6000 bytes and %d throttles for users/alice", got, throttles+1)
	}
}

// TestDefaultIsPerUser: users/<default> gives each user a rate of its own.
func TestDefaultIsPerUser(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 100\n"), Options{})
	if d := m.Client("alice", "a").RecordProduce(at(0), 5000); d == 0 {
		t.Fatal("alice: 5000 bytes over 10 s against 100/s not throttled")
	}
	if d := m.Client("bob", "a").RecordProduce(at(0), 900); d != 0 {
		t.Fatalf("bob throttled %v for alice's bytes", d)
	}
	if n := m.Rates(); n != 2 {
		t.Fatalf("%d rates, want one per user", n)
	}
}

// TestFetchThrottle: a throttled fetch's bytes are taken back (Kafka
// answers it empty), so the rate is what was delivered; FetchThrottle
// reads the rate without recording.
func TestFetchThrottle(t *testing.T) {
	m := NewManager(mustParse(t, "- client-id: app\n  consumer_byte_rate: 1000\n"), Options{})
	c := m.Client("ANONYMOUS", "app")
	if d := c.RecordFetch(at(0), 9000); d != 0 {
		t.Fatalf("9000 bytes over 10 s against 1000/s: throttled %v", d)
	}
	// 9000+2000 over 10 s = 1100/s: throttle (11000000-1000*10000)/1000 ms.
	if d := c.RecordFetch(at(0), 2000); d != time.Second {
		t.Fatalf("throttle %v, want 1s", d)
	}
	if d := c.FetchThrottle(at(0)); d != 0 {
		t.Fatalf("after the throttled fetch was taken back: %v, want 0 (900/s)", d)
	}
	if d := c.RecordFetch(at(0), 1000); d != 0 {
		t.Fatalf("10000 over 10 s is at the quota: throttled %v", d)
	}
	if d := c.FetchThrottle(at(0)); d != 0 {
		t.Fatalf("at the quota: %v", d)
	}
	c.RecordFetch(at(0), 1) // over by one byte, taken back
	if got := c.MaxFetchBytes(); got != 10000 {
		t.Fatalf("MaxFetchBytes %d, want 1000/s over 10 windows", got)
	}
	if got := m.Client("x", "other").MaxFetchBytes(); got != 0 {
		t.Fatalf("MaxFetchBytes without a quota: %d, want 0", got)
	}
}

// TestRequestTimeBounded: request_percentage 10 is 0.1 s of the proxy's
// time per second; 2 s spent at once is 200 percent-seconds over 10 s,
// 20%, throttled (20-10)/10*10000 ms, bounded to one sample, 1 s.
func TestRequestTimeBounded(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  client-id: <default>\n  request_percentage: 10\n"), Options{})
	c := m.Client("u", "c")
	if d := c.RecordRequestTime(at(0), 900*time.Millisecond); d != 0 {
		t.Fatalf("9%%: throttled %v", d)
	}
	if d := c.RecordRequestTime(at(0), 1100*time.Millisecond); d != time.Second {
		t.Fatalf("20%%: throttle %v, want 1s (bounded)", d)
	}
}

func TestNoQuota(t *testing.T) {
	var m *Manager
	c := m.Client("u", "c")
	if c != nil || c.RecordProduce(at(0), 1<<30) != 0 || c.RecordFetch(at(0), 1) != 0 ||
		c.FetchThrottle(at(0)) != 0 || c.MaxFetchBytes() != 0 || c.RecordRequestTime(at(0), time.Hour) != 0 {
		t.Fatal("a nil Manager throttles")
	}
	if m.Expire(at(0)) != 0 || m.Rates() != 0 || m.Stats() != nil {
		t.Fatal("a nil Manager holds rates")
	}
	m = NewManager(nil, Options{})
	c = m.Client("u", "c")
	if c.RecordProduce(at(0), 1<<30) != 0 || c.RecordFetch(at(0), 1<<30) != 0 || m.Rates() != 0 {
		t.Fatal("an empty Manager throttles or keeps rates")
	}
	// Only connection entries: no client quota.
	m = NewManager(mustParse(t, "- ip: <default>\n  connection_creation_rate: 1\n- user: a\n  max_connections: 1\n"), Options{})
	if m.Client("a", "c").RecordProduce(at(0), 1<<30) != 0 || m.Rates() != 0 {
		t.Fatal("connection entries throttle clients")
	}
}

// TestReload: a new bound applies from the next record on, to the samples
// already measured, as Kafka updates a sensor's quota in place.
func TestReload(t *testing.T) {
	m := NewManager(mustParse(t, "- user: alice\n  producer_byte_rate: 1000\n"), Options{})
	c := m.Client("alice", "x")
	if d := c.RecordProduce(at(0), 5000); d != 0 {
		t.Fatalf("500/s against 1000/s: throttled %v", d)
	}
	m.Update(mustParse(t, "- user: alice\n  producer_byte_rate: 250\n"))
	// 5000 over 10 s = 500/s against 250: (5000000-250*10000)/250 ms.
	if d := c.RecordProduce(at(0), 0); d != 10*time.Second {
		t.Fatalf("after the reload: %v, want 10s", d)
	}
	m.Update(mustParse(t, "- user: bob\n  producer_byte_rate: 1\n"))
	if d := c.RecordProduce(at(0), 1<<20); d != 0 {
		t.Fatalf("alice's quota removed: still throttled %v", d)
	}
	for _, s := range m.Stats() {
		if s.Entity.User == "alice" {
			t.Fatal("stats kept for an entity no longer configured")
		}
	}
}

// TestExpire: rates idle for an hour are dropped, as Kafka expires its
// quota sensors, and a client holding one measures afresh.
func TestExpire(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 100\n"), Options{})
	c := m.Client("alice", "x")
	c.RecordProduce(at(0), 900)
	m.Client("bob", "x").RecordProduce(at(30*60*1000), 1)
	if n := m.Expire(at(3600*1000 - 1)); n != 0 {
		t.Fatalf("expired %d before an hour", n)
	}
	if n := m.Expire(at(3600 * 1000)); n != 1 || m.Rates() != 1 {
		t.Fatalf("expired %d at an hour, %d left; want alice's only", n, m.Rates())
	}
	if d := c.RecordProduce(at(3600*1000), 900); d != 0 {
		t.Fatalf("a fresh rate throttled %v", d)
	}
	if m.Rates() != 2 {
		t.Fatalf("%d rates, want alice's back", m.Rates())
	}
}

// TestMaxRates: past the bound on rates, new keys share one rate per
// configured entity, which throttles them together, never less.
func TestMaxRates(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 100\n"), Options{MaxRates: 2})
	for i := range 10 {
		if d := m.Client(fmt.Sprint("u", i), "x").RecordProduce(at(0), 500); d != 0 && i < 3 {
			t.Fatalf("u%d throttled %v", i, d)
		}
	}
	if n := m.Rates(); n != 3 {
		t.Fatalf("%d rates, want 2 and the shared one", n)
	}
	// u2..u9 share: 8 x 500 over 10 s is 400/s against 100.
	if d := m.Client("u9", "x").RecordProduce(at(0), 0); d == 0 {
		t.Fatal("the shared rate does not throttle")
	}
}

// TestConcurrent records from many goroutines (run with -race): the sum
// is exact.
func TestConcurrent(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 1000000000\n"), Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := m.Client(fmt.Sprint("u", g%2), "x")
			for i := range 1000 {
				c.RecordProduce(at(int64(i)), 10)
				if i%100 == 0 {
					m.Expire(at(int64(i)))
					m.Update(mustParse(t, "- user: <default>\n  producer_byte_rate: 1000000000\n"))
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, s := range m.Stats() {
		total += s.Amount.Load()
	}
	if total != 8*1000*10 {
		t.Fatalf("recorded %d bytes, want %d", total, 8*1000*10)
	}
}

// BenchmarkRecordProduce measures the hot path: with no Manager, with an
// empty configuration, and with a quota on one client (uncontended).
func BenchmarkRecordProduce(b *testing.B) {
	now := at(0)
	b.Run("nil", func(b *testing.B) {
		var m *Manager
		c := m.Client("u", "c")
		b.ReportAllocs()
		for b.Loop() {
			c.RecordProduce(now, 100)
		}
	})
	b.Run("empty", func(b *testing.B) {
		c := NewManager(&Config{}, Options{}).Client("u", "c")
		b.ReportAllocs()
		for b.Loop() {
			c.RecordProduce(now, 100)
		}
	})
	b.Run("quota", func(b *testing.B) {
		c := NewManager(mustParse(b, "- user: <default>\n  producer_byte_rate: 1000000000000\n"), Options{}).Client("u", "c")
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			i++
			c.RecordProduce(at(i/1000), 100)
		}
	})
}

// TestMaxRatesDropsIdle: at the bound, rates with no record for a whole
// window (11 s) measure 0 and are dropped before anyone shares.
func TestMaxRatesDropsIdle(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 100\n"), Options{MaxRates: 2})
	m.Client("u0", "x").RecordProduce(at(0), 500)
	m.Client("u1", "x").RecordProduce(at(5000), 500)
	m.Client("u2", "x").RecordProduce(at(11000), 500)
	if n := m.Rates(); n != 2 {
		t.Fatalf("%d rates, want u1's and u2's", n)
	}
	// u3 comes within u1's window: it shares, and so does u4 with it.
	m.Client("u3", "x").RecordProduce(at(12000), 600)
	if d := m.Client("u4", "x").RecordProduce(at(12000), 600); d == 0 {
		t.Fatal("u3 and u4 past the bound do not share a rate")
	}
}

// TestKafkaQuotaViolation replays Kafka's own ClientQuotaManagerTest
// .testQuotaViolation (core/src/test/scala/unit/kafka/server): a
// clients/<default> produce quota of 500/s; 400 bytes each second for 10
// s are within it; 500 ms later 2300 bytes make 6300 over 10.5 s, 600/s,
// throttled (600-500)/500*10500 = 2100 ms; after the throttle, 10 more
// seconds of 400 each roll the burst out and a record of 0 is not
// throttled.
func TestKafkaQuotaViolation(t *testing.T) {
	m := NewManager(mustParse(t, "- client-id: <default>\n  producer_byte_rate: 500\n"), Options{})
	c := m.Client("ANONYMOUS", "unknown")
	now := int64(0)
	for range 10 {
		if d := c.RecordProduce(at(now), 400); d != 0 {
			t.Fatalf("t=%d: throttled %v under the quota", now, d)
		}
		now += 1000
	}
	now += 500
	d := c.RecordProduce(at(now), 2300)
	if d != 2100*time.Millisecond {
		t.Fatalf("the spike: throttle %v, want 2100ms as in Kafka's test", d)
	}
	now += d.Milliseconds()
	for range 10 {
		c.RecordProduce(at(now), 400)
		now += 1000
	}
	if d := c.RecordProduce(at(now), 0); d != 0 {
		t.Fatalf("after the burst rolled out: throttled %v", d)
	}
}

// TestKafkaRequestQuotaViolation replays Kafka's
// ClientRequestQuotaManagerTest.testRequestPercentageQuotaViolation: 1% of
// a thread (10 ms a second) for users/ANONYMOUS/clients/test-client; 4 ms
// each second for 10 s is within it; 500 ms later 67.1 ms makes 107.1 ms
// over 10.5 s, throttled (10.2-10)/10*10500 = 210 ms; 11 s more of 4 ms
// each roll it out; then a spike of 500 ms wants more than a window and is
// bounded to 1000 ms, and stays so for 10 s, until its sample rolls out.
func TestKafkaRequestQuotaViolation(t *testing.T) {
	m := NewManager(mustParse(t, "- user: ANONYMOUS\n  client-id: test-client\n  request_percentage: 1\n"), Options{})
	c := m.Client("ANONYMOUS", "test-client")
	ms4 := 4 * time.Millisecond
	now := int64(0)
	for range 10 {
		if d := c.RecordRequestTime(at(now), ms4); d != 0 {
			t.Fatalf("t=%d: throttled %v under the quota", now, d)
		}
		now += 1000
	}
	now += 500
	d := c.RecordRequestTime(at(now), 67100*time.Microsecond)
	if d != 210*time.Millisecond {
		t.Fatalf("the spike: throttle %v, want 210ms as in Kafka's test", d)
	}
	now += d.Milliseconds()
	for range 11 {
		c.RecordRequestTime(at(now), ms4)
		now += 1000
	}
	if d := c.RecordRequestTime(at(now), 0); d != 0 {
		t.Fatalf("after the burst rolled out: throttled %v", d)
	}
	if d := c.RecordRequestTime(at(now), 500*time.Millisecond); d != time.Second {
		t.Fatalf("the large spike: %v, want 1s (bounded)", d)
	}
	for range 10 {
		now += 1000
		if d := c.RecordRequestTime(at(now), 0); d != time.Second {
			t.Fatalf("t=%d: %v, want 1s until the spike rolls out", now, d)
		}
	}
	now += 1000
	if d := c.RecordRequestTime(at(now), 0); d != 0 {
		t.Fatalf("after the spike rolled out: %v", d)
	}
}

// TestFetchAnswered: a fetch answered empty for its throttle counts the
// throttle in its entity's Stats, and no bytes.
func TestFetchAnswered(t *testing.T) {
	q, err := Parse([]byte("- client-id: app\n  consumer_byte_rate: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(q, Options{})
	now := time.Unix(1000, 0)
	m.Client("ANONYMOUS", "app").FetchAnswered(now, time.Second)
	m.Client("ANONYMOUS", "other").FetchAnswered(now, time.Second)
	var nilClient *Client
	nilClient.FetchAnswered(now, time.Second)
	stats := m.Stats()
	if len(stats) != 1 {
		t.Fatalf("%d stats; want the one configured entity", len(stats))
	}
	s := stats[0]
	if s.Kind != Fetch || s.Throttle.Load() != int64(time.Second) || s.Throttled.Load() != 1 || s.Amount.Load() != 0 {
		t.Fatalf("stats %v %v: throttle %d, throttled %d, amount %d", s.Kind, s.Entity, s.Throttle.Load(), s.Throttled.Load(), s.Amount.Load())
	}
}

// TestRecordLooksNothingUp counts the work of a client's records between
// reloads: after its first record resolves its quotas, Produce and Fetch
// records, the fetch throttle check and MaxFetchBytes make no map lookup
// and no allocation; a reload resolves them again, once, under the new
// bounds.
func TestRecordLooksNothingUp(t *testing.T) {
	const doc = "- user: <default>\n  producer_byte_rate: 1000000000\n  consumer_byte_rate: 1000000000\n" +
		"- user: <default>\n  client-id: kgo\n  producer_byte_rate: 1000000000\n  consumer_byte_rate: 1000000000\n" +
		"- client-id: <default>\n  producer_byte_rate: 1000000000\n  consumer_byte_rate: 1000000000\n"
	m := NewManager(mustParse(t, doc), Options{})
	c := m.Client("ANONYMOUS", "kgo")
	lookups := 0
	m.state.Load().r.lookups = &lookups
	now := int64(0)
	work := func() {
		now++
		c.RecordProduce(at(now), 1000)
		c.FetchThrottle(at(now))
		c.RecordFetch(at(now), 1000)
		if got := c.MaxFetchBytes(); got != math.MaxInt32 {
			t.Fatalf("MaxFetchBytes %d, want %d", got, math.MaxInt32)
		}
	}
	work()
	if lookups == 0 {
		t.Fatal("the first record looked nothing up: the counter is not on the resolver in use")
	}
	lookups = 0
	if n := testing.AllocsPerRun(1000, work); n != 0 {
		t.Errorf("%.2f allocations per round of records, want none", n)
	}
	if lookups != 0 {
		t.Errorf("%d map lookups over 1001 rounds of records, want none", lookups)
	}

	// A reload to a fetch quota of 1000/s: the next record resolves
	// again, and MaxFetchBytes is 1000 over 10 samples of 1s.
	m.Update(mustParse(t, "- user: <default>\n  client-id: kgo\n  consumer_byte_rate: 1000\n"))
	lookups = 0
	m.state.Load().r.lookups = &lookups
	if got := c.MaxFetchBytes(); got != 10000 {
		t.Fatalf("MaxFetchBytes after the reload %d, want 10000", got)
	}
	resolved := lookups
	if resolved == 0 {
		t.Fatal("the reload was not resolved")
	}
	for range 100 {
		now++
		c.RecordFetch(at(now), 1)
		c.MaxFetchBytes()
	}
	if lookups != resolved {
		t.Errorf("%d map lookups after the reload's resolution, want none", lookups-resolved)
	}
}

// BenchmarkFetchRecords measures what the proxy runs per Fetch under a
// quota not exceeded: the throttle check and MaxFetchBytes as the request
// is read, the record as its response arrives.
func BenchmarkFetchRecords(b *testing.B) {
	c := NewManager(mustParse(b, "- user: <default>\n  client-id: kgo\n  consumer_byte_rate: 1000000000000\n"), Options{}).Client("ANONYMOUS", "kgo")
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		now := at(i / 1000)
		c.FetchThrottle(now)
		c.MaxFetchBytes()
		c.RecordFetch(now, 100)
	}
}

// TestAddRequestTime: time added without a check counts at the next
// check. request_percentage 10 over Kafka's window (10 s until 11 samples
// have passed): 1.05 s added is 105 percent-seconds, 10.5%, throttled
// (10.5-10)/10*10000 = 500 ms, which only the next check hands out.
func TestAddRequestTime(t *testing.T) {
	m := NewManager(mustParse(t, "- client-id: app\n  request_percentage: 10\n"), Options{})
	if !m.RequestOn() {
		t.Fatal("request_percentage configured: RequestOn false")
	}
	c := m.Client("u", "app")
	c.AddRequestTime(at(0), 1050*time.Millisecond)
	var st *Stats
	for _, s := range m.Stats() {
		if s.Kind == Request {
			st = s
		}
	}
	if st == nil || st.Throttled.Load() != 0 || st.Amount.Load() != int64(1050*time.Millisecond) {
		t.Fatalf("after the add: stats %+v, want 1.05e9 ns and no throttle", st)
	}
	if d := c.RecordRequestTime(at(0), 0); d != 500*time.Millisecond {
		t.Fatalf("the check after the add: %v, want 500ms", d)
	}
	if st.Throttled.Load() != 1 || st.Throttle.Load() != int64(500*time.Millisecond) {
		t.Fatalf("stats after the check: %d throttles of %v in all", st.Throttled.Load(), time.Duration(st.Throttle.Load()))
	}
	// Another client id resolves to no request quota: nothing recorded.
	if d := m.Client("u", "other").RecordRequestTime(at(0), time.Hour); d != 0 {
		t.Fatalf("a client without request_percentage throttled %v", d)
	}
}

// TestRequestOnlyWithRequestPercentage: byte rates alone leave the
// request timing off, and a reload that adds or removes
// request_percentage turns it on or off.
func TestRequestOnlyWithRequestPercentage(t *testing.T) {
	m := NewManager(mustParse(t, "- user: <default>\n  producer_byte_rate: 100\n  consumer_byte_rate: 100\n"), Options{})
	if !m.On() || m.RequestOn() {
		t.Fatalf("byte rates only: On %v RequestOn %v, want true false", m.On(), m.RequestOn())
	}
	m.Update(mustParse(t, "- user: alice\n  request_percentage: 0.5\n"))
	if !m.RequestOn() {
		t.Fatal("after a reload adding request_percentage: RequestOn false")
	}
	c := m.Client("alice", "x")
	if d := c.RecordRequestTime(at(0), 100*time.Millisecond); d != time.Second {
		t.Fatalf("10 percent-seconds over 10 s against 0.5%%: %v, want 1s (bounded)", d)
	}
	m.Update(mustParse(t, "- user: alice\n  producer_byte_rate: 100\n"))
	if m.RequestOn() {
		t.Fatal("after a reload removing request_percentage: RequestOn true")
	}
	if d := c.RecordRequestTime(at(0), time.Hour); d != 0 {
		t.Fatalf("quota removed: throttled %v", d)
	}
	var nilM *Manager
	if nilM.RequestOn() {
		t.Fatal("nil Manager: RequestOn true")
	}
}

// TestRecordThrottledFetch: a fetch throttled by another quota has its
// bytes checked, for the larger throttle, and always taken back. 1000
// bytes a second over 10 s: 5000 bytes are within it yet taken back, so
// 9000 more stay within it; 20000 more make 2900 a second, over it by
// (2900-1000)/1000*10000 ms.
func TestRecordThrottledFetch(t *testing.T) {
	m := NewManager(mustParse(t, "- client-id: app\n  consumer_byte_rate: 1000\n"), Options{})
	c := m.Client("u", "app")
	if d := c.RecordThrottledFetch(at(0), 5000); d != 0 {
		t.Fatalf("5000 bytes: %v, want 0", d)
	}
	if d := c.RecordFetch(at(0), 9000); d != 0 {
		t.Fatalf("9000 bytes after 5000 taken back: %v, want 0", d)
	}
	if d := c.RecordThrottledFetch(at(0), 20000); d != 19*time.Second {
		t.Fatalf("20000 bytes more: %v, want 19s", d)
	}
	if d := c.FetchThrottle(at(0)); d != 0 {
		t.Fatalf("after both taken back: %v, want 0", d)
	}
	for _, s := range m.Stats() {
		if s.Kind == Fetch && s.Amount.Load() != 9000 {
			t.Fatalf("fetch bytes counted %d, want 9000", s.Amount.Load())
		}
	}
}

// TestRequestExempt: the exempt keys are the ones named (a typo in a
// number would exempt the wrong API), and the client APIs are not.
func TestRequestExempt(t *testing.T) {
	exempt := map[int16]string{
		4: "LeaderAndISR", 5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown",
		27: "WriteTxnMarkers", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
		55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope",
		62: "BrokerRegistration", 63: "BrokerHeartbeat", 67: "AllocateProducerIDs",
		17: "SASLHandshake", 36: "SASLAuthenticate", 18: "ApiVersions",
	}
	for key := int16(0); key < 100; key++ {
		name, want := exempt[key]
		if got := RequestExempt(key); got != want {
			t.Errorf("%s (%d): exempt %v, want %v", kmsg.NameForKey(key), key, got, want)
		}
		if want && kmsg.NameForKey(key) != name {
			t.Errorf("key %d is %s, not %s", key, kmsg.NameForKey(key), name)
		}
	}
}

// BenchmarkRequestTime measures what the proxy adds per request for
// request_percentage: "off" is all of it when no entry sets one (the flag
// the client reader checks); "timed" a client under its quota, whose
// request is checked once and has its forwarding and its answer added,
// with the clock reads that go with them, as the proxy makes them (two
// of the wall clock and the monotonic one, three of the latter alone).
func BenchmarkRequestTime(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		m := NewManager(mustParse(b, "- user: <default>\n  producer_byte_rate: 1000000000000\n"), Options{})
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if m.RequestOn() {
				n++
			}
		}
		if n != 0 {
			b.Fatal("timed without request_percentage")
		}
	})
	b.Run("timed", func(b *testing.B) {
		m := NewManager(mustParse(b, "- user: <default>\n  request_percentage: 1000000\n"), Options{})
		c := m.Client("u", "c")
		b.ReportAllocs()
		for b.Loop() {
			if !m.RequestOn() {
				b.Fatal("not timed")
			}
			start := time.Now()
			if !c.RequestTimed(start) {
				b.Fatal("no request quota")
			}
			took := time.Since(start)
			if c.RecordRequestTime(start.Add(took), took) != 0 {
				b.Fatal("throttled")
			}
			fwd := time.Since(start)
			c.AddRequestTime(start.Add(fwd), fwd-took)
			ans := time.Now()
			done := time.Since(ans)
			c.AddRequestTime(ans.Add(done), done)
		}
	})
}
