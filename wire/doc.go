// Package wire reads Kafka frames and the request and response headers that
// the proxy must understand on every message, without decoding bodies.
//
// A frame is the 4-byte big-endian length prefix and the message after it;
// the proxy keeps frames whole so that it can patch a correlation id in place
// and forward the same bytes it read. Lengths are checked against a limit
// before anything is allocated, a frame's buffer grows as its bytes arrive
// (a length prefix alone allocates nothing large, and an Account can charge
// every growth to a wider bound before it happens), and frame buffers come
// from size-classed pools so that steady forwarding allocates nothing
// proportional to records.
//
// Header rules (Kafka protocol, "Request header" / "Response header"): the
// client id is a nullable non-compact string even in flexible headers, and
// tagged fields follow it only for flexible versions; an ApiVersions response
// header is always version 0.
package wire
