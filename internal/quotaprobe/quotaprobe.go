// Package quotaprobe measures kgo clients held to Kafka quotas, for the
// tests of the proxy's quotas: bytes counted over a span of time, the
// throttles a client saw, and a producer at a set rate.
package quotaprobe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Span sums the bytes added between From and To, by the time they are
// added.
type Span struct {
	From, To time.Time

	mu    sync.Mutex
	bytes int64
}

// NewSpan returns the span from from to to.
func NewSpan(from, to time.Time) *Span { return &Span{From: from, To: to} }

// Add counts n bytes if now is within the span.
func (s *Span) Add(n int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(s.From) && now.Before(s.To) {
		s.bytes += int64(n)
	}
}

// Bytes returns the bytes counted.
func (s *Span) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Rate returns the bytes counted a second of the span.
func (s *Span) Rate() float64 {
	return float64(s.Bytes()) / s.To.Sub(s.From).Seconds()
}

// Request keys whose bytes a Hook counts.
const (
	Produce int16 = 0
	Fetch   int16 = 1
)

// Hook is a kgo hook that counts the responses its client saw
// throttle_time_ms set on and, when Wire is set, adds to it the bytes the
// client's quota counts: those of its Produce requests (Key Produce) or
// of its Fetch responses (Key Fetch), less their length prefix.
type Hook struct {
	Key  int16
	Wire *Span

	throttled atomic.Int64
}

// Throttled returns the number of responses with throttle_time_ms set.
func (h *Hook) Throttled() int64 { return h.throttled.Load() }

func (h *Hook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.throttled.Add(1)
	}
}

func (h *Hook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if h.Wire != nil && key == h.Key && key == Produce && err == nil {
		h.Wire.Add(n - 4)
	}
}

func (h *Hook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if h.Wire != nil && key == h.Key && key == Fetch && err == nil {
		h.Wire.Add(n - 4)
	}
}

// ProduceAt produces records of value to topic at about rate bytes a
// second until ctx ends, adding each acknowledged record to spans.
func ProduceAt(ctx context.Context, cl *kgo.Client, topic string, value []byte, rate float64, spans ...*Span) {
	start := time.Now()
	var sent float64
	for ctx.Err() == nil {
		for sent < rate*time.Since(start).Seconds() && ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					for _, s := range spans {
						s.Add(len(r.Value))
					}
				}
			})
			sent += float64(len(value))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
