package quota

import (
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"
)

// benchQuotas reads the quotas bench/run.sh's security section uses:
// every level the bench client (User:ANONYMOUS, client id kgo) resolves
// through, far above what it moves.
func benchQuotas(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("../bench/quotas.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// BenchmarkBenchRecordProduce is the quota work on one Produce of the
// bench's 1-partition workload with the bench's quotas, never exceeded:
// the clock read and the record on the client's rate.
func BenchmarkBenchRecordProduce(b *testing.B) {
	m := NewManager(mustParse(b, benchQuotas(b)), Options{})
	c := m.Client("ANONYMOUS", "kgo")
	b.ReportAllocs()
	for b.Loop() {
		if d := c.RecordProduce(time.Now(), 300); d != 0 {
			b.Fatal(d)
		}
	}
}

// BenchmarkClock is a clock read alone, for scale.
func BenchmarkClock(b *testing.B) {
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}

// BenchmarkBenchRecordProduceNoClock is BenchmarkBenchRecordProduce
// without the clock read: a time advancing 50µs a request, as 20,000
// requests a second would.
func BenchmarkBenchRecordProduceNoClock(b *testing.B) {
	m := NewManager(mustParse(b, benchQuotas(b)), Options{})
	c := m.Client("ANONYMOUS", "kgo")
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(50 * time.Microsecond)
		if d := c.RecordProduce(now, 300); d != 0 {
			b.Fatal(d)
		}
	}
}

// TestUnderAgreesWithPass drives two Rates with the same records, checks
// and clock (forward in steps of every size, now and then back): one
// checks as the Manager does, skipping the pass over the samples when
// under says it may, the other always makes the pass. Their throttles
// and their samples must be the same at every step: the skip changes
// neither an answer nor what a later pass finds.
func TestUnderAgreesWithPass(t *testing.T) {
	for _, frac := range []bool{false, true} {
		for seed := range int64(40) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			fast, slow := NewRate(Window{}), NewRate(Window{})
			now := int64(1_700_000_000_000)
			bound := []float64{0, 50, 300, 1e4, 1e10}[seed%5]
			skipped, recorded := 0, false
			for step := range 3000 {
				switch n := rng.IntN(100); {
				case n < 2:
					now -= rng.Int64N(20_000)
				case n < 10:
					now += rng.Int64N(15_000)
				default:
					now += rng.Int64N(300)
				}
				value := float64(rng.IntN(2000))
				if frac {
					value += rng.Float64()
				}
				var df, ds time.Duration
				switch rng.IntN(4) {
				case 0:
					passes := fast.passes
					df = fast.over(now, bound, 0)
					ds = slow.overPass(now, bound, 0)
					if fast.passes == passes && recorded {
						skipped++
					}
				case 1:
					// A check taken back, as a throttled fetch is.
					recorded = true
					df = fast.check(now, value, bound, 0)
					fast.record(now, -value)
					slow.record(now, value)
					ds = slow.overPass(now, bound, 0)
					slow.record(now, -value)
				default:
					recorded = true
					passes := fast.passes
					df = fast.check(now, value, bound, time.Second)
					slow.record(now, value)
					ds = slow.overPass(now, bound, time.Second)
					if fast.passes == passes {
						skipped++
					}
				}
				if df != ds {
					t.Fatalf("frac %v seed %d step %d: throttle %v, with the pass %v", frac, seed, step, df, ds)
				}
				if fast.current != slow.current || !reflect.DeepEqual(fast.samples, slow.samples) {
					t.Fatalf("frac %v seed %d step %d: samples differ:\n%+v\n%+v", frac, seed, step, fast.samples, slow.samples)
				}
			}
			if frac && skipped > 0 {
				t.Fatalf("seed %d: %d passes skipped after values that are not whole", seed, skipped)
			}
			if !frac && bound == 1e10 && skipped < 1000 {
				t.Fatalf("seed %d: %d passes skipped far under the quota", seed, skipped)
			}
		}
	}
}

// TestRecordUnderQuotaMakesNoPass counts the passes over a rate's
// samples while the bench client produces far under the bench's quotas,
// 20,000 requests a second: at most one a sample (a second), when the
// oldest sample's last event is a window old, instead of one a request.
func TestRecordUnderQuotaMakesNoPass(t *testing.T) {
	m := NewManager(mustParse(t, benchQuotas(t)), Options{})
	c := m.Client("ANONYMOUS", "kgo")
	now := time.Unix(1_700_000_000, 0)
	const requests = 20_000 * 30
	for range requests {
		now = now.Add(50 * time.Microsecond)
		if d := c.RecordProduce(now, 300); d != 0 {
			t.Fatalf("throttled %v", d)
		}
	}
	rt := c.rate(Produce, ms(now))
	rt.mu.Lock()
	passes := rt.r.passes
	rt.mu.Unlock()
	t.Logf("%d passes over the samples for %d records", passes, requests)
	if passes > 31 {
		t.Errorf("%d passes over the samples for %d records in 30 s, want at most one a second", passes, requests)
	}
	if got, want := m.Stats(), int64(requests*300); statAmount(got, Produce, "users/<default>/clients/kgo") != want {
		t.Errorf("bytes counted %d, want %d", statAmount(got, Produce, "users/<default>/clients/kgo"), want)
	}
}

// statAmount is the Amount of the stats of kind k and entity e.
func statAmount(stats []*Stats, k Kind, e string) int64 {
	for _, s := range stats {
		if s.Kind == k && s.Entity.String() == e {
			return s.Amount.Load()
		}
	}
	return -1
}
