package metrics

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Family names, exported so that dashboards, alerts and their tests can be
// checked against what the proxy registers.
const (
	NameBuildInfo              = "inorder_build_info"
	NameConnectionsOpen        = "inorder_connections_open"
	NameConnectionsAccepted    = "inorder_connections_accepted_total"
	NameConnectionsRejected    = "inorder_connections_rejected_total"
	NameConnectionsClosed      = "inorder_connections_closed_total"
	NameRequests               = "inorder_requests_total"
	NameRequestDuration        = "inorder_request_duration_seconds"
	NameUpstreamDuration       = "inorder_upstream_duration_seconds"
	NameRequestsInFlight       = "inorder_requests_in_flight"
	NameHeldBytes              = "inorder_held_bytes"
	NameMemoryUsed             = "inorder_memory_used_bytes"
	NameMemoryLimit            = "inorder_memory_limit_bytes"
	NameWriteWait              = "inorder_write_wait_seconds"
	NameReadPaused             = "inorder_client_read_paused_seconds_total"
	NameReadPauses             = "inorder_client_read_pauses_total"
	NameUpstreamOutOfOrder     = "inorder_upstream_out_of_order_responses_total"
	NameViolations             = "inorder_verify_violations_total"
	NameUpstreamDialErrors     = "inorder_upstream_dial_errors_total"
	NameUpstreamProtocolErrors = "inorder_upstream_protocol_errors_total"
	NameListenersOpen          = "inorder_listeners_open"
	NameConfigReloads          = "inorder_config_reloads_total"
	NameConfigReloadTimestamp  = "inorder_config_last_reload_success_timestamp_seconds"
	NameTLSHandshakeFailures   = "inorder_tls_handshake_failures_total"
	NameSASLAuthentications    = "inorder_sasl_authentications_total"
	NameClientAuthentications  = "inorder_client_authentications_total"
	NameStreamed               = "inorder_streamed_total"
	NameFramesRefused          = "inorder_frames_refused_total"
	NameSNIConnections         = "inorder_sni_connections_total"
	NameSNIBytes               = "inorder_sni_bytes_total"
	NameSNIRefusals            = "inorder_sni_refusals_total"
	NameQuotaThrottle          = "inorder_quota_throttle_seconds_total"
	NameQuotaBytes             = "inorder_quota_bytes_total"
	NameACLDenials             = "inorder_acl_denials_total"
	NameFetchAnswersCut        = "inorder_single_fetch_answers_cut_total"
	NameFetchAnswersEarly      = "inorder_single_fetch_answers_early_total"
	NameFetchPartsKept         = "inorder_single_fetch_parts_kept_total"
	NameFetchPartsKeptTaken    = "inorder_single_fetch_parts_kept_taken_total"
	NameFetchPartsLate         = "inorder_single_fetch_parts_late_total"
	NameFetchPartsTrimmed      = "inorder_single_fetch_parts_trimmed_total"
	NameBrokerStalls           = "inorder_single_broker_stalls_total"
)

// Names returns every inorder_* family the registry exports. Histograms are
// named by their family; Prometheus exposes them as _bucket, _sum, _count.
func Names() []string {
	return []string{
		NameBuildInfo, NameConnectionsOpen, NameConnectionsAccepted, NameConnectionsRejected,
		NameConnectionsClosed, NameRequests, NameRequestDuration, NameUpstreamDuration,
		NameRequestsInFlight, NameHeldBytes, NameMemoryUsed, NameMemoryLimit, NameWriteWait,
		NameReadPaused, NameReadPauses, NameUpstreamOutOfOrder, NameViolations,
		NameUpstreamDialErrors, NameUpstreamProtocolErrors, NameListenersOpen,
		NameConfigReloads, NameConfigReloadTimestamp, NameTLSHandshakeFailures,
		NameSASLAuthentications, NameClientAuthentications, NameStreamed, NameFramesRefused, NameSNIConnections, NameSNIBytes, NameSNIRefusals,
		NameQuotaThrottle, NameQuotaBytes,
		NameACLDenials, NameFetchAnswersCut, NameFetchAnswersEarly, NameFetchPartsKept, NameFetchPartsKeptTaken,
		NameFetchPartsLate, NameFetchPartsTrimmed, NameBrokerStalls,
	}
}

// LatencyBuckets are the bounds, in seconds, of every duration histogram:
// from 100µs (a loopback round trip) to 10s (a Produce waiting on a slow
// replica set).
var LatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Gauges is the state read at scrape time from the function given to
// SetGaugeSource. Fields left zero are exported as zero.
type Gauges struct {
	ConnectionsOpen     int64 // client connections being served
	RequestsInFlight    int64 // requests read whose response is not yet written
	HeldBytes           int64 // request and response bytes held across connections
	MemoryUsed          int64 // bytes counted against the process-wide memory bound
	MemoryLimit         int64 // the memory bound; zero when there is none
	NodeListeners       int64 // node listeners open
	ControllerListeners int64 // controller listeners open
	// FetchAnswersCut counts, since the start, the single topology's Fetch
	// parts' answers cut short at a partition boundary because the memory
	// budget could not hold them whole; a counter kept by its owner.
	FetchAnswersCut int64
	// FetchAnswersEarly counts the single topology's Fetch requests
	// answered before every broker's part was in, FetchPartsKept the
	// parts' answers that came after and were kept for the client's next
	// Fetch, FetchPartsKeptTaken those it took; counters kept by their
	// owner.
	FetchAnswersEarly, FetchPartsKept, FetchPartsKeptTaken int64
	// FetchPartsLate counts the single topology's Fetch parts whose
	// broker had not answered when the client's wait ended; a counter
	// kept by its owner.
	FetchPartsLate int64
	// FetchPartsTrimmed counts the single topology's Fetch parts sent
	// with only the partitions their maximum holds; a counter kept by
	// its owner.
	FetchPartsTrimmed int64
	// BrokerStalls counts the single topology's upstream connections
	// failed because their broker answered nothing past a part's
	// deadline; a counter kept by its owner.
	BrokerStalls int64
}

// apiKey holds the children of one API key, resolved on first use.
type apiKey struct {
	requests prometheus.Counter
	latency  prometheus.Observer
	upstream prometheus.Observer
}

// unknownKey is the slot of keys kmsg does not know.
const unknownKey = kmsg.MaxKey + 1

// Metrics records what the proxy does. The nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	keys      [unknownKey + 1]atomic.Pointer[apiKey]
	buildInfo *prometheus.GaugeVec

	accepted       closedSet[Listener]
	rejected       closedSet[RejectReason]
	closed         closedSet[CloseReason]
	writeWait      map[WritePhase]prometheus.Observer
	paused         closedSet[PauseReason]
	pauses         closedSet[PauseReason]
	outOfOrder     prometheus.Counter
	violations     closedSet[Violation]
	dialErrors     closedSet[DialError]
	protocolErrors closedSet[ProtocolError]
	streamed       closedSet[Streamed]
	refused        closedSet[Setting]
	reloads        closedSet[ReloadResult]
	reloadTime     prometheus.Gauge
	tlsFailures    map[Side]closedSet[TLSFailure]
	sasl           map[Result]closedSet[string]
	clientAuth     map[Result]closedSet[string]
	aclDenials     map[string]closedSet[string]
	sni            sniSet

	source atomic.Pointer[func(*Gauges)]
	// quotaSource gives the quota figures at scrape time (quota.go).
	quotaSource atomic.Pointer[func() []QuotaStat]
}

// New returns enabled Metrics with a registry of their own, holding every
// inorder_* family and the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := promFactory{reg: m.reg}
	m.requests = f.counterVec(NameRequests, "Requests read from clients, by API key.", "api")
	m.latency = f.histogramVec(NameRequestDuration, "Time from reading a request to writing its response to the client, by API key.", "api")
	m.upstream = f.histogramVec(NameUpstreamDuration, "The upstream's share of a request's time: from forwarding it to reading its response, by API key.", "api")
	m.buildInfo = f.gaugeVec(NameBuildInfo, "Always 1; labels carry the version, the source revision and the Go version.", "version", "revision", "goversion")
	m.accepted = newClosedSet(f.counterVec(NameConnectionsAccepted, "Client connections accepted, by listener kind.", "listener"),
		listeners, ListenerOther)
	m.rejected = newClosedSet(f.counterVec(NameConnectionsRejected, "Accepted sockets closed before being served, by reason.", "reason"), rejectReasons, RejectOther)
	m.closed = newClosedSet(f.counterVec(NameConnectionsClosed, "Client connections closed, by reason.", "reason"), closeReasons, CloseOther)
	ww := f.histogramVec(NameWriteWait, "Time a write (Produce, OffsetCommit, TxnOffsetCommit) spent in each phase before its order was fixed.", "phase")
	m.writeWait = make(map[WritePhase]prometheus.Observer, len(writePhases))
	for _, p := range writePhases {
		m.writeWait[p] = ww.WithLabelValues(string(p))
	}
	m.paused = newClosedSet(f.counterVec(NameReadPaused, "Seconds client connections spent not being read because a bound was reached (backpressure), by bound.", "reason"), pauseReasons, PauseOther)
	m.pauses = newClosedSet(f.counterVec(NameReadPauses, "Times a client connection stopped being read because a bound was reached, by bound.", "reason"), pauseReasons, PauseOther)
	m.outOfOrder = f.counter(NameUpstreamOutOfOrder, "Responses the upstream returned while an earlier request on the same upstream connection was unanswered; the proxy delivered them in order.")
	m.violations = newClosedSet(f.counterVec(NameViolations, "Ordering violations the live-traffic verifier (--verify) saw the upstream commit, by kind.", "kind"), violations, ViolationOther)
	m.dialErrors = newClosedSet(f.counterVec(NameUpstreamDialErrors, "Failed dials to the upstream, by reason.", "reason"), dialErrors, DialOther)
	m.protocolErrors = newClosedSet(f.counterVec(NameUpstreamProtocolErrors, "Upstream connections closed for breaking the protocol, by reason.", "reason"), protocolErrors, ProtoOther)
	m.streamed = newClosedSet(f.counterVec(NameStreamed, "Requests and responses moved between the sockets without being read whole into memory, by kind.", "kind"), streamedKinds, StreamedOther)
	m.refused = newClosedSet(f.counterVec(NameFramesRefused, "Frames that closed their connection because they could not be held, by the setting to raise: max-request-size or max-response-size (above the cap), max-memory (more than the memory budget can hold, or a response that found no memory in time).", "setting"), settings, SettingOther)
	m.reloads = newClosedSet(f.counterVec(NameConfigReloads, "Configuration reloads (SIGHUP or a changed --config file), by result.", "result"), reloadResults, ReloadFailure)
	m.reloadTime = f.gauge(NameConfigReloadTimestamp, "Unix time of the last reload that applied a configuration.")
	tls := f.counterVec(NameTLSHandshakeFailures, "Failed TLS handshakes, by side and reason.", "side", "reason")
	m.tlsFailures = make(map[Side]closedSet[TLSFailure], len(sides))
	for _, s := range sides {
		m.tlsFailures[s] = newClosedSet(tls.MustCurryWith(prometheus.Labels{"side": string(s)}), tlsFailures, TLSOther)
	}
	sasl := f.counterVec(NameSASLAuthentications, "SASL authentications, by mechanism and result.", "mechanism", "result")
	m.sasl = make(map[Result]closedSet[string], len(results))
	for _, r := range results {
		m.sasl[r] = newClosedSet(sasl.MustCurryWith(prometheus.Labels{"result": string(r)}), saslMechanisms, "other")
	}
	ca := f.counterVec(NameClientAuthentications, "Client SASL authentications the proxy answered itself (re-authentications included), by mechanism and result.", "mechanism", "result")
	m.clientAuth = make(map[Result]closedSet[string], len(results))
	for _, r := range results {
		m.clientAuth[r] = newClosedSet(ca.MustCurryWith(prometheus.Labels{"result": string(r)}), saslMechanisms, "other")
	}
	den := f.counterVec(NameACLDenials, "Requests and entries of requests the ACL file denied, by resource type and operation.", "resource", "operation")
	m.aclDenials = make(map[string]closedSet[string], len(ACLResources))
	for _, r := range ACLResources {
		m.aclDenials[r] = newClosedSet(den.MustCurryWith(prometheus.Labels{"resource": r}), ACLOperations, "other")
	}
	m.sni = newSNISet(f)
	m.reg.MustRegister(newGaugeCollector(m), newQuotaCollector(&m.quotaSource), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry holding every collector; nil when disabled.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in the Prometheus exposition formats. When
// disabled it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Enabled reports whether m records anything.
func (m *Metrics) Enabled() bool { return m != nil }

// Now returns the current time when enabled and the zero time otherwise, so
// that a disabled proxy never reads the clock for metrics.
func (m *Metrics) Now() time.Time {
	if m == nil {
		return time.Time{}
	}
	return time.Now()
}

// BuildInfo sets inorder_build_info for the version and the source
// revision the binary was built from.
func (m *Metrics) BuildInfo(version, revision string) {
	if m == nil {
		return
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
}

// SetGaugeSource sets the function that fills the state gauges at scrape
// time. It is called once per scrape, concurrently with everything else, so
// it must only read what is safe to read.
func (m *Metrics) SetGaugeSource(f func(*Gauges)) {
	if m == nil {
		return
	}
	m.source.Store(&f)
}

func (m *Metrics) key(k int16) *apiKey {
	i := int(k)
	if i < 0 || i > kmsg.MaxKey {
		i = unknownKey
	}
	if a := m.keys[i].Load(); a != nil {
		return a
	}
	name := kmsg.NameForKey(k)
	a := &apiKey{
		requests: m.requests.WithLabelValues(name),
		latency:  m.latency.WithLabelValues(name),
		upstream: m.upstream.WithLabelValues(name),
	}
	m.keys[i].CompareAndSwap(nil, a)
	return m.keys[i].Load()
}

// RequestRead counts a request of API key k read from a client.
func (m *Metrics) RequestRead(k int16) {
	if m == nil {
		return
	}
	m.key(k).requests.Inc()
}

// ResponseWritten records a request of API key k whose response was
// written to the client: took is the time from reading the request (its
// first read after a stamp from Now) to writing its response, upstream the
// time from forwarding it to reading the upstream's response (zero when the
// proxy answered it itself, which is then not observed).
func (m *Metrics) ResponseWritten(k int16, took, upstream time.Duration) {
	if m == nil {
		return
	}
	a := m.key(k)
	a.latency.Observe(took.Seconds())
	if upstream > 0 {
		a.upstream.Observe(upstream.Seconds())
	}
}

// ConnAccepted counts a client connection accepted by a listener of kind l.
func (m *Metrics) ConnAccepted(l Listener) {
	if m == nil {
		return
	}
	m.accepted.get(l).Inc()
}

// ConnRejected counts an accepted socket closed before it was served.
func (m *Metrics) ConnRejected(r RejectReason) {
	if m == nil {
		return
	}
	m.rejected.get(r).Inc()
}

// ConnClosed counts a served client connection that closed, by reason.
func (m *Metrics) ConnClosed(r CloseReason) {
	if m == nil {
		return
	}
	m.closed.get(r).Inc()
}

// WriteWait records the time a write spent in phase p.
func (m *Metrics) WriteWait(p WritePhase, d time.Duration) {
	if m == nil {
		return
	}
	if o := m.writeWait[p]; o != nil {
		o.Observe(d.Seconds())
	}
}

// ReadPaused records that a client connection was not read for d because
// the bound r was reached.
func (m *Metrics) ReadPaused(r PauseReason, d time.Duration) {
	if m == nil {
		return
	}
	m.pauses.get(r).Inc()
	m.paused.get(r).Add(d.Seconds())
}

// UpstreamOutOfOrder counts a response that arrived while an earlier
// request on the same upstream connection was unanswered.
func (m *Metrics) UpstreamOutOfOrder() {
	if m == nil {
		return
	}
	m.outOfOrder.Inc()
}

// Stream counts a request or response of kind k that went from one
// socket to the other without being read whole.
func (m *Metrics) Stream(k Streamed) {
	if m == nil {
		return
	}
	m.streamed.get(k).Inc()
}

// FrameRefused counts a frame that closed its connection because s did not
// let it be held.
func (m *Metrics) FrameRefused(s Setting) {
	if m == nil {
		return
	}
	m.refused.get(s).Inc()
}

// Violation counts an ordering violation of kind v seen by the verifier.
func (m *Metrics) Violation(v Violation) {
	if m == nil {
		return
	}
	m.violations.get(v).Inc()
}

// UpstreamDialError counts a failed dial to the upstream.
func (m *Metrics) UpstreamDialError(r DialError) {
	if m == nil {
		return
	}
	m.dialErrors.get(r).Inc()
}

// UpstreamProtocolError counts an upstream connection closed for breaking
// the protocol.
func (m *Metrics) UpstreamProtocolError(r ProtocolError) {
	if m == nil {
		return
	}
	m.protocolErrors.get(r).Inc()
}

// ConfigReload counts a configuration reload; a reload that applied
// anything also sets the last-success time.
func (m *Metrics) ConfigReload(r ReloadResult) {
	if m == nil {
		return
	}
	m.reloads.get(r).Inc()
	if r == ReloadSuccess || r == ReloadPartial {
		m.reloadTime.SetToCurrentTime()
	}
}

// TLSHandshakeFailure counts a failed TLS handshake on side s.
func (m *Metrics) TLSHandshakeFailure(s Side, r TLSFailure) {
	if m == nil {
		return
	}
	set, ok := m.tlsFailures[s]
	if !ok {
		set = m.tlsFailures[SideClient]
	}
	set.get(r).Inc()
}

// ACLResources and ACLOperations are the values of the ACL denial labels:
// Kafka's resource types and operations as its tools print them.
var (
	ACLResources  = []string{"Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"}
	ACLOperations = []string{"Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
		"DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens", "TwoPhaseCommit"}
)

// ACLDenial counts a request, or an entry of one, that the ACL file
// denied, by resource type and operation; a value outside the closed sets
// counts as the cluster's, or "other".
func (m *Metrics) ACLDenial(resource, operation string) {
	if m == nil {
		return
	}
	set, ok := m.aclDenials[resource]
	if !ok {
		set = m.aclDenials["Cluster"]
	}
	set.get(operation).Inc()
}

// ClientAuthentication counts a client's SASL authentication that the
// proxy answered itself, by mechanism (names outside the closed set count
// as "other") and result.
func (m *Metrics) ClientAuthentication(mechanism string, r Result) {
	if m == nil {
		return
	}
	set, ok := m.clientAuth[r]
	if !ok {
		set = m.clientAuth[ResultFailure]
	}
	set.get(mechanism).Inc()
}

// SASLAuthentication counts a SASL authentication with the named mechanism
// (as the client or configuration spelled it; unknown names count as
// "other") and its result.
func (m *Metrics) SASLAuthentication(mechanism string, r Result) {
	if m == nil {
		return
	}
	set, ok := m.sasl[r]
	if !ok {
		set = m.sasl[ResultFailure]
	}
	set.get(mechanism).Inc()
}
