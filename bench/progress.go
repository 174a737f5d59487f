package bench

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// phase is where a target's round stands.
type phase int

const (
	// phaseWarmup runs the workload unmeasured for Options.Warmup.
	phaseWarmup phase = iota
	// phaseWaitFlow follows a warm-up in which the target moved no
	// record: the round waits, at most flowWait, for its first one.
	phaseWaitFlow
	// phaseMeasure counts what the target moves.
	phaseMeasure
	// phaseDone: the measurement is over, the client is closing.
	phaseDone
)

// roundClock records when a round entered each phase. The driving
// goroutine moves it on and the progress ticker reads it; the time of each
// step is the caller's, so that a test can drive it with a clock of its
// own.
type roundClock struct {
	mu           sync.Mutex
	phase        phase
	since        time.Time // the current phase began
	measureStart time.Time
	measured     time.Duration // set when the measurement ends
}

func newRoundClock(p phase, now time.Time) *roundClock {
	rc := &roundClock{}
	rc.enter(p, now)
	return rc
}

func (rc *roundClock) enter(p phase, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch p {
	case phaseMeasure:
		rc.measureStart = now
	case phaseDone:
		if rc.phase == phaseMeasure {
			rc.measured = now.Sub(rc.measureStart)
		}
	}
	rc.phase, rc.since = p, now
}

// roundState is what a progress line says about time at one instant.
type roundState struct {
	Phase phase
	// InPhase is the time spent in Phase so far.
	InPhase time.Duration
	// Measured is the measured time so far: the time in phaseMeasure, or
	// the whole window once done.
	Measured time.Duration
	// Flowing reports whether the target has moved a record yet.
	Flowing bool
}

func (rc *roundClock) state(now time.Time) roundState {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := roundState{Phase: rc.phase, InPhase: now.Sub(rc.since)}
	switch rc.phase {
	case phaseMeasure:
		s.Measured = now.Sub(rc.measureStart)
	case phaseDone:
		s.Measured = rc.measured
	}
	return s
}

// figures are the counters of a round read at one instant.
type figures struct {
	produced, producedBytes int64
	consumed, consumedBytes int64
	errors                  int64
	p99                     time.Duration
}

func (c *counters) figures() figures {
	return figures{
		produced:      c.produced.Load(),
		producedBytes: c.producedBytes.Load(),
		consumed:      c.consumed.Load(),
		consumedBytes: c.consumedBytes.Load(),
		errors:        c.produceErrs.Load(),
		p99:           c.lat.Quantile(0.99),
	}
}

// progressLine is the line written for a target at one instant. Rates are
// what was counted over the time measured so far, the figures the report
// will give if the round ended then; before the measurement there are
// none to give, since nothing is counted while warming up.
func progressLine(o Options, label string, round int, s roundState, f figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s round %d/%d  ", label, round+1, o.Rounds)
	switch s.Phase {
	case phaseWarmup:
		fmt.Fprintf(&b, "warming up %s/%s", secs(s.InPhase), secs(o.Warmup))
		if !s.Flowing {
			b.WriteString(", no record moved yet")
		}
		return b.String()
	case phaseWaitFlow:
		fmt.Fprintf(&b, "warm-up over, waiting for the first record %s/%s", secs(s.InPhase), secs(flowWait))
		return b.String()
	case phaseMeasure:
		if o.Records > 0 {
			fmt.Fprintf(&b, "measuring %s, %d/%d records", secs(s.Measured), f.produced, o.Records)
		} else {
			fmt.Fprintf(&b, "measuring %s/%s", secs(s.Measured), secs(o.Duration))
		}
	case phaseDone:
		fmt.Fprintf(&b, "measured %s, done", secs(s.Measured))
	}
	if o.Produce {
		fmt.Fprintf(&b, "  produce %9.0f rec/s %8.2f MB/s p99 %s",
			perSec(float64(f.produced), s.Measured), perSec(float64(f.producedBytes)/1e6, s.Measured), fmtDur(f.p99))
	}
	if o.Consume {
		fmt.Fprintf(&b, "  consume %9.0f rec/s %8.2f MB/s",
			perSec(float64(f.consumed), s.Measured), perSec(float64(f.consumedBytes)/1e6, s.Measured))
	}
	if f.errors > 0 {
		fmt.Fprintf(&b, "  %d errors", f.errors)
	}
	return b.String()
}

// secs writes a duration in seconds to a tenth: warm-ups and windows of
// less than a second are common in tests and quick looks.
func secs(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// progress writes a line for the target every second until the function
// it returns is called, which writes the measured round's line if the
// ticker has not.
func progress(o Options, t Target, round int, c *counters, rc *roundClock) func() {
	if o.Progress == nil {
		return func() {}
	}
	line := func() (string, phase) {
		s := rc.state(time.Now())
		select {
		case <-c.flowing:
			s.Flowing = true
		default:
		}
		return progressLine(o, t.label(), round, s, c.figures()), s.Phase
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	// doneShown is the ticker's until done closes: whether it has
	// already written a line of the measured round.
	doneShown := false
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			l, ph := line()
			fmt.Fprintln(o.Progress, l)
			doneShown = doneShown || ph == phaseDone
		}
	}()
	return func() {
		close(stop)
		<-done
		if l, ph := line(); ph == phaseDone && !doneShown {
			fmt.Fprintln(o.Progress, l)
		}
	}
}
