package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxSNINodes bounds the node ids labelled one by one per role; further
// ids share node_id="other". The proxy knows at most 1024 brokers and 1024
// controllers, so it never reaches the bound: it only keeps the promise
// that no caller can grow the series count without limit.
const maxSNINodes = 1024

// sniSet holds the per-name figures of the SNI listener: connections and
// bytes by the role and node id the server name stood for, and refusals by
// reason. A route's children are resolved on its first connection and
// kept, so a connection costs one map lookup and its bytes an atomic add
// per socket read or write.
type sniSet struct {
	conns    *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	refusals closedSet[SNIRefusal]

	mu     sync.Mutex
	routes map[sniKey]*SNICounters
	ids    map[SNIRole]int // distinct node ids labelled, by role
}

type sniKey struct {
	role SNIRole
	id   int32
}

func newSNISet(f promFactory) sniSet {
	return sniSet{
		conns: f.counterVec(NameSNIConnections, "Client connections on the SNI listener, by the role of the server name they asked for and its node id (empty for the bootstrap).", "role", "node_id"),
		bytes: f.counterVec(NameSNIBytes, "Bytes on the sockets of SNI listener connections, TLS records included, by role, node id and direction (received from or sent to the client).", "role", "node_id", "direction"),
		refusals: newClosedSet(f.counterVec(NameSNIRefusals, "TLS handshakes on the SNI listener refused for their server name, by reason; nothing is dialled for them.", "reason"),
			sniRefusals, SNIRefusalOther),
		routes: make(map[sniKey]*SNICounters),
		ids:    make(map[SNIRole]int),
	}
}

// SNICounters are the figures of one route of the SNI listener. The nil
// *SNICounters records nothing.
type SNICounters struct {
	conns, received, sent prometheus.Counter
}

// SNIRoute returns the counters of connections whose server name stood for
// role and node id (ignored for the bootstrap); nil when disabled.
func (m *Metrics) SNIRoute(role SNIRole, id int32) *SNICounters {
	if m == nil {
		return nil
	}
	if role != SNIBootstrap && role != SNINode && role != SNIController {
		role, id = SNIRoleOther, 0
	}
	if role == SNIBootstrap {
		id = 0
	}
	s := &m.sni
	k := sniKey{role, id}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.routes[k]; ok {
		return c
	}
	label := strconv.Itoa(int(id))
	switch {
	case role == SNIBootstrap || role == SNIRoleOther:
		label = ""
	case s.ids[role] >= maxSNINodes:
		label = "other"
		k.id = -1
		if c, ok := s.routes[k]; ok {
			return c
		}
	default:
		s.ids[role]++
	}
	c := &SNICounters{
		conns:    s.conns.WithLabelValues(string(role), label),
		received: s.bytes.WithLabelValues(string(role), label, "received"),
		sent:     s.bytes.WithLabelValues(string(role), label, "sent"),
	}
	s.routes[k] = c
	return c
}

// SNIRefused counts a server name refused for reason r.
func (m *Metrics) SNIRefused(r SNIRefusal) {
	if m == nil {
		return
	}
	m.sni.refusals.get(r).Inc()
}

// Connected counts a connection routed here.
func (c *SNICounters) Connected() {
	if c != nil {
		c.conns.Inc()
	}
}

// Received counts n bytes read from the client's socket.
func (c *SNICounters) Received(n int) {
	if c != nil && n > 0 {
		c.received.Add(float64(n))
	}
}

// Sent counts n bytes written to the client's socket.
func (c *SNICounters) Sent(n int) {
	if c != nil && n > 0 {
		c.sent.Add(float64(n))
	}
}
