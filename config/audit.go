package config

import (
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Audit data-path modes (AuditDataPath) and full-queue behaviours
// (AuditOnFull).
const (
	AuditDataPathOff     = "off"
	AuditDataPathSummary = "summary"
	AuditDataPathRequest = "request"

	AuditOnFullBlock = "block"
	AuditOnFullDrop  = "drop"
)

// EnvAuditKafkaSASLPassword is the environment variable the audit Kafka
// sink's SASL password is read from when no password file is given.
const EnvAuditKafkaSASLPassword = "INORDER_AUDIT_KAFKA_SASL_PASSWORD"

// Audit holds the audit trail's settings. Every sink is off at its zero
// value; with none set, nothing is recorded.
type Audit struct {
	// AuditFile is a file the trail is appended to as JSON lines. Empty:
	// no file.
	AuditFile string
	// AuditFileMaxSize is the size past which AuditFile is rotated to
	// AuditFile.1. Zero means the default, 100MiB.
	AuditFileMaxSize int64
	// AuditFileKeep is how many rotated files are kept. Zero means the
	// default, 5.
	AuditFileKeep int
	// AuditFileSync is how often AuditFile is synced to the disk (and at
	// every rotation and at stop). Zero means the default, 1s.
	AuditFileSync time.Duration
	// AuditStdout writes the trail to standard output as JSON lines.
	AuditStdout bool

	// AuditKafkaTopic is a topic the trail is produced to. Empty: none.
	AuditKafkaTopic string
	// AuditKafkaBootstrap is the audit cluster's bootstrap addresses.
	// Empty means the upstream, with the upstream's TLS and SASL settings
	// unless the audit ones are given.
	AuditKafkaBootstrap []string
	// AuditKafkaTLS dials the audit cluster with TLS, verified with the
	// system roots. Any other AuditKafkaTLS* field implies it.
	AuditKafkaTLS bool
	// AuditKafkaTLSCA is a PEM file of CAs replacing the system roots.
	AuditKafkaTLSCA string
	// AuditKafkaTLSCert and AuditKafkaTLSKey are the proxy's client
	// certificate towards the audit cluster.
	AuditKafkaTLSCert string
	AuditKafkaTLSKey  string
	// AuditKafkaSASLMechanism authenticates to the audit cluster: PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER. Empty: none (or the
	// upstream's, when AuditKafkaBootstrap is empty).
	AuditKafkaSASLMechanism string
	// AuditKafkaSASLUsername is the user for PLAIN and SCRAM.
	AuditKafkaSASLUsername string
	// AuditKafkaSASLPasswordFile holds the password, re-read at each
	// authentication. Empty means $INORDER_AUDIT_KAFKA_SASL_PASSWORD.
	AuditKafkaSASLPasswordFile string
	// AuditKafkaSASLTokenFile holds the OAUTHBEARER token, re-read at each
	// authentication.
	AuditKafkaSASLTokenFile string

	// AuditDataPath is how Produce, Fetch, OffsetCommit, TxnOffsetCommit
	// and EndTxn are recorded: off, summary (per connection and interval)
	// or request. Empty means summary.
	AuditDataPath string
	// AuditSummaryInterval is the interval of a data-path summary. Zero
	// means the default, 1m.
	AuditSummaryInterval time.Duration
	// AuditOnFull is what happens to an event when the queue is full:
	// block (the client whose event it is waits) or drop (the event is
	// counted and lost). Empty means block.
	AuditOnFull string
}

// AuditEnabled reports whether any sink is configured.
func (a *Audit) AuditEnabled() bool {
	return a.AuditFile != "" || a.AuditStdout || a.AuditKafkaTopic != ""
}

// AuditKafkaTLSEnabled reports whether the audit cluster is dialled with
// TLS by the audit settings.
func (a *Audit) AuditKafkaTLSEnabled() bool {
	return a.AuditKafkaTLS || a.AuditKafkaTLSCA != "" || a.AuditKafkaTLSCert != ""
}

// AuditQueueBytes is the most the audit queue holds: a sixteenth of
// MaxMemory, reserved from it.
func (c *Config) AuditQueueBytes() int64 { return c.Memory() / 16 }

// AuditKafkaCluster is where and how the Kafka sink connects, the
// defaults applied: the upstream's addresses when AuditKafkaBootstrap is
// empty, and then the upstream's TLS and SASL unless audit ones are set.
type AuditKafkaCluster struct {
	Bootstrap []string
	// TLS is off when false; CA, Cert and Key as the upstream's fields.
	TLS             bool
	CA, Cert, Key   string
	InsecureSkip    bool   // only from the upstream's settings
	ServerName      string // only from the upstream's settings
	SASLMechanism   string
	SASLUsername    string
	SASLPassword    string // the password file
	SASLPasswordEnv string
	SASLTokenFile   string
	// TLSFromUpstream and SASLFromUpstream say which settings were the
	// upstream's, for errors to name the right flags.
	TLSFromUpstream, SASLFromUpstream bool
}

// AuditKafka returns the Kafka sink's cluster settings.
func (c *Config) AuditKafka() AuditKafkaCluster {
	a, s := &c.Audit, &c.Security
	k := AuditKafkaCluster{Bootstrap: a.AuditKafkaBootstrap}
	same := len(a.AuditKafkaBootstrap) == 0
	if same {
		k.Bootstrap = c.Upstreams
	}
	switch {
	case a.AuditKafkaTLSEnabled():
		k.TLS, k.CA, k.Cert, k.Key = true, a.AuditKafkaTLSCA, a.AuditKafkaTLSCert, a.AuditKafkaTLSKey
	case same && s.UpstreamTLSEnabled():
		k.TLS, k.CA, k.Cert, k.Key = true, s.UpstreamTLSCA, s.UpstreamTLSCert, s.UpstreamTLSKey
		k.InsecureSkip, k.ServerName, k.TLSFromUpstream = s.UpstreamTLSInsecureSkipVerify, s.UpstreamTLSServerName, true
	}
	switch {
	case a.AuditKafkaSASLMechanism != "":
		k.SASLMechanism, k.SASLUsername = a.AuditKafkaSASLMechanism, a.AuditKafkaSASLUsername
		k.SASLPassword, k.SASLPasswordEnv, k.SASLTokenFile = a.AuditKafkaSASLPasswordFile, EnvAuditKafkaSASLPassword, a.AuditKafkaSASLTokenFile
	case same && s.UpstreamSASLMechanism != "":
		k.SASLMechanism, k.SASLUsername = s.UpstreamSASLMechanism, s.UpstreamSASLUsername
		k.SASLPassword, k.SASLPasswordEnv, k.SASLTokenFile = s.UpstreamSASLPasswordFile, EnvUpstreamSASLPassword, s.UpstreamSASLTokenFile
		k.SASLFromUpstream = true
	}
	return k
}

func bindAuditFlags(fs *pflag.FlagSet, a *Audit) {
	fs.StringVar(&a.AuditFile, "audit-file", a.AuditFile, "append the audit trail to this file as JSON lines (mode 0600)")
	fs.Var((*sizeValue)(&a.AuditFileMaxSize), "audit-file-max-size", "size past which --audit-file is rotated to FILE.1, FILE.2, ...")
	fs.IntVar(&a.AuditFileKeep, "audit-file-keep", a.AuditFileKeep, "rotated audit files kept")
	fs.DurationVar(&a.AuditFileSync, "audit-file-sync", a.AuditFileSync, "how often --audit-file is synced to the disk (also at rotation and stop)")
	fs.BoolVar(&a.AuditStdout, "audit-stdout", a.AuditStdout, "write the audit trail to standard output as JSON lines")
	fs.StringVar(&a.AuditKafkaTopic, "audit-kafka-topic", a.AuditKafkaTopic, "produce the audit trail to this topic (idempotent, acks=all, keyed by principal)")
	fs.Var((*listValue)(&a.AuditKafkaBootstrap), "audit-kafka-bootstrap", "the audit cluster's addresses HOST:PORT[,...] (default: the upstream, with its TLS and SASL)")
	fs.BoolVar(&a.AuditKafkaTLS, "audit-kafka-tls", a.AuditKafkaTLS, "dial the audit cluster with TLS, verified with the system roots (implied by every --audit-kafka-tls-* flag)")
	fs.StringVar(&a.AuditKafkaTLSCA, "audit-kafka-tls-ca", a.AuditKafkaTLSCA, "PEM CAs that verify the audit cluster instead of the system roots")
	fs.StringVar(&a.AuditKafkaTLSCert, "audit-kafka-tls-cert", a.AuditKafkaTLSCert, "PEM client certificate presented to the audit cluster")
	fs.StringVar(&a.AuditKafkaTLSKey, "audit-kafka-tls-key", a.AuditKafkaTLSKey, "PEM private key of --audit-kafka-tls-cert")
	fs.StringVar(&a.AuditKafkaSASLMechanism, "audit-kafka-sasl-mechanism", a.AuditKafkaSASLMechanism, "authenticate to the audit cluster: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	fs.StringVar(&a.AuditKafkaSASLUsername, "audit-kafka-sasl-username", a.AuditKafkaSASLUsername, "user for PLAIN and SCRAM towards the audit cluster")
	fs.StringVar(&a.AuditKafkaSASLPasswordFile, "audit-kafka-sasl-password-file", a.AuditKafkaSASLPasswordFile, "file holding the audit cluster's password, re-read at each authentication (default: $"+EnvAuditKafkaSASLPassword+")")
	fs.StringVar(&a.AuditKafkaSASLTokenFile, "audit-kafka-sasl-token-file", a.AuditKafkaSASLTokenFile, "file holding the OAUTHBEARER token for the audit cluster, re-read at each authentication")
	fs.StringVar(&a.AuditDataPath, "audit-data-path", a.AuditDataPath, "how Produce, Fetch, OffsetCommit, TxnOffsetCommit and EndTxn are audited: off, summary (per connection and interval) or request")
	fs.DurationVar(&a.AuditSummaryInterval, "audit-summary-interval", a.AuditSummaryInterval, "interval of a connection's data-path summary with --audit-data-path summary")
	fs.StringVar(&a.AuditOnFull, "audit-on-full", a.AuditOnFull, "when the audit queue is full: block (stop reading the clients whose events wait) or drop (count and lose the events)")
}

func (c *Config) validateAudit() error {
	a := &c.Audit
	switch a.AuditDataPath {
	case "", AuditDataPathOff, AuditDataPathSummary, AuditDataPathRequest:
	default:
		return invalid("audit-data-path", a.AuditDataPath, "must be off, summary or request")
	}
	switch a.AuditOnFull {
	case "", AuditOnFullBlock, AuditOnFullDrop:
	default:
		return invalid("audit-on-full", a.AuditOnFull, "must be block or drop")
	}
	if a.AuditFileMaxSize < 0 || (a.AuditFileMaxSize > 0 && a.AuditFileMaxSize < 4096) {
		return invalid("audit-file-max-size", strconv.FormatInt(a.AuditFileMaxSize, 10), "must be at least 4KiB")
	}
	if a.AuditFileKeep < 0 {
		return invalid("audit-file-keep", strconv.Itoa(a.AuditFileKeep), "must not be negative")
	}
	if a.AuditFileSync < 0 {
		return invalid("audit-file-sync", a.AuditFileSync.String(), "must not be negative")
	}
	if a.AuditSummaryInterval < 0 {
		return invalid("audit-summary-interval", a.AuditSummaryInterval.String(), "must not be negative")
	}
	for _, u := range a.AuditKafkaBootstrap {
		if _, p, err := net.SplitHostPort(u); err != nil || p == "" {
			return invalid("audit-kafka-bootstrap", u, "is not HOST:PORT (like kafka-1:9092)")
		}
	}
	if a.AuditKafkaTopic == "" {
		for _, f := range []struct{ name, value string }{
			{"audit-kafka-bootstrap", first(a.AuditKafkaBootstrap)},
			{"audit-kafka-tls-ca", a.AuditKafkaTLSCA},
			{"audit-kafka-tls-cert", a.AuditKafkaTLSCert},
			{"audit-kafka-tls-key", a.AuditKafkaTLSKey},
			{"audit-kafka-sasl-mechanism", a.AuditKafkaSASLMechanism},
		} {
			if f.value != "" {
				return invalid(f.name, f.value, "needs --audit-kafka-topic")
			}
		}
		if a.AuditKafkaTLS {
			return invalid("audit-kafka-tls", "true", "needs --audit-kafka-topic")
		}
	}
	if err := pair("audit-kafka-tls-cert", a.AuditKafkaTLSCert, "audit-kafka-tls-key", a.AuditKafkaTLSKey); err != nil {
		return err
	}
	if err := validateSASL("audit-kafka", a.AuditKafkaSASLMechanism, a.AuditKafkaSASLUsername, a.AuditKafkaSASLPasswordFile, a.AuditKafkaSASLTokenFile); err != nil {
		return err
	}
	for _, f := range []struct {
		name, path string
		secret     bool
	}{
		{"audit-kafka-tls-ca", a.AuditKafkaTLSCA, false},
		{"audit-kafka-tls-cert", a.AuditKafkaTLSCert, false},
		{"audit-kafka-tls-key", a.AuditKafkaTLSKey, true},
		{"audit-kafka-sasl-password-file", a.AuditKafkaSASLPasswordFile, true},
		{"audit-kafka-sasl-token-file", a.AuditKafkaSASLTokenFile, true},
	} {
		if err := checkFile(f.name, f.path, f.secret); err != nil {
			return err
		}
	}
	return nil
}

// first returns the first of list, or "".
func first(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}
