// Package hostile provides Kafka backends that break the protocol's
// contract on purpose, for tests of the proxy and for `inorder bench broker
// --misbehave`, which lets a user see a gate fail.
//
// Every backend is a TCP server (on a free loopback port unless its config
// names one) in front of its own one-broker kfake cluster. The cluster
// advertises the backend's address, not its own, in every response that
// names a broker (Metadata, FindCoordinator, DescribeCluster, ...), so a
// client that bootstraps from the backend keeps talking to the backend
// instead of slipping past it to the honest kfake. KfakeAddr gives the honest address when a test needs
// it; note that the cluster behind it still advertises the backend.
//
// The Reorderer answers pipelined requests concurrently and in completion
// order, the violation the proxy exists to hide. The Fault backends answer
// a fixed number of requests per connection and then fail in one
// particular way, for the proxy's upstream-failure paths. KafkaSASL is
// honest and answers refused SASL credentials as Apache Kafka does, where
// kfake just closes the connection.
//
// Relay is no backend: a TCP relay to put in front of any broker, which
// resets, stalls, delays or becomes a black hole on command.
//
// Request keys that kmsg does not know close the client connection rather
// than reach kfake, which would panic the test binary on them.
package hostile

import "errors"

var (
	// ErrBadFrame means a client sent a frame the backend cannot parse:
	// a length prefix out of range or a truncated header or body.
	ErrBadFrame = errors.New("hostile: malformed request frame")
	// ErrUnknownKey means a client sent an API key kmsg does not know.
	ErrUnknownKey = errors.New("hostile: unknown api key")
)
