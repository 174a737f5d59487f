package quota

import (
	"math"
	"testing"
	"time"
)

// at is a fake clock: t0 plus ms milliseconds.
func at(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }

// The expected figures below are worked by hand from Kafka's
// SampledStat, Rate and QuotaUtils (clients' metrics/stats/SampledStat.java
// and Rate.java, server-common's quota/QuotaUtils.java), default window
// 11 samples of 1000 ms:
//
//   - a record goes into the current sample unless that sample started
//     1000 ms or more ago, in which case the next of 12 slots (samples+1)
//     is reset and takes it;
//   - measuring first resets every sample whose last event is 11000 ms or
//     more old;
//   - the rate is the sum of the samples over W seconds, W = now minus
//     the oldest sample's start, raised to at least 10 whole samples
//     (samples-1) when fewer have passed, and at least 1 ms;
//   - the throttle time is (rate-bound)/bound*W, rounded as Math.round.

func TestRateFirstRecord(t *testing.T) {
	// One record of 1000 at t=0, measured at t=0: elapsed 0, no full
	// sample, raised to 10 samples: W = 10000 ms; 1000/10 s = 100/s.
	r := NewRate(Window{})
	r.Record(at(0), 1000)
	if got := r.Measure(at(0)); got != 100 {
		t.Fatalf("rate %v, want 100", got)
	}
	if got := r.WindowSize(at(0)); got != 10*time.Second {
		t.Fatalf("window %v, want 10s", got)
	}
}

func TestRateSteadyStart(t *testing.T) {
	// 100 every 100 ms from t=0 to t=2900: samples starting at 0, 1000 and
	// 2000 hold 1000 each, sum 3000. At t=2900 the oldest starts at 0:
	// elapsed 2900, 2 full samples, raised by 8: W = 10900 ms.
	// rate = 3000/10.9 = 275.229...; against a bound of 200 the throttle
	// is (3000/10.9-200)/200*10900 = (3000000-200*10900)/200 = 4100 ms.
	r := NewRate(Window{})
	for ms := int64(0); ms <= 2900; ms += 100 {
		r.Record(at(ms), 100)
	}
	if got, want := r.Measure(at(2900)), 3000/10.9; math.Abs(got-want) > 1e-9 {
		t.Fatalf("rate %v, want %v", got, want)
	}
	if got := r.WindowSize(at(2900)); got != 10900*time.Millisecond {
		t.Fatalf("window %v, want 10.9s", got)
	}
	if got := r.over(2900+1_700_000_000_000, 200, 0); got != 4100*time.Millisecond {
		t.Fatalf("throttle %v, want 4.1s", got)
	}
}

func TestRateSteadyState(t *testing.T) {
	// 1000 every 1000 ms from t=0 to t=20000 (21 records): the 12 slots
	// then hold samples starting at 9000..20000. Measuring at 20000 resets
	// the one of 9000 (its last event is 11000 ms old), leaving 11 samples
	// of 1000 starting at 10000..20000: elapsed 10000, 10 full samples, no
	// raise: W = 10000 ms and the rate 11000/10 = 1100/s. Kafka measures a
	// steady 1000/s as 1100/s at the instant a sample opens, because the
	// newest sample counts whole while its span has not passed yet.
	r := NewRate(Window{})
	for ms := int64(0); ms <= 20000; ms += 1000 {
		r.Record(at(ms), 1000)
	}
	if got := r.Measure(at(20000)); got != 1100 {
		t.Fatalf("rate %v, want 1100", got)
	}
	// Half a sample later the newest has had 500 ms: W = 10500 ms.
	if got, want := r.Measure(at(20500)), 11000/10.5; math.Abs(got-want) > 1e-9 {
		t.Fatalf("rate %v, want %v", got, want)
	}
}

func TestRateObsoleteSamples(t *testing.T) {
	// A record of 1000 at 0 counts until its last event is 11000 ms old:
	// at 10999, W = 10999 ms (10 full samples), rate 1000/10.999; at 11000
	// the sample is reset and the rate is 0.
	r := NewRate(Window{})
	r.Record(at(0), 1000)
	if got, want := r.Measure(at(10999)), 1000/10.999; math.Abs(got-want) > 1e-9 {
		t.Fatalf("rate at 10999: %v, want %v", got, want)
	}
	if got := r.Measure(at(11000)); got != 0 {
		t.Fatalf("rate at 11000: %v, want 0", got)
	}
}

func TestRateUnrecord(t *testing.T) {
	// A negative record takes a value back out of the current sample: at
	// t=10 the sum is 1000 again, over W = 10 + 10 x 1000 ms.
	r := NewRate(Window{})
	r.Record(at(0), 1000)
	r.Record(at(10), 5000)
	r.Record(at(10), -5000)
	if got, want := r.Measure(at(10)), 1000/10.01; math.Abs(got-want) > 1e-9 {
		t.Fatalf("rate %v, want %v", got, want)
	}
}

func TestRateSmallWindow(t *testing.T) {
	// Two samples of 500 ms: W is at least one sample. A record of 50 at 0
	// measured at 0: W = 500 ms, rate 100/s. At 1000 the sample is
	// obsolete (2 x 500 ms).
	r := NewRate(Window{Samples: 2, Size: 500 * time.Millisecond})
	r.Record(at(0), 50)
	if got := r.Measure(at(0)); got != 100 {
		t.Fatalf("rate %v, want 100", got)
	}
	if got := r.Measure(at(1000)); got != 0 {
		t.Fatalf("rate %v, want 0", got)
	}
}

func TestRateOneSampleWindowNeverZero(t *testing.T) {
	// One sample: samples-1 = 0 full samples are assumed, so at the
	// instant of the first record W would be 0; Kafka makes it 1 ms.
	r := NewRate(Window{Samples: 1})
	r.Record(at(0), 3)
	if got := r.Measure(at(0)); got != 3000 {
		t.Fatalf("rate %v, want 3000 (3 over 1 ms)", got)
	}
}

func TestThrottleTime(t *testing.T) {
	cases := []struct {
		observed, bound float64
		window          time.Duration
		want            time.Duration
	}{
		{150, 100, time.Second, 500 * time.Millisecond},
		{100, 100, time.Second, 0},                           // at the bound: acceptable
		{99, 100, time.Second, 0},                            // under it
		{4.5, 4, 4 * time.Millisecond, 1 * time.Millisecond}, // 0.5 ms rounds up, as Math.round
		{1100, 1000, 10 * time.Second, time.Second},
		{1e12, 1, 10 * time.Second, math.MaxInt32 * time.Millisecond}, // an int32 of ms at most
	}
	for _, c := range cases {
		if got := ThrottleTime(c.observed, c.bound, c.window); got != c.want {
			t.Errorf("ThrottleTime(%v, %v, %v) = %v, want %v", c.observed, c.bound, c.window, got, c.want)
		}
	}
}

func TestCheckBound(t *testing.T) {
	// The request and connection rate quotas bound the throttle at one
	// sample's span (ClientRequestQuotaManager, ConnectionQuotas): 30
	// records of 100 by t=2900 against 200/s want 4100 ms, bounded to 1s.
	r := NewRate(Window{})
	for ms := int64(0); ms < 2900; ms += 100 {
		r.Record(at(ms), 100)
	}
	if got := r.check(ms(at(2900)), 100, 200, time.Second); got != time.Second {
		t.Fatalf("bounded throttle %v, want 1s", got)
	}
}
