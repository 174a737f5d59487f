package quota

import "errors"

// The errors of the package, for errors.Is.
var (
	// ErrInvalid is wrapped by every fault of the quotas list
	// (*ParseError).
	ErrInvalid = errors.New("invalid quotas")
	// ErrTooManyConnections: the address already has its most connections
	// open (max.connections.per.ip, or its override); Kafka closes the new
	// one at once.
	ErrTooManyConnections = errors.New("too many connections from this address")
	// ErrTooManyUserConnections: the user already has the max_connections
	// of its entity open.
	ErrTooManyUserConnections = errors.New("too many connections for this user")
)
