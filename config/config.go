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
	"strings"
	"time"

	"github.com/inorder-proxy/inorder/quota"
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
	// Topology is how clients reach each broker through the proxy: a
	// listener per broker (TopologyPorts), one TLS port where the server
	// name picks the broker (TopologySNI), or the whole cluster as one
	// broker (TopologySingle). Empty means TopologyPorts.
	Topology Topology
	// SNIBootstrap is the server name of the bootstrap with TopologySNI.
	// Empty: none; TopologySNI requires it, and no other topology takes it.
	SNIBootstrap string
	// SNINodePattern names the brokers with TopologySNI: a DNS name with
	// {id} where the node id goes. Empty: none; TopologySNI requires it.
	SNINodePattern string
	// SNIControllerPattern names the KRaft controllers with TopologySNI
	// and ExposeControllers, as SNINodePattern names the brokers. Empty:
	// none, which ExposeControllers with TopologySNI refuses.
	SNIControllerPattern string
	// AdvertisedPort is the port written into every broker address with
	// TopologySNI or TopologySingle, for a load balancer in front that
	// listens on another port. Zero means Listen's port.
	AdvertisedPort int
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

	// MaxMemory bounds the request and response bytes and the per-request
	// state the proxy holds across every connection. When it is reached,
	// connections stop being read until memory is released. A frame that
	// must be held whole and is larger than the budget can hold for it
	// closes its connection. Zero means the default, 1GiB; at least
	// MinMemory otherwise.
	MaxMemory int64
	// MaxConnections bounds the client connections open at once over all
	// listeners; past it a new connection is closed at once. Zero means
	// the default, 10000.
	MaxConnections int
	// MaxConnectionsPerIP bounds the client connections one address may
	// have open at once, as Kafka's max.connections.per.ip; past it a new
	// connection from that address is closed at once. Zero means no cap.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides caps the addresses it names in place of
	// MaxConnectionsPerIP, as Kafka's max.connections.per.ip.overrides; a
	// cap of 0 refuses every connection from its address. Nil overrides
	// nothing.
	MaxConnectionsPerIPOverrides IPCaps
	// Quotas are Kafka's client quotas and connection caps by entity, the
	// `quotas:` list of the config file (the one setting with no flag; see
	// package quota). Nil sets none.
	Quotas *quota.Config
	// IdleTimeout closes a client connection that has nothing in flight
	// and has sent nothing for this long, as Kafka's
	// connections.max.idle.ms does. Zero disables it.
	IdleTimeout time.Duration
	// ReadTimeout is how long a request frame whose first byte has
	// arrived may take to arrive whole. Zero disables it.
	ReadTimeout time.Duration
	// WriteTimeout is how long a response may wait for the client to
	// accept any of its bytes before the connection is closed, so that a
	// client that stops reading cannot hold memory and an upstream
	// connection for ever. Zero disables it.
	WriteTimeout time.Duration
	// ExposeControllers opens listeners that relay to the KRaft
	// controllers named in responses (DescribeQuorum, DescribeCluster for
	// controllers). False (the default) opens none and leaves those
	// endpoints unreachable through the proxy.
	ExposeControllers bool
	// AllowUpstream lists the hosts ("kafka-1.internal"), domain patterns
	// ("*.kafka.internal") and CIDR ranges ("10.0.0.0/8") that broker
	// addresses advertised by the upstream must match before the proxy
	// dials them or opens a listener for them. Empty allows any address.
	AllowUpstream []string
	// LogFormat is text or json (slog's handlers). Empty means text.
	LogFormat string
	// AdminListen is the HOST:PORT of the admin HTTP endpoint (/metrics,
	// /healthz, /readyz). Empty serves none and records no metrics.
	AdminListen string
	// AdminPprof mounts /debug/pprof/ on the admin endpoint. False leaves
	// it out.
	AdminPprof bool
	// APIVersionCap caps the version of an API key advertised to clients
	// (ApiVersions), for example Fetch at 15, whose responses cannot carry
	// broker addresses and are streamed to the client unread. A cap below
	// the upstream's minimum for a key hides the key. Nil caps nothing.
	APIVersionCap VersionCaps

	Security
	Audit
	// Verify watches the upstream's answers for ordering violations and
	// counts them (responses out of request order, Produce base offsets
	// out of write order, sequence number errors). False (the default)
	// watches nothing and costs nothing.
	Verify bool
	// Report is the file the verifier's findings are written to at exit:
	// JUnit XML when the name ends in .xml, JSON otherwise. Empty writes
	// none. It requires Verify.
	Report string
	// FailOnViolation makes the process exit with status 3 at shutdown
	// when the verifier saw any violation. It requires Verify.
	FailOnViolation bool
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:           "127.0.0.1:9092",
		UpstreamOrdering: OrderingNone,
		Topology:         TopologyPorts,
		MaxInFlight:      512,
		MaxBufferedBytes: 128 << 20,
		MaxRequestSize:   100 << 20,
		MaxResponseSize:  256 << 20,
		DialTimeout:      10 * time.Second,
		ShutdownGrace:    15 * time.Second,
		LogLevel:         "info",
		MaxMemory:        1 << 30,
		MaxConnections:   10000,
		IdleTimeout:      10 * time.Minute,
		ReadTimeout:      30 * time.Second,
		WriteTimeout:     30 * time.Second,
		LogFormat:        "text",
		Audit: Audit{
			AuditFileMaxSize:     100 << 20,
			AuditFileKeep:        5,
			AuditFileSync:        time.Second,
			AuditDataPath:        AuditDataPathSummary,
			AuditSummaryInterval: time.Minute,
			AuditOnFull:          AuditOnFullBlock,
		},
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
		return invalid("listen", c.Listen, "is not HOST:PORT (like 127.0.0.1:9092, or :9092 for every interface)")
	}
	lport, err := strconv.Atoi(port)
	if err != nil || lport < 0 || lport > 65535 {
		return invalid("listen", c.Listen, "has no port between 0 and 65535 (0 picks a free one)")
	}
	for _, u := range c.Upstreams {
		if _, p, err := net.SplitHostPort(u); err != nil || p == "" {
			return invalid("upstream", u, "is not HOST:PORT (like kafka-1:9092)")
		}
	}
	if c.NodePortBase < 0 || c.NodePortBase > 65535 {
		return invalid("node-port-base", strconv.Itoa(c.NodePortBase), "is not a port between 0 and 65535 (0: the --listen port + 1)")
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
		return invalid("max-request-size", strconv.Itoa(int(c.MaxRequestSize)), "must be at least 64 bytes (Kafka's own default is 100MiB)")
	}
	if c.MaxResponseSize < 64 {
		return invalid("max-response-size", strconv.Itoa(int(c.MaxResponseSize)), "must be at least 64 bytes")
	}
	if c.DialTimeout < 0 {
		return invalid("dial-timeout", c.DialTimeout.String(), "must not be negative (0: no bound)")
	}
	if c.ShutdownGrace < 0 {
		return invalid("shutdown-grace", c.ShutdownGrace.String(), "must not be negative (0: close at once)")
	}
	if c.MaxMemory < 0 {
		return invalid("max-memory", strconv.FormatInt(c.MaxMemory, 10), "must not be negative")
	}
	if c.MaxMemory != 0 && c.MaxMemory < MinMemory {
		return invalid("max-memory", strconv.FormatInt(c.MaxMemory, 10), "must be at least 16MiB")
	}
	if c.MaxConnections < 0 {
		return invalid("max-connections", strconv.Itoa(c.MaxConnections), "must not be negative (0: the default, 10000)")
	}
	if c.MaxConnectionsPerIP < 0 {
		return invalid("max-connections-per-ip", strconv.Itoa(c.MaxConnectionsPerIP), "must not be negative (0: no cap)")
	}
	if c.IdleTimeout < 0 {
		return invalid("idle-timeout", c.IdleTimeout.String(), "must not be negative (0 disables it)")
	}
	if c.ReadTimeout < 0 {
		return invalid("read-timeout", c.ReadTimeout.String(), "must not be negative (0 disables it)")
	}
	if c.WriteTimeout < 0 {
		return invalid("write-timeout", c.WriteTimeout.String(), "must not be negative (0 disables it)")
	}
	for _, a := range c.AllowUpstream {
		if err := checkUpstreamPattern(a); err != "" {
			return invalid("allow-upstream", a, err)
		}
	}
	if err := c.validateTopology(); err != nil {
		return err
	}
	if _, err := c.SlogLevel(); err != nil {
		return invalid("log-level", c.LogLevel, "must be debug, info, warn or error")
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		return invalid("log-format", c.LogFormat, "must be text or json")
	}
	if c.AdminListen != "" {
		if _, p, err := net.SplitHostPort(c.AdminListen); err != nil || p == "" {
			return invalid("admin-listen", c.AdminListen, "is not HOST:PORT (like 127.0.0.1:9644; empty: no admin endpoint)")
		} else if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return invalid("admin-listen", c.AdminListen, "has no port between 0 and 65535 (0 picks a free one; empty: no admin endpoint)")
		}
	}
	if c.Report != "" && !c.Verify {
		return invalid("report", c.Report, "needs --verify")
	}
	if c.FailOnViolation && !c.Verify {
		return invalid("fail-on-violation", "true", "needs --verify")
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	return c.validateAudit()
}

// MinMemory is the smallest MaxMemory: the budget keeps an eighth for
// responses, so 16MiB leaves 2MiB, room for a streamed response's chunk
// (1MiB) beside the answers to pipelined writes, and the runtime's own
// memory (tens of MiB) dwarfs anything smaller.
const MinMemory = 16 << 20

// Memory returns the effective MaxMemory.
func (c *Config) Memory() int64 {
	if c.MaxMemory == 0 {
		return 1 << 30
	}
	return c.MaxMemory
}

// Connections returns the effective MaxConnections.
func (c *Config) Connections() int {
	if c.MaxConnections == 0 {
		return 10000
	}
	return c.MaxConnections
}

// checkUpstreamPattern returns why a an allow-upstream entry is unusable,
// or "" if it is a CIDR range, a *.domain pattern or a host name or IP.
func checkUpstreamPattern(a string) string {
	if strings.Contains(a, "/") {
		if _, _, err := net.ParseCIDR(a); err != nil {
			return "is not a CIDR range"
		}
		return ""
	}
	host := strings.TrimPrefix(a, "*.")
	if net.ParseIP(host) != nil && host == a {
		return ""
	}
	if host == "" || strings.ContainsAny(host, "*:/ ") || strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") {
		return "is not a host, *.domain pattern or CIDR range"
	}
	return ""
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
