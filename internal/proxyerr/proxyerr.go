// Package proxyerr holds the sentinel errors that the proxy and the single
// topology's package both return, so that errors.Is matches one value
// whichever returned it. The proxy exports each under its own name
// (proxy.ErrUpstreamFailed is UpstreamFailed).
package proxyerr

import "errors"

var (
	// NotAllowed: the upstream advertised a node whose address is
	// outside allow-upstream; the proxy neither dials it nor listens for
	// it.
	NotAllowed = errors.New("upstream address not allowed")
	// UpstreamFailed closes a client whose upstream connection failed:
	// refused, reset, or closed.
	UpstreamFailed = errors.New("upstream failed")
)
