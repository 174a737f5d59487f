package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Quota kinds, the kind label of the quota families.
const (
	QuotaProduce = "produce"
	QuotaFetch   = "fetch"
	QuotaRequest = "request"
)

// QuotaStat is the totals of one configured quota entity and kind, read
// at scrape time. Entity is the entity as the quotas list configures it
// (Kafka's configuration path, like users/alice or clients/<default>), never a client's own user
// or client id, so the label takes only as many values as the list has
// entries.
type QuotaStat struct {
	Kind   string // QuotaProduce, QuotaFetch or QuotaRequest
	Entity string
	// Bytes recorded against the quota (Produce, Fetch); a fetch answered
	// empty for its quota adds none.
	Bytes int64
	// Throttle is the throttle time handed out.
	Throttle time.Duration
}

// quotaCollector exports the quota figures, read at scrape time from the
// source, so that keeping them costs the hot path nothing more than the
// quota's own counting.
type quotaCollector struct {
	src              *atomic.Pointer[func() []QuotaStat]
	throttle, volume *prometheus.Desc
}

func newQuotaCollector(src *atomic.Pointer[func() []QuotaStat]) *quotaCollector {
	return &quotaCollector{
		src:      src,
		throttle: prometheus.NewDesc(NameQuotaThrottle, "Throttle time handed to clients over their quota, by quota kind and the configured entity that set it.", []string{"kind", "entity"}, nil),
		volume:   prometheus.NewDesc(NameQuotaBytes, "Bytes counted against produce and fetch quotas, by quota kind and the configured entity.", []string{"kind", "entity"}, nil),
	}
}

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.throttle
	ch <- c.volume
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.src.Load()
	if f == nil {
		return
	}
	for _, s := range (*f)() {
		ch <- prometheus.MustNewConstMetric(c.throttle, prometheus.CounterValue, s.Throttle.Seconds(), s.Kind, s.Entity)
		if s.Kind != QuotaRequest {
			ch <- prometheus.MustNewConstMetric(c.volume, prometheus.CounterValue, float64(s.Bytes), s.Kind, s.Entity)
		}
	}
}

// SetQuotaSource sets the function that gives the quota figures at scrape
// time; like the gauge source, it is called concurrently with everything
// else.
func (m *Metrics) SetQuotaSource(f func() []QuotaStat) {
	if m == nil {
		return
	}
	m.quotaSource.Store(&f)
}
