package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// promFactory builds collectors and registers them on one registry.
type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) histogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// closedSet holds one counter per value of a closed label set, resolved
// when built (so every value is exported from the start, at zero); a value
// outside the set is counted under the fallback.
type closedSet[T ~string] struct {
	by       map[T]prometheus.Counter
	fallback prometheus.Counter
}

func newClosedSet[T ~string](vec *prometheus.CounterVec, values []T, fallback T) closedSet[T] {
	s := closedSet[T]{by: make(map[T]prometheus.Counter, len(values)+1)}
	for _, v := range values {
		s.by[v] = vec.WithLabelValues(string(v))
	}
	if _, ok := s.by[fallback]; !ok {
		s.by[fallback] = vec.WithLabelValues(string(fallback))
	}
	s.fallback = s.by[fallback]
	return s
}

func (s closedSet[T]) get(v T) prometheus.Counter {
	if c, ok := s.by[v]; ok {
		return c
	}
	return s.fallback
}

// gaugeCollector exports the state gauges, filled at scrape time by the
// source function, so that keeping them costs the hot path nothing.
type gaugeCollector struct {
	m                                      *Metrics
	conns, inFlight, held, memUsed, memLim *prometheus.Desc
	listeners, cut                         *prometheus.Desc
	early, kept, taken, late, trimmed      *prometheus.Desc
	stalls                                 *prometheus.Desc
}

func newGaugeCollector(m *Metrics) *gaugeCollector {
	return &gaugeCollector{
		m:         m,
		conns:     prometheus.NewDesc(NameConnectionsOpen, "Client connections being served.", nil, nil),
		inFlight:  prometheus.NewDesc(NameRequestsInFlight, "Requests read whose response is not yet written.", nil, nil),
		held:      prometheus.NewDesc(NameHeldBytes, "Request and response bytes held across all connections.", nil, nil),
		memUsed:   prometheus.NewDesc(NameMemoryUsed, "Bytes counted against the process-wide memory bound.", nil, nil),
		memLim:    prometheus.NewDesc(NameMemoryLimit, "The process-wide memory bound; 0 when there is none.", nil, nil),
		listeners: prometheus.NewDesc(NameListenersOpen, "Node and controller listeners open, by kind.", []string{"kind"}, nil),
		cut:       prometheus.NewDesc(NameFetchAnswersCut, "Fetch answers of a broker, in the single topology, cut short at a partition boundary because the memory budget could not hold them whole (the partitions left out are asked again).", nil, nil),
		early:     prometheus.NewDesc(NameFetchAnswersEarly, "Fetch requests, in the single topology, answered from the brokers' parts that were in, the others' partitions with no records.", nil, nil),
		kept:      prometheus.NewDesc(NameFetchPartsKept, "Brokers' Fetch answers, in the single topology, that came after their request was answered early and were kept for the client's next Fetch.", nil, nil),
		late:      prometheus.NewDesc(NameFetchPartsLate, "Fetch parts, in the single topology, whose broker had not begun to answer when the client's wait ended: answered with no records from what it last said, or NOT_LEADER_OR_FOLLOWER.", nil, nil),
		trimmed:   prometheus.NewDesc(NameFetchPartsTrimmed, "Fetch parts, in the single topology, for a broker seen answering past a Fetch's max_bytes, that asked only the partitions their maximum holds, the others answered with no records from what it last said.", nil, nil),
		taken:     prometheus.NewDesc(NameFetchPartsKeptTaken, "Kept Fetch answers, in the single topology, that the client's next Fetch took instead of asking the broker again.", nil, nil),
		stalls:    prometheus.NewDesc(NameBrokerStalls, "Upstream connections, in the single topology, failed because their broker had not begun to answer a request that carries a timeout and did not answer a probe, or not past that timeout: its parts answered with their retriable error, the broker down until it answers a probe.", nil, nil),
	}
}

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.conns, g.inFlight, g.held, g.memUsed, g.memLim, g.listeners, g.cut, g.early, g.kept, g.taken, g.late, g.trimmed, g.stalls} {
		ch <- d
	}
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	var s Gauges
	if f := g.m.source.Load(); f != nil {
		(*f)(&s)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(g.conns, s.ConnectionsOpen)
	gauge(g.inFlight, s.RequestsInFlight)
	gauge(g.held, s.HeldBytes)
	gauge(g.memUsed, s.MemoryUsed)
	gauge(g.memLim, s.MemoryLimit)
	gauge(g.listeners, s.NodeListeners, "node")
	gauge(g.listeners, s.ControllerListeners, "controller")
	ch <- prometheus.MustNewConstMetric(g.cut, prometheus.CounterValue, float64(s.FetchAnswersCut))
	ch <- prometheus.MustNewConstMetric(g.early, prometheus.CounterValue, float64(s.FetchAnswersEarly))
	ch <- prometheus.MustNewConstMetric(g.kept, prometheus.CounterValue, float64(s.FetchPartsKept))
	ch <- prometheus.MustNewConstMetric(g.taken, prometheus.CounterValue, float64(s.FetchPartsKeptTaken))
	ch <- prometheus.MustNewConstMetric(g.late, prometheus.CounterValue, float64(s.FetchPartsLate))
	ch <- prometheus.MustNewConstMetric(g.trimmed, prometheus.CounterValue, float64(s.FetchPartsTrimmed))
	ch <- prometheus.MustNewConstMetric(g.stalls, prometheus.CounterValue, float64(s.BrokerStalls))
}
