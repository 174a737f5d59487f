//go:build unix

package metrics

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkRequest is what recording one request costs in isolation: the
// clock reads, the request count and the two histogram observations, with
// metrics off (nil) and on. cpu-ns/op is the process's CPU time per
// request, which a busy machine disturbs less than wall time.
func BenchmarkRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		m    *Metrics
	}{{"off", nil}, {"on", New()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			m := c.m
			cpu0 := processCPU()
			defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
			for b.Loop() {
				// As the proxy does: the clock is read only when
				// metrics are on.
				t := m.Now()
				m.RequestRead(0)
				if m.Enabled() {
					m.ResponseWritten(0, time.Since(t), time.Millisecond)
				}
			}
		})
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
