package wire

import (
	"encoding/binary"
	"fmt"
)

// Protocol is another protocol whose first bytes can arrive where a Kafka
// length prefix is expected.
type Protocol int

const (
	// HTTPRequest: an HTTP/1 request line or the HTTP/2 preface ("PRI ").
	HTTPRequest Protocol = iota + 1
	// HTTPResponse: an HTTP/1 status line ("HTTP/1.1 400 ...").
	HTTPResponse
	// TLSHandshake: a TLS handshake record, as a ClientHello or a
	// ServerHello starts.
	TLSHandshake
	// TLSAlert: a TLS alert record, as a TLS server sends to bytes that
	// are not a handshake.
	TLSAlert
)

// NotKafkaError is the error of a length prefix that reads as the start of
// another protocol. Such a prefix is always out of range at Kafka's
// limits (an HTTP method is over 1 GiB, a TLS record header over 350 MiB),
// so it is refused anyway; the error says what it is instead, since a
// limit named there invites raising it.
type NotKafkaError struct {
	Protocol Protocol
	// Method is an HTTP request's method, as far as the 4 bytes give it
	// ("GET", "POST", "DELE" for DELETE).
	Method string
	// Length is the prefix read as a length.
	Length uint32
}

func (e *NotKafkaError) Error() string {
	switch e.Protocol {
	case HTTPRequest:
		return fmt.Sprintf("an HTTP request (%s), not a Kafka frame", e.Method)
	case HTTPResponse:
		return "an HTTP response, not a Kafka frame"
	case TLSHandshake:
		return "a TLS handshake record, not a Kafka frame"
	case TLSAlert:
		return "a TLS alert, not a Kafka frame"
	}
	return fmt.Sprintf("frame length %d, not a Kafka frame", e.Length)
}

// Is makes errors.Is(err, ErrNotKafka) match.
func (e *NotKafkaError) Is(target error) bool { return target == ErrNotKafka }

// httpMethods are the first 4 bytes of the HTTP requests that reach a
// Kafka port by mistake: the methods of RFC 9110 and PATCH, and the HTTP/2
// connection preface.
var httpMethods = map[string]string{
	"GET ": "GET", "HEAD": "HEAD", "POST": "POST", "PUT ": "PUT",
	"DELE": "DELETE", "OPTI": "OPTIONS", "PATC": "PATCH", "CONN": "CONNECT",
	"TRAC": "TRACE", "PRI ": "HTTP/2",
}

// Sniff returns what other protocol prefix starts, or nil if it may be a
// Kafka length prefix.
func Sniff(prefix [4]byte) *NotKafkaError {
	e := &NotKafkaError{Length: binary.BigEndian.Uint32(prefix[:])}
	switch {
	case httpMethods[string(prefix[:])] != "":
		e.Protocol, e.Method = HTTPRequest, httpMethods[string(prefix[:])]
	case string(prefix[:]) == "HTTP":
		e.Protocol = HTTPResponse
	// A TLS record header: content type, then version 3.x (SSL 3.0 to
	// TLS 1.3, whose records say 3.1 or 3.3).
	case prefix[0] == 0x16 && prefix[1] == 3 && prefix[2] <= 4:
		e.Protocol = TLSHandshake
	case prefix[0] == 0x15 && prefix[1] == 3 && prefix[2] <= 4:
		e.Protocol = TLSAlert
	default:
		return nil
	}
	return e
}
