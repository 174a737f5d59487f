package audit

import (
	"github.com/prometheus/client_golang/prometheus"
)

// SinkName is a sink's name in metrics and logs: a closed set.
type SinkName string

// The sinks.
const (
	SinkFile   SinkName = "file"
	SinkStdout SinkName = "stdout"
	SinkKafka  SinkName = "kafka"
)

// SinkNames are every SinkName, the values of the sink label.
var SinkNames = []SinkName{SinkFile, SinkStdout, SinkKafka}

// DropReason is why an event was dropped: a closed set.
type DropReason string

// The reasons an event is dropped.
const (
	// DropFull: the queue was full with --audit-on-full drop.
	DropFull DropReason = "full"
	// DropTooLarge: the event alone is larger than the queue can hold.
	DropTooLarge DropReason = "too_large"
	// DropClosed: the event came after the trail was closed.
	DropClosed DropReason = "closed"
	// DropUnflushed: the event was queued, but Close's deadline passed
	// before every sink had written it.
	DropUnflushed DropReason = "unflushed"
	// DropCancelled: the recording connection (for a request it
	// answered, a linger after it), or the stop's deadline, ended while
	// the event waited for room (block mode).
	DropCancelled DropReason = "cancelled"
)

// DropReasons are every DropReason, the values of the reason label.
var DropReasons = []DropReason{DropFull, DropTooLarge, DropClosed, DropUnflushed, DropCancelled}

// Metrics are the trail's collectors. A nil *Metrics records nothing.
type Metrics struct {
	queuedEvents prometheus.Gauge
	queuedBytes  prometheus.Gauge
	waitSeconds  prometheus.Counter
	dropped      map[DropReason]prometheus.Counter
	written      map[SinkName]prometheus.Counter
	sinkErrors   map[SinkName]prometheus.Counter
	sinkUp       *prometheus.GaugeVec
}

// NewMetrics registers the trail's collectors on reg. Every label value
// is exported from the start, at zero.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		queuedEvents: prometheus.NewGauge(prometheus.GaugeOpts{Name: "inorder_audit_queued_events", Help: "Audit events queued and not yet written by every sink."}),
		queuedBytes:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "inorder_audit_queued_bytes", Help: "Bytes of the audit events queued."}),
		waitSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "inorder_audit_enqueue_wait_seconds_total",
			Help: "Time connections were not read because the audit queue was full (--audit-on-full block)."}),
		dropped: map[DropReason]prometheus.Counter{}, written: map[SinkName]prometheus.Counter{},
		sinkErrors: map[SinkName]prometheus.Counter{},
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inorder_audit_dropped_total", Help: "Audit events not written, by reason."}, []string{"reason"})
	written := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inorder_audit_written_total", Help: "Audit events written, by sink."}, []string{"sink"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inorder_audit_sink_errors_total", Help: "Failed writes of audit events (each retried), by sink."}, []string{"sink"})
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inorder_audit_sink_up", Help: "1 while an audit sink writes, 0 while it fails or is stalled; only the sinks configured."}, []string{"sink"})
	reg.MustRegister(m.queuedEvents, m.queuedBytes, m.waitSeconds, dropped, written, errs, up)
	for _, r := range DropReasons {
		m.dropped[r] = dropped.WithLabelValues(string(r))
	}
	for _, s := range SinkNames {
		m.written[s] = written.WithLabelValues(string(s))
		m.sinkErrors[s] = errs.WithLabelValues(string(s))
	}
	m.sinkUp = up // a series per configured sink, set when its queue starts
	return m
}

func (m *Metrics) drop(r DropReason, n int) {
	if m != nil && n > 0 {
		m.dropped[r].Add(float64(n))
	}
}

func (m *Metrics) queued(events int, bytes int64) {
	if m != nil {
		m.queuedEvents.Set(float64(events))
		m.queuedBytes.Set(float64(bytes))
	}
}

func (m *Metrics) waited(seconds float64) {
	if m != nil {
		m.waitSeconds.Add(seconds)
	}
}

func (m *Metrics) wrote(s SinkName, n int) {
	if m != nil && n > 0 {
		if c, ok := m.written[s]; ok {
			c.Add(float64(n))
		}
	}
}

func (m *Metrics) sinkError(s SinkName) {
	if m != nil {
		if c, ok := m.sinkErrors[s]; ok {
			c.Inc()
		}
	}
}

func (m *Metrics) up(s SinkName, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.sinkUp.WithLabelValues(string(s)).Set(v)
}
