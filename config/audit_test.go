package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestAuditValidation(t *testing.T) {
	dir := t.TempDir()
	private := filepath.Join(dir, "private")
	os.WriteFile(private, []byte("pw"), 0o600)
	world := filepath.Join(dir, "world")
	os.WriteFile(world, []byte("pw"), 0o644)
	cert := filepath.Join(dir, "cert.pem")
	os.WriteFile(cert, []byte("pem"), 0o644)
	for _, tc := range []struct {
		name string
		set  func(a *Audit)
		want []string // substrings of the error; nil: valid
	}{
		{"defaults", func(*Audit) {}, nil},
		{"data path request", func(a *Audit) { a.AuditDataPath = "request" }, nil},
		{"data path bad", func(a *Audit) { a.AuditDataPath = "all" }, []string{`audit-data-path: "all" must be off, summary or request`}},
		{"on full drop", func(a *Audit) { a.AuditOnFull = "drop" }, nil},
		{"on full bad", func(a *Audit) { a.AuditOnFull = "wait" }, []string{`audit-on-full: "wait" must be block or drop`}},
		{"tiny rotation", func(a *Audit) { a.AuditFileMaxSize = 100 }, []string{"audit-file-max-size", "4KiB"}},
		{"negative keep", func(a *Audit) { a.AuditFileKeep = -1 }, []string{"audit-file-keep"}},
		{"negative sync", func(a *Audit) { a.AuditFileSync = -time.Second }, []string{"audit-file-sync"}},
		{"bad bootstrap", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaBootstrap = []string{"kafka"} }, []string{`audit-kafka-bootstrap: "kafka" is not HOST:PORT`}},
		{"bootstrap without topic", func(a *Audit) { a.AuditKafkaBootstrap = []string{"k:9092"} }, []string{"audit-kafka-bootstrap", "needs --audit-kafka-topic"}},
		{"tls without topic", func(a *Audit) { a.AuditKafkaTLS = true }, []string{"audit-kafka-tls", "needs --audit-kafka-topic"}},
		{"cert without key", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaTLSCert = cert }, []string{"audit-kafka-tls-cert", "needs --audit-kafka-tls-key"}},
		{"scram without user", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaSASLMechanism = MechanismScramSHA512 }, []string{"audit-kafka-sasl-username", "is required"}},
		{"user without mechanism", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaSASLUsername = "u" }, []string{"audit-kafka-sasl-username", "needs --audit-kafka-sasl-mechanism"}},
		{"unknown mechanism", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaSASLMechanism = "GSSAPI" }, []string{"audit-kafka-sasl-mechanism", "GSSAPI"}},
		{"oauth without token", func(a *Audit) { a.AuditKafkaTopic = "t"; a.AuditKafkaSASLMechanism = MechanismOAuthBearer }, []string{"audit-kafka-sasl-token-file"}},
		{"world-readable password", func(a *Audit) {
			a.AuditKafkaTopic, a.AuditKafkaSASLMechanism, a.AuditKafkaSASLUsername, a.AuditKafkaSASLPasswordFile = "t", MechanismPlain, "u", world
		}, []string{"audit-kafka-sasl-password-file", "other users"}},
		{"plain", func(a *Audit) {
			a.AuditKafkaTopic, a.AuditKafkaSASLMechanism, a.AuditKafkaSASLUsername, a.AuditKafkaSASLPasswordFile = "t", MechanismPlain, "u", private
		}, nil},
	} {
		c := Default()
		tc.set(&c.Audit)
		err := c.Validate()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want %q in it", tc.name, err, w)
			}
		}
	}
}

// TestAuditFromFile checks that every audit setting is a YAML key of its
// flag's name.
func TestAuditFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte(`audit-file: /var/log/inorder/audit.log
audit-file-max-size: 10MiB
audit-file-keep: 3
audit-file-sync: 250ms
audit-stdout: true
audit-kafka-topic: audit
audit-kafka-bootstrap: [a:9092, b:9092]
audit-data-path: request
audit-summary-interval: 30s
audit-on-full: drop
`), 0o600)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var ignored Config
	BindFlags(fs, &ignored)
	fs.String(FlagConfig, "", "")
	fs.Parse([]string{"--config", file, "--audit-on-full", "block"})
	c, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	a := c.Audit
	if a.AuditFile != "/var/log/inorder/audit.log" || a.AuditFileMaxSize != 10<<20 || a.AuditFileKeep != 3 || a.AuditFileSync != 250*time.Millisecond ||
		!a.AuditStdout || a.AuditKafkaTopic != "audit" || !slices.Equal(a.AuditKafkaBootstrap, []string{"a:9092", "b:9092"}) ||
		a.AuditDataPath != "request" || a.AuditSummaryInterval != 30*time.Second || a.AuditOnFull != "block" || !a.AuditEnabled() {
		t.Errorf("%+v", a)
	}
}

// TestAuditKafkaDefaults checks where the Kafka sink connects: the
// upstream with its TLS and SASL by default; its own settings win; a
// cluster of its own inherits nothing.
func TestAuditKafkaDefaults(t *testing.T) {
	c := Default()
	c.Upstreams = []string{"up:9093"}
	c.UpstreamTLSCA, c.UpstreamSASLMechanism, c.UpstreamSASLUsername = "/ca.pem", MechanismScramSHA256, "proxy"
	k := c.AuditKafka()
	if !slices.Equal(k.Bootstrap, c.Upstreams) || !k.TLS || k.CA != "/ca.pem" || !k.TLSFromUpstream ||
		k.SASLMechanism != MechanismScramSHA256 || k.SASLUsername != "proxy" || k.SASLPasswordEnv != EnvUpstreamSASLPassword || !k.SASLFromUpstream {
		t.Errorf("default: %+v", k)
	}
	c.AuditKafkaSASLMechanism, c.AuditKafkaSASLUsername = MechanismPlain, "auditor"
	if k := c.AuditKafka(); k.SASLUsername != "auditor" || k.SASLPasswordEnv != EnvAuditKafkaSASLPassword || k.SASLFromUpstream || !k.TLSFromUpstream {
		t.Errorf("own SASL: %+v", k)
	}
	c.AuditKafkaBootstrap = []string{"audit:9092"}
	c.AuditKafkaSASLMechanism = ""
	if k := c.AuditKafka(); !slices.Equal(k.Bootstrap, []string{"audit:9092"}) || k.TLS || k.SASLMechanism != "" {
		t.Errorf("own cluster: %+v", k)
	}
	if got := c.AuditQueueBytes(); got != 64<<20 {
		t.Errorf("queue bytes at 1GiB: %d", got)
	}
}
