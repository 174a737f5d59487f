package metrics

// Label values. Each type is a closed set: a value outside its constants is
// recorded as "other", so no caller can grow the series count by accident.
// Adding a reason means adding a constant here and to its list below.

// Listener is the kind of listener that accepted a connection.
type Listener string

// Listener kinds.
const (
	ListenerBootstrap  Listener = "bootstrap"
	ListenerNode       Listener = "node"
	ListenerController Listener = "controller"
	ListenerSNI        Listener = "sni" // the one TLS port of the sni topology
	ListenerOther      Listener = "other"
)

var listeners = []Listener{ListenerBootstrap, ListenerNode, ListenerController, ListenerSNI, ListenerOther}

// CloseReason says why a client connection closed.
type CloseReason string

// Close reasons.
const (
	CloseClientClosed     CloseReason = "client_closed"     // the client closed, or its socket failed under a write
	CloseClientError      CloseReason = "client_error"      // reading the client failed (reset)
	CloseBadRequest       CloseReason = "bad_request"       // a frame the proxy cannot parse or must not forward
	CloseIdle             CloseReason = "idle"              // idle timeout
	CloseReadTimeout      CloseReason = "read_timeout"      // a frame did not arrive whole in time
	CloseWriteTimeout     CloseReason = "write_timeout"     // the client accepted no byte of a response in time
	CloseLimit            CloseReason = "limit"             // a bound was exceeded
	CloseUpstreamFailure  CloseReason = "upstream_failure"  // the upstream refused, reset or closed
	CloseUpstreamProtocol CloseReason = "upstream_protocol" // the upstream sent what cannot be matched or parsed
	CloseAcksZeroFailed   CloseReason = "acks0_failed"      // an acks=0 write failed upstream, as Kafka closes
	CloseTLS              CloseReason = "tls"               // the TLS handshake failed
	CloseSASL             CloseReason = "sasl"              // authentication failed
	CloseDenied           CloseReason = "denied"            // an acks=0 write the ACLs denied, as Kafka closes
	CloseShutdown         CloseReason = "shutdown"          // the proxy shut down
	CloseOther            CloseReason = "other"
)

var closeReasons = []CloseReason{
	CloseClientClosed, CloseClientError, CloseBadRequest, CloseIdle, CloseReadTimeout, CloseWriteTimeout,
	CloseLimit, CloseUpstreamFailure, CloseUpstreamProtocol, CloseAcksZeroFailed,
	CloseTLS, CloseSASL, CloseDenied, CloseShutdown, CloseOther,
}

// RejectReason says why an accepted socket was closed before being served.
type RejectReason string

// Reject reasons.
const (
	RejectLimit    RejectReason = "limit"    // the connection limit was reached
	RejectShutdown RejectReason = "shutdown" // the proxy is shutting down
	RejectOther    RejectReason = "other"
)

var rejectReasons = []RejectReason{RejectLimit, RejectShutdown, RejectOther}

// PauseReason says why a client connection was not being read.
type PauseReason string

// Pause reasons.
const (
	PauseInFlight PauseReason = "in_flight" // max-in-flight reached
	PauseBytes    PauseReason = "bytes"     // max-buffered-bytes reached
	PauseMemory   PauseReason = "memory"    // the process-wide memory bound reached
	PauseOther    PauseReason = "other"
)

var pauseReasons = []PauseReason{PauseInFlight, PauseBytes, PauseMemory, PauseOther}

// WritePhase is a stretch of a write's (Produce, OffsetCommit,
// TxnOffsetCommit) way upstream.
type WritePhase string

// Write phases.
const (
	// PhaseQueued runs from the moment the request is read to the moment
	// it is forwarded: in none mode, the wait for earlier writes to the same
	// partitions and for barriers.
	PhaseQueued WritePhase = "queued"
	// PhaseAccept runs from forwarding to the moment the write's order is
	// fixed and the next request may go: the upstream's answer in none
	// mode, the end of the socket write in connection mode.
	PhaseAccept WritePhase = "accept"
)

var writePhases = []WritePhase{PhaseQueued, PhaseAccept}

// Violation is a kind of ordering violation the live-traffic verifier sees
// the upstream commit.
type Violation string

// Violation kinds.
const (
	// ViolationOutOfOrderResponse: a response arrived while an earlier
	// request on the same upstream connection was unanswered.
	ViolationOutOfOrderResponse Violation = "out_of_order_response"
	// ViolationOffsetRegression: a Produce's base offset for a partition is
	// lower than an earlier Produce's to the same partition on the same
	// connection.
	ViolationOffsetRegression Violation = "produce_offset_regression"
	// ViolationOutOfOrderSequence: the upstream answered
	// OUT_OF_ORDER_SEQUENCE_NUMBER.
	ViolationOutOfOrderSequence Violation = "out_of_order_sequence_number"
	// ViolationDuplicateSequence: the upstream answered
	// DUPLICATE_SEQUENCE_NUMBER.
	ViolationDuplicateSequence Violation = "duplicate_sequence_number"
	ViolationOther             Violation = "other"
)

var violations = []Violation{
	ViolationOutOfOrderResponse, ViolationOffsetRegression,
	ViolationOutOfOrderSequence, ViolationDuplicateSequence, ViolationOther,
}

// DialError says why a dial to the upstream failed.
type DialError string

// Dial error reasons.
const (
	DialRefused    DialError = "refused"     // connection refused
	DialTimeout    DialError = "timeout"     // dial-timeout passed
	DialDNS        DialError = "dns"         // the host did not resolve
	DialTLS        DialError = "tls"         // the upstream TLS handshake failed
	DialSASL       DialError = "sasl"        // the proxy's own authentication failed
	DialNotAllowed DialError = "not_allowed" // the address is outside what the operator allowed
	DialOther      DialError = "other"
)

var dialErrors = []DialError{DialRefused, DialTimeout, DialDNS, DialTLS, DialSASL, DialNotAllowed, DialOther}

// ProtocolError says how the upstream broke the protocol.
type ProtocolError string

// Protocol error reasons.
const (
	ProtoUnknownCorrelationID ProtocolError = "unknown_correlation_id" // a response to nothing the proxy sent
	ProtoFrameTooLarge        ProtocolError = "frame_too_large"        // larger than max-response-size
	ProtoBadFrame             ProtocolError = "bad_frame"              // a length or header that cannot be read
	ProtoUnexpectedBytes      ProtocolError = "unexpected_bytes"       // bytes while nothing was in flight
	ProtoBadResponse          ProtocolError = "bad_response"           // a body the proxy must rewrite does not decode
	ProtoOther                ProtocolError = "other"
)

var protocolErrors = []ProtocolError{
	ProtoUnknownCorrelationID, ProtoFrameTooLarge, ProtoBadFrame,
	ProtoUnexpectedBytes, ProtoBadResponse, ProtoOther,
}

// ReloadResult is the outcome of re-reading the configuration.
type ReloadResult string

// Reload results.
const (
	ReloadSuccess ReloadResult = "success" // everything that changed was applied
	ReloadPartial ReloadResult = "partial" // applied, except settings that need a restart
	ReloadFailure ReloadResult = "failure" // invalid: the running configuration was kept
)

var reloadResults = []ReloadResult{ReloadSuccess, ReloadPartial, ReloadFailure}

// Side is the side of the proxy a TLS session is on.
type Side string

// Sides.
const (
	SideClient   Side = "client"   // the proxy is the server, for a client
	SideUpstream Side = "upstream" // the proxy is the client, to the upstream
)

var sides = []Side{SideClient, SideUpstream}

// TLSFailure says why a TLS handshake failed.
type TLSFailure string

// TLS failure reasons.
const (
	TLSPlaintext        TLSFailure = "plaintext"         // the peer did not speak TLS
	TLSBadCertificate   TLSFailure = "bad_certificate"   // a certificate did not verify
	TLSUnknownAuthority TLSFailure = "unknown_authority" // signed by an authority not trusted
	TLSTimeout          TLSFailure = "timeout"           // the handshake did not finish in time
	TLSEOF              TLSFailure = "eof"               // the peer closed mid-handshake
	TLSProtocol         TLSFailure = "protocol"          // no common version or cipher, or a bad record
	TLSOther            TLSFailure = "other"
)

var tlsFailures = []TLSFailure{
	TLSPlaintext, TLSBadCertificate, TLSUnknownAuthority, TLSTimeout, TLSEOF, TLSProtocol, TLSOther,
}

// Result is success or failure.
type Result string

// Results.
const (
	ResultSuccess Result = "success"
	ResultFailure Result = "failure"
)

var results = []Result{ResultSuccess, ResultFailure}

// saslMechanisms are the mechanism names recorded as themselves; a client
// can name any mechanism, so every other name is recorded as "other".
var saslMechanisms = []string{
	"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM", "GSSAPI", "other",
}

// Streamed says what went from one socket to the other without being read
// whole into the proxy's memory.
type Streamed string

// Streamed kinds.
const (
	StreamedRequestSpliced  Streamed = "request_spliced"  // a produce body spliced in connection mode (copied through a chunk over TLS)
	StreamedRequestUnread   Streamed = "request_unread"   // a whole produce frame, head too, spliced (its correlation id needed no rewrite); in none mode its partitions scanned on the way
	StreamedRequestScanned  Streamed = "request_scanned"  // a produce body spliced (over TLS copied) in none mode after its head was read, its partitions scanned on the way
	StreamedResponse        Streamed = "response"         // a response spliced, or copied through one chunk (stream.go)
	StreamedResponseScanned Streamed = "response_scanned" // a Fetch v16+ response streamed through a walk of its body, its endpoints rewritten at the end (fetchstream.go)
	StreamedOther           Streamed = "other"
)

var streamedKinds = []Streamed{StreamedRequestSpliced, StreamedRequestUnread, StreamedRequestScanned, StreamedResponse, StreamedResponseScanned, StreamedOther}

// Setting names the setting that refused a frame, the one to raise if the
// frame was legitimate.
type Setting string

// Settings that refuse frames.
const (
	SettingMaxMemory       Setting = "max-memory"        // larger than the memory budget can hold for it, or a response that found no memory in time
	SettingMaxRequestSize  Setting = "max-request-size"  // a request frame above the cap
	SettingMaxResponseSize Setting = "max-response-size" // a response frame above the cap
	SettingOther           Setting = "other"
)

var settings = []Setting{SettingMaxMemory, SettingMaxRequestSize, SettingMaxResponseSize, SettingOther}

// SNIRole is what the server name of a connection on the SNI listener
// stood for.
type SNIRole string

// SNI roles.
const (
	SNIBootstrap  SNIRole = "bootstrap"
	SNINode       SNIRole = "node"
	SNIController SNIRole = "controller"
	SNIRoleOther  SNIRole = "other"
)

var sniRoles = []SNIRole{SNIBootstrap, SNINode, SNIController, SNIRoleOther}

// SNIRefusal says why the SNI listener refused a connection's server name.
type SNIRefusal string

// SNI refusal reasons.
const (
	SNINoName       SNIRefusal = "no_name"      // the ClientHello named no server
	SNIUnknownName  SNIRefusal = "unknown_name" // neither the bootstrap name nor a pattern's
	SNIUnknownNode  SNIRefusal = "unknown_node" // a node's name, for an id the upstream has not advertised
	SNINotAllowed   SNIRefusal = "not_allowed"  // a node the upstream advertised outside allow-upstream
	SNIRefusalOther SNIRefusal = "other"
)

var sniRefusals = []SNIRefusal{SNINoName, SNIUnknownName, SNIUnknownNode, SNINotAllowed, SNIRefusalOther}
