package proxy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/inorder-proxy/inorder/clientsasl"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

// Errors returned by the Proxy and recorded as the reason a connection
// closed. Match them with errors.Is.
var (
	// ErrClosed is returned by Serve after Shutdown or Close.
	ErrClosed = errors.New("proxy closed")
	// ErrNodePort is returned when a node listener cannot be opened: its
	// port is out of range or taken.
	ErrNodePort = errors.New("cannot open node listener")
	// ErrNotAllowed: the upstream advertised a node whose address is
	// outside allow-upstream; the proxy neither dials it nor listens for it.
	ErrNotAllowed = proxyerr.NotAllowed

	// ErrBadRequest closes a client that sent a frame the proxy cannot
	// parse or must not forward.
	ErrBadRequest = errors.New("bad request")
	// ErrUpstreamFailed closes a client whose upstream connection failed:
	// refused, reset, or closed.
	ErrUpstreamFailed = proxyerr.UpstreamFailed
	// ErrUpstreamProtocol closes a client whose upstream sent a response
	// the proxy cannot match or parse.
	ErrUpstreamProtocol = proxyerr.UpstreamProtocol
	// ErrAcksZeroFailed closes a client whose acks=0 produce failed
	// upstream, as Kafka closes the connection in that case.
	ErrAcksZeroFailed = errors.New("acks=0 produce failed")
	// ErrTLSHandshake closes a client whose TLS handshake failed: it spoke
	// plaintext on a TLS port, or its certificate did not verify.
	ErrTLSHandshake = errors.New("tls handshake failed")
	// ErrUpstreamAuth closes a client when the upstream refused the
	// proxy's own SASL credentials, or while the proxy backs off after
	// such a refusal.
	ErrUpstreamAuth = proxyerr.UpstreamAuth
	// ErrServerName closes a client on the SNI listener whose TLS server
	// name is none of the proxy's (or none at all), or names a node the
	// upstream never advertised or advertised outside allow-upstream: the
	// handshake ends with the unrecognized_name alert and nothing is
	// dialled.
	ErrServerName = errors.New("tls server name refused")
	// ErrClientSASL closes a client whose SASL exchange the proxy cannot
	// relay.
	ErrClientSASL = clientsasl.ErrNotRelayed
	// ErrClientAuth closes a client that the proxy's client
	// authentication refused: bad credentials, a request before
	// authentication, a session that expired.
	ErrClientAuth = errors.New("client authentication")
	// ErrDenied closes a client whose acks=0 Produce the ACLs refused in
	// part or whole: it expects no answer, so Kafka closes the
	// connection to tell it.
	ErrDenied = errors.New("denied by the ACLs")
	// ErrShutdown closes a client when the proxy shuts down.
	ErrShutdown = proxyerr.Shutdown

	// ErrIdleTimeout closes a client connection that had nothing in
	// flight and sent nothing for the idle timeout.
	ErrIdleTimeout = errors.New("idle timeout")
	// ErrReadTimeout closes a client whose request did not arrive whole
	// within the read timeout after its first byte (a slow drip).
	ErrReadTimeout = errors.New("read timeout")
	// ErrWriteTimeout closes a client that accepted no byte of a response
	// within the write timeout: it stopped reading.
	ErrWriteTimeout = errors.New("write timeout")
	// ErrMemory closes a client whose request or response cannot be held
	// within the memory budget (--max-memory): larger than the budget
	// can ever hold for it, or a response that found no memory for the
	// response wait.
	ErrMemory = proxyerr.Memory

	errClientClosed = errors.New("client closed the connection")
	// errClientEOF: the client closed its side of the connection (a
	// half-close ends a pipeline). Unlike the other kinds of
	// errClientClosed, whose socket is gone, the client may still read:
	// what it is owed is written before the proxy closes its own side.
	errClientEOF  = fmt.Errorf("%w", errClientClosed)
	errClientRead = errors.New("client read")
	// Kinds of ErrUpstreamProtocol, told apart in metrics.
	errUnknownCorrelation = proxyerr.UnknownCorrelation
	errUnsolicited        = proxyerr.Unsolicited
	errEOFDrain           = errors.New("requests sent before the client closed did not complete in time")
	errTooManyConns       = errors.New("max-connections reached")
	// errUnknownNode: a name asks for a node the upstream never
	// advertised.
	errUnknownNode = errors.New("no such node advertised by the upstream")
	// errUpstreamIdleClose: the upstream closed a connection that had
	// nothing in flight; wrapped in ErrUpstreamFailed.
	errUpstreamIdleClose = proxyerr.UpstreamIdleClose
	// errBrokerDown: the single topology's view holds a broker down
	// after a failed dial.
	errBrokerDown = proxyerr.BrokerDown
	// errStranded: a request's body was to be spliced behind its head,
	// but the connection stopped forwarding first (a failed upstream
	// write, a failed acks=0 write); the client stream is mid-frame.
	errStranded = fmt.Errorf("%w: a request body could not follow its head", ErrUpstreamFailed)
)

// oneLine joins errs on one line (proxyerr.OneLine).
var oneLine = proxyerr.OneLine

// stranger is a *wire.NotKafkaError said for the reader of the log: what
// the bytes were and what to do, since a frame limit named instead
// invites raising it.
type stranger struct {
	err error // the *wire.NotKafkaError
	msg string
}

func (s *stranger) Error() string { return s.msg }
func (s *stranger) Unwrap() error { return s.err }

// strangerOnListener says what a client sent to a plaintext Kafka
// listener that is another protocol. err wraps a *wire.NotKafkaError.
func strangerOnListener(err error) error {
	nk, _ := errors.AsType[*wire.NotKafkaError](err)
	switch {
	case nk == nil:
		return err
	case nk.Protocol == wire.HTTPRequest:
		return &stranger{err, httpOnKafkaPort(nk)}
	case nk.Protocol == wire.TLSHandshake:
		return &stranger{err, "a TLS ClientHello on a plaintext listener: the client uses TLS; enable --tls-cert and --tls-key, or connect without TLS"}
	}
	return &stranger{err, "the client sent " + nk.Error()}
}

func httpOnKafkaPort(nk *wire.NotKafkaError) string {
	return "an HTTP request (" + nk.Method + ") on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)"
}

// strangerFromUpstream says what an upstream answered that is another
// protocol: --upstream names something other than a plaintext Kafka
// listener. err wraps a *wire.NotKafkaError.
func strangerFromUpstream(err error) error {
	nk, _ := errors.AsType[*wire.NotKafkaError](err)
	switch {
	case nk == nil:
		return err
	case nk.Protocol == wire.TLSAlert, nk.Protocol == wire.TLSHandshake:
		return &stranger{err, "the upstream answered with " + strings.TrimSuffix(nk.Error(), ", not a Kafka frame") + ": it speaks TLS; dial it with --upstream-tls"}
	case nk.Protocol == wire.HTTPResponse:
		return &stranger{err, "the upstream answered HTTP: the address is not a Kafka listener"}
	}
	return &stranger{err, "the upstream answered " + nk.Error()}
}
