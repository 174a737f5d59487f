// Package config holds the proxy's settings: one Config struct whose zero
// values are documented, Default and Validate beside it, and the binding of
// every field to a command-line flag and a YAML key of the same name.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// Ordering says what the proxy may assume about the upstream's ordering.
type Ordering string

const (
	// OrderingNone assumes nothing: a write is forwarded once every earlier
	// write to the same partition has been acknowledged, and every other
	// request waits for all earlier ones and completes before the next.
	OrderingNone Ordering = "none"
	// OrderingConnection trusts the upstream to process one connection's
	// requests in order, as Apache Kafka does: everything pipelines.
	OrderingConnection Ordering = "connection"
)

// Config is the proxy's configuration. Use Default to start from working
// values; the zero value of each field is described beside it.
type Config struct {
	// Listen is the bootstrap listener, HOST:PORT. Port 0 picks a free port
	// and makes every node listener pick one too.
	Listen string
	// Upstreams are the backend's bootstrap addresses, tried in order.
	Upstreams []string
	// AdvertisedHost is the host written into rewritten addresses. Empty
	// means the listen host, or the machine's hostname when the listen host
	// is unspecified (0.0.0.0 or ::).
	AdvertisedHost string
	// NodePortBase is the port of node 0's listener; node N listens on
	// NodePortBase+N. Zero means the bootstrap port plus one.
	NodePortBase int
	// UpstreamOrdering is the ordering mode. Empty means OrderingNone.
	UpstreamOrdering Ordering
	// MaxInFlight bounds the requests one connection may have between
	// being read and their response being written. Past it the proxy stops
	// reading from that client.
	MaxInFlight int
	// MaxBufferedBytes bounds the request and response bytes one connection
	// may hold; a single request larger than it is still taken when the
	// connection holds nothing else.
	MaxBufferedBytes int64
	// MaxRequestSize is the largest request frame accepted from a client;
	// a larger length prefix closes the connection before any allocation.
	MaxRequestSize int32
	// MaxResponseSize is the largest response frame accepted from the
	// upstream.
	MaxResponseSize int32
	// DialTimeout bounds connecting to the upstream. Zero means no bound.
	DialTimeout time.Duration
	// ShutdownGrace is how long in-flight responses may take to drain on
	// SIGINT or SIGTERM before connections are closed. Zero closes at once.
	ShutdownGrace time.Duration
	// LogLevel is debug, info, warn or error. Empty means info.
	LogLevel string
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:           "127.0.0.1:9092",
		UpstreamOrdering: OrderingNone,
		MaxInFlight:      512,
		MaxBufferedBytes: 128 << 20,
		MaxRequestSize:   100 << 20,
		MaxResponseSize:  256 << 20,
		DialTimeout:      10 * time.Second,
		ShutdownGrace:    15 * time.Second,
		LogLevel:         "info",
	}
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid configuration")

// FieldError names the field and value that failed validation.
type FieldError struct {
	Field  string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return e.Field + " " + e.Reason
	}
	return fmt.Sprintf("%s: %q %s", e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Reason: reason}
}

// Validate reports the first field that cannot work, naming it and its value.
// It does not require Upstreams: commands that embed a backend fill it later.
func (c *Config) Validate() error {
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return invalid("listen", c.Listen, "is not HOST:PORT")
	}
	lport, err := strconv.Atoi(port)
	if err != nil || lport < 0 || lport > 65535 {
		return invalid("listen", c.Listen, "has no valid port")
	}
	for _, u := range c.Upstreams {
		if _, p, err := net.SplitHostPort(u); err != nil || p == "" {
			return invalid("upstream", u, "is not HOST:PORT")
		}
	}
	if c.NodePortBase < 0 || c.NodePortBase > 65535 {
		return invalid("node-port-base", strconv.Itoa(c.NodePortBase), "is not a port")
	}
	switch c.UpstreamOrdering {
	case "", OrderingNone, OrderingConnection:
	default:
		return invalid("upstream-ordering", string(c.UpstreamOrdering), "must be none or connection")
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<20 {
		return invalid("max-in-flight", strconv.Itoa(c.MaxInFlight), "must be between 1 and 1048576")
	}
	if c.MaxBufferedBytes < 1 {
		return invalid("max-buffered-bytes", strconv.FormatInt(c.MaxBufferedBytes, 10), "must be positive")
	}
	if c.MaxRequestSize < 64 {
		return invalid("max-request-size", strconv.Itoa(int(c.MaxRequestSize)), "must be at least 64")
	}
	if c.MaxResponseSize < 64 {
		return invalid("max-response-size", strconv.Itoa(int(c.MaxResponseSize)), "must be at least 64")
	}
	if c.DialTimeout < 0 {
		return invalid("dial-timeout", c.DialTimeout.String(), "must not be negative")
	}
	if c.ShutdownGrace < 0 {
		return invalid("shutdown-grace", c.ShutdownGrace.String(), "must not be negative")
	}
	if _, err := c.SlogLevel(); err != nil {
		return invalid("log-level", c.LogLevel, "must be debug, info, warn or error")
	}
	return nil
}

// Ordering returns the effective ordering mode.
func (c *Config) Ordering() Ordering {
	if c.UpstreamOrdering == "" {
		return OrderingNone
	}
	return c.UpstreamOrdering
}

// SlogLevel returns LogLevel as a slog level.
func (c *Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if c.LogLevel == "" {
		return slog.LevelInfo, nil
	}
	err := l.UnmarshalText([]byte(c.LogLevel))
	return l, err
}
