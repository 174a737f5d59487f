// Package proxyerr holds the sentinel errors that the proxy and the single
// topology's package both return, so that errors.Is matches one value
// whichever returned it. The proxy exports each under its own name
// (proxy.ErrUpstreamFailed is UpstreamFailed).
package proxyerr

import (
	"errors"
	"slices"
	"strings"
)

var (
	// NotAllowed: the upstream advertised a node whose address is
	// outside allow-upstream; the proxy neither dials it nor listens for
	// it.
	NotAllowed = errors.New("upstream address not allowed")
	// UpstreamFailed closes a client whose upstream connection failed:
	// refused, reset, or closed.
	UpstreamFailed = errors.New("upstream failed")
	// UpstreamProtocol closes a client whose upstream sent a response
	// the proxy cannot match or parse.
	UpstreamProtocol = errors.New("upstream protocol violation")
	// UpstreamAuth closes a client when the upstream refused the
	// proxy's own SASL credentials, or while the proxy backs off after
	// such a refusal.
	UpstreamAuth = errors.New("upstream authentication failed")
	// Shutdown closes a client when the proxy shuts down.
	Shutdown = errors.New("proxy shutting down")
	// Memory closes a client whose request or response does not fit
	// within the memory budget (--max-memory).
	Memory = errors.New("memory budget")

	// Kinds of UpstreamProtocol, told apart in metrics.
	UnknownCorrelation = errors.New("unexpected correlation id")
	Unsolicited        = errors.New("bytes with no request in flight")
	// UpstreamIdleClose: the upstream closed a connection that had
	// nothing in flight; wrapped in UpstreamFailed.
	UpstreamIdleClose = errors.New("the upstream closed the connection while it was idle")
	// BrokerDown: the last dial to a broker failed, or it stalled, and
	// its backoff has not ended, so none is tried.
	BrokerDown = errors.New("broker down: the last dial to it failed, or it stalled")
	// BrokerStalled: a broker left a request unanswered past its own
	// timeout, or did not answer a probe after that; wrapped in
	// UpstreamFailed.
	BrokerStalled = errors.New("broker stalled: it answered nothing past a request's own timeout")
)

// OneLine joins errs as errors.Join does for errors.Is and errors.As, but
// renders them on one line: a reason becomes a log attribute and a close
// reason, and a newline there splits one event over several lines. The
// same message from several addresses (every broker refusing alike) is
// said once. Nil errors are skipped; it returns nil if all are.
func OneLine(errs ...error) error {
	errs = slices.DeleteFunc(slices.Clone(errs), func(e error) bool { return e == nil })
	if len(errs) == 0 {
		return nil
	}
	return joined(errs)
}

type joined []error

func (j joined) Error() string {
	var msgs []string
	for _, e := range j {
		m := strings.Join(strings.FieldsFunc(e.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
		if !slices.Contains(msgs, m) {
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}

func (j joined) Unwrap() []error { return j }
