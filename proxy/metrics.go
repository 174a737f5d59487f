package proxy

import "github.com/inorder-proxy/inorder/metrics"

// WithMetrics records the proxy's figures into m. Without it (or with nil)
// nothing is recorded and the hot path pays one nil check per event.
func WithMetrics(m *metrics.Metrics) Option {
	return func(p *Proxy) { p.metrics = m }
}

// Metrics returns what the proxy records into; nil when it records nothing.
func (p *Proxy) Metrics() *metrics.Metrics { return p.metrics }

// gauges fills the state gauges at scrape time, so that keeping them costs
// the hot path nothing.
func (p *Proxy) gauges(g *metrics.Gauges) {
	p.mu.Lock()
	g.ConnectionsOpen = int64(len(p.conns))
	p.mu.Unlock()
	nodes, controllers := p.nodes.listening()
	g.NodeListeners, g.ControllerListeners = int64(nodes), int64(controllers)
}
