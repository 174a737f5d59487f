package bench

import (
	"strings"
	"testing"
	"time"
)

// TestProgressPhases drives a round's clock by hand and reads the progress
// line at instants of each phase: the phase and its time are the ones true
// then, and the rates are what was counted over the time measured so far.
func TestProgressPhases(t *testing.T) {
	o := Default()
	o.Consume = true
	o.Warmup, o.Duration = 10*time.Second, 10*time.Second
	o.fill()
	o.Rounds = 5
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	rc := newRoundClock(phaseWarmup, t0)

	steps := []struct {
		name  string
		enter phase // entered at the instant, unless -1
		now   time.Duration
		flow  bool
		f     figures
		want  []string
		never []string
	}{
		{name: "warming up, nothing moved", enter: -1, now: 3 * time.Second,
			want:  []string{"direct round 2/5  warming up 3.0s/10.0s, no record moved yet"},
			never: []string{"rec/s", "measur"}},
		{name: "warming up, flowing", enter: -1, now: 9 * time.Second, flow: true,
			want:  []string{"warming up 9.0s/10.0s"},
			never: []string{"no record", "rec/s"}},
		{name: "waiting for the first record", enter: phaseWaitFlow, now: 10 * time.Second},
		{name: "still waiting", enter: -1, now: 12500 * time.Millisecond,
			want: []string{"warm-up over, waiting for the first record 2.5s/30.0s"}, never: []string{"rec/s"}},
		{name: "measuring starts", enter: phaseMeasure, now: 13 * time.Second, flow: true},
		{name: "mid-round", enter: -1, now: 17 * time.Second, flow: true,
			f:     figures{produced: 4000, producedBytes: 4_000_000, consumed: 2000, consumedBytes: 2_000_000, p99: 3 * time.Millisecond},
			want:  []string{"measuring 4.0s/10.0s", "produce      1000 rec/s     1.00 MB/s p99 3.000ms", "consume       500 rec/s     0.50 MB/s"},
			never: []string{"warming", "errors"}},
		{name: "measurement ends", enter: phaseDone, now: 23 * time.Second},
		{name: "after the round, closing", enter: -1, now: 25 * time.Second, flow: true,
			f:     figures{produced: 10000, producedBytes: 10_000_000, errors: 2},
			want:  []string{"measured 10.0s, done", "produce      1000 rec/s     1.00 MB/s", "2 errors"},
			never: []string{"warming", "measuring"}},
	}
	for _, s := range steps {
		if s.enter >= 0 {
			rc.enter(s.enter, at(s.now))
		}
		st := rc.state(at(s.now))
		st.Flowing = s.flow
		line := progressLine(o, "direct", 1, st, s.f)
		for _, w := range s.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: line %q lacks %q", s.name, line, w)
			}
		}
		for _, n := range s.never {
			if strings.Contains(line, n) {
				t.Errorf("%s: line %q has %q", s.name, line, n)
			}
		}
	}
}

// TestProgressCount reads the line of a round that produces a count of
// records: it measures from the start and says how far the count is.
func TestProgressCount(t *testing.T) {
	o := Default()
	o.Records = 10000
	o.fill()
	t0 := time.Now()
	rc := newRoundClock(phaseMeasure, t0)
	line := progressLine(o, "inorder", 0, rc.state(t0.Add(2*time.Second)), figures{produced: 3000})
	for _, w := range []string{"inorder round 1/1  measuring 2.0s, 3000/10000 records", "produce      1500 rec/s"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}
}
