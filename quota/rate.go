package quota

import (
	"math"
	"time"
)

// Kafka's quota windows (quota.window.num, quota.window.size.seconds): a
// rate is measured over 11 samples of one second each.
const (
	DefaultSamples = 11
	DefaultWindow  = time.Second
)

// Window is the shape of a Rate's sliding window: Samples samples of
// Size each. The zero Window is Kafka's default, 11 samples of 1s.
type Window struct {
	// Samples is the number of samples kept. Zero means DefaultSamples.
	Samples int
	// Size is the span of one sample, in whole milliseconds as Kafka
	// counts it. Zero means DefaultWindow.
	Size time.Duration
}

func (w Window) samples() int {
	if w.Samples <= 0 {
		return DefaultSamples
	}
	return w.Samples
}

func (w Window) sizeMs() int64 {
	if ms := w.Size.Milliseconds(); ms > 0 {
		return ms
	}
	return DefaultWindow.Milliseconds()
}

// spanMs is the whole window: a rate with no record for that long
// measures 0.
func (w Window) spanMs() int64 { return int64(w.samples()) * w.sizeMs() }

// sample is one slot of a Rate: the sum of what was recorded from start,
// and the time of the last record, which decides when it is obsolete.
type sample struct {
	value     float64
	events    int64
	start     int64 // ms
	lastEvent int64 // ms
}

func (s *sample) reset(now int64) {
	*s = sample{start: now, lastEvent: now}
}

// Rate is a sum per second over a sliding window, computed as Kafka's
// Rate over a WindowedSum (org.apache.kafka.common.metrics.stats.Rate and
// SampledStat) so that the proxy throttles a client exactly when and as
// long as a broker would: the same samples, the same purge of samples
// with no event in the whole window, the same window size that assumes
// at least Samples-1 full samples have passed. Times are counted in
// milliseconds, as Kafka counts them. A Rate is not safe for concurrent
// use; the zero Rate is ready with Kafka's default window.
type Rate struct {
	w Window
	// samples holds up to Samples+1 slots: Kafka keeps one more than the
	// window so that a sample that began before the window and overlaps
	// it still counts.
	samples []sample
	current int
	// total, since and latest let over answer without a pass over the
	// samples when the pass could not change its answer (under): total
	// is the samples' sum, kept as records come and set by every pass;
	// since is at most the earliest last event, so that no sample is
	// purged before since plus the window; latest is at least every
	// sample's start. frac: some value was not a whole number, whose sum
	// depends on the order of its terms, so every check makes the pass.
	total  float64
	since  int64
	latest int64
	frac   bool
	// passes counts the passes over the samples, for tests that hold a
	// check within its quota to none.
	passes int
}

// NewRate returns a Rate over the window w.
func NewRate(w Window) *Rate { return &Rate{w: w} }

func ms(t time.Time) int64 { return t.UnixMilli() }

func (r *Rate) cur(now int64) *sample {
	r.latest = max(r.latest, now)
	if len(r.samples) == 0 {
		r.samples = append(make([]sample, 0, r.w.samples()+1), sample{start: now, lastEvent: now})
		r.total, r.since = 0, now
	}
	return &r.samples[r.current]
}

// Record adds value at now. A negative value takes back what an earlier
// record added, as Kafka unrecords a fetch it answered empty.
func (r *Rate) Record(now time.Time, value float64) { r.record(ms(now), value) }

func (r *Rate) record(now int64, value float64) {
	s := r.cur(now)
	if now-s.start >= r.w.sizeMs() {
		r.current = (r.current + 1) % (r.w.samples() + 1)
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now, lastEvent: now})
		} else {
			r.total -= r.samples[r.current].value
			r.samples[r.current].reset(now)
		}
		s = &r.samples[r.current]
	}
	if value != math.Trunc(value) {
		r.frac = true
	}
	r.since = min(r.since, now)
	r.total += value
	s.value += value
	s.events++
	s.lastEvent = now
}

// purge resets every sample with no event for a whole window: it no
// longer overlaps the window.
func (r *Rate) purge(now int64) {
	r.latest = max(r.latest, now)
	expire := r.w.spanMs()
	for i := range r.samples {
		if now-r.samples[i].lastEvent >= expire {
			r.total -= r.samples[i].value
			r.samples[i].reset(now)
			r.since = min(r.since, now)
		}
	}
}

func (r *Rate) oldest(now int64) *sample {
	r.cur(now)
	o := &r.samples[0]
	for i := 1; i < len(r.samples); i++ {
		if r.samples[i].start < o.start {
			o = &r.samples[i]
		}
	}
	return o
}

// windowMs is the span the sum is divided by, in milliseconds: from the
// oldest live sample's start to now, but never less than Samples-1 full
// samples (a rate measured one second after the first record would
// otherwise be ten times too high) and never 0.
func (r *Rate) windowMs(now int64) int64 {
	r.purge(now)
	return r.span(now, r.oldest(now).start)
}

// span is windowMs for the oldest live sample starting at oldest.
func (r *Rate) span(now, oldest int64) int64 {
	size := r.w.sizeMs()
	elapsed := now - oldest
	full := elapsed / size
	if min := int64(r.w.samples() - 1); full < min {
		elapsed += (min - full) * size
	}
	return max(elapsed, 1)
}

// WindowSize returns the span Measure divides by at now.
func (r *Rate) WindowSize(now time.Time) time.Duration {
	return time.Duration(r.windowMs(ms(now))) * time.Millisecond
}

// Measure returns the rate per second at now.
func (r *Rate) Measure(now time.Time) float64 { return r.measure(ms(now)) }

// measure is the rate per second at now and the span it is measured
// over: purge, sum and oldest start in one pass over the samples, as a
// record near its quota runs it (one far under it skips it, see under).
func (r *Rate) measure(now int64) float64 {
	observed, _ := r.measureSpan(now)
	return observed
}

func (r *Rate) measureSpan(now int64) (float64, int64) {
	r.cur(now)
	r.passes++
	expire := r.w.spanMs()
	var sum float64
	oldest, since := int64(math.MaxInt64), int64(math.MaxInt64)
	for i := range r.samples {
		s := &r.samples[i]
		if now-s.lastEvent >= expire {
			s.reset(now)
		}
		sum += s.value
		oldest = min(oldest, s.start)
		since = min(since, s.lastEvent)
	}
	r.total, r.since = sum, since
	span := r.span(now, oldest)
	return sum / (float64(span) / 1000), span
}

// under reports, without a pass over the samples, that the rate at now
// is within bound for certain, so that over's pass would purge nothing
// and answer 0: no sample's last event is a window old (since), and the
// sum of whole numbers, exact in any order, is within bound over the
// shortest span measureSpan divides by, Samples-1 samples, as no sample
// starts after now (a longer span gives a smaller rate; a negative sum,
// one below any positive bound).
// A client far from its quota, the common case, then costs a record and
// a division.
func (r *Rate) under(now int64, bound float64) bool {
	if r.frac || len(r.samples) == 0 || now < r.latest || now-r.since >= r.w.spanMs() || r.total >= 1<<52 {
		return false
	}
	short := max(int64(r.w.samples()-1)*r.w.sizeMs(), 1)
	return r.total/(float64(short)/1000) <= bound
}

// ThrottleTime is how long a client whose rate was measured at observed,
// over bound, must send nothing for its rate over a window of window to
// fall back to bound: observed*window/(window+t) = bound, so t =
// (observed-bound)/bound*window (Kafka's QuotaUtils.throttleTime),
// rounded to the millisecond as Java's Math.round does. It is 0 when
// observed is within bound.
func ThrottleTime(observed, bound float64, window time.Duration) time.Duration {
	if observed <= bound || bound <= 0 {
		return 0
	}
	t := math.Floor((observed-bound)/bound*float64(window.Milliseconds()) + 0.5)
	if t >= float64(math.MaxInt32) {
		// Kafka hands the throttle to the client as an int32 of ms.
		t = math.MaxInt32
	}
	return time.Duration(t) * time.Millisecond
}

// check records value at now and, when the rate then exceeds bound,
// returns the throttle time, at most limit when limit is positive
// (Kafka's boundedThrottleTime, used for the request and connection rate
// quotas); this is Kafka's Sensor.record with its quota check.
func (r *Rate) check(now int64, value, bound float64, limit time.Duration) time.Duration {
	r.record(now, value)
	return r.over(now, bound, limit)
}

// over returns the throttle time at now against bound, recording nothing.
func (r *Rate) over(now int64, bound float64, limit time.Duration) time.Duration {
	if r.under(now, bound) {
		return 0
	}
	return r.overPass(now, bound, limit)
}

// overPass is over by a pass over the samples.
func (r *Rate) overPass(now int64, bound float64, limit time.Duration) time.Duration {
	observed, span := r.measureSpan(now)
	if observed <= bound {
		return 0
	}
	t := ThrottleTime(observed, bound, time.Duration(span)*time.Millisecond)
	if limit > 0 && t > limit {
		t = limit
	}
	return t
}
