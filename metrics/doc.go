// Package metrics owns every Prometheus collector inorder exports, all named
// inorder_* and held in a registry of their own (never the global one), so
// that tests read exactly what the proxy recorded.
//
// # Cost
//
// A nil *Metrics is the disabled value: every method returns at once and
// Now returns the zero time, so a proxy without an admin endpoint pays one
// nil check per event and never reads the clock for metrics. When enabled:
//
//   - per-API-key children are resolved once, on first use of a key, and
//     kept in an array indexed by the key, so a request costs an array load
//     and the atomic adds of the observation itself, never a label lookup;
//   - every label takes a value from a closed set (the string-typed enums in
//     labels.go; anything else is counted as "other"), and API keys are
//     labeled by their Kafka name from kmsg.NameForKey, so nothing a client
//     sends can grow the series count;
//   - gauges that describe state (connections open, requests in flight,
//     bytes held, the memory bound, listeners open) are not updated on the
//     hot path at all: they are read at scrape time from the function given
//     to SetGaugeSource.
//
// # Recording, by caller
//
// The proxy's connections:
//
//	m.ConnAccepted(metrics.ListenerNode)
//	m.ConnRejected(metrics.RejectLimit)           // closed before being served
//	m.ConnClosed(metrics.CloseClientClosed)
//	t := m.Now()                                  // when a request is read
//	m.RequestRead(key)
//	m.WriteWait(metrics.PhaseQueued, d)           // writes: read -> forwarded
//	m.WriteWait(metrics.PhaseAccept, d)           // writes: forwarded -> order fixed
//	m.ResponseWritten(key, now.Sub(t), upShare)   // response written to the client
//	m.ReadPaused(metrics.PauseInFlight, d)        // time the client was not read
//	m.UpstreamOutOfOrder()                        // a response overtook an earlier request
//	m.UpstreamDialError(metrics.DialRefused)
//	m.UpstreamProtocolError(metrics.ProtoUnknownCorrelationID)
//	m.SetGaugeSource(func(g *metrics.Gauges) { ... })
//
// The live-traffic verifier: m.Violation(metrics.ViolationOffsetRegression).
// TLS: m.TLSHandshakeFailure(metrics.SideClient, metrics.TLSBadCertificate).
// The SNI listener: r := m.SNIRoute(metrics.SNINode, id) once per
// connection, then r.Connected(), r.Received(n), r.Sent(n);
// m.SNIRefused(metrics.SNIUnknownName).
// SASL: m.SASLAuthentication("SCRAM-SHA-256", metrics.ResultSuccess) for
// the proxy's own upstream authentication; the clients it authenticates
// itself: m.ClientAuthentication("SCRAM-SHA-256", metrics.ResultFailure).
// Reload: m.ConfigReload(metrics.ReloadSuccess).
//
// Names lists every inorder_* family, for checks of dashboards and alerts
// against what the proxy really exports. Handler serves the registry in the
// Prometheus text format.
package metrics
