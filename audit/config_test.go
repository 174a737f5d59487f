package audit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/testcerts"
)

// TestFromConfig builds a trail from the settings, a file and a Kafka
// cluster of its own over TLS with SCRAM, records through it and finds
// every event in both.
func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("audit-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("127.0.0.1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.WriteCA(dir, "ca")
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, auditTopic), kfake.ListenFn(loopback),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "auditor", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)

	cfg := config.Default()
	cfg.AuditFile = filepath.Join(dir, "audit.log")
	cfg.AuditKafkaTopic = auditTopic
	cfg.AuditKafkaBootstrap = c.ListenAddrs()
	cfg.AuditKafkaTLSCA = caFile
	cfg.AuditKafkaSASLMechanism, cfg.AuditKafkaSASLUsername, cfg.AuditKafkaSASLPasswordFile = config.MechanismScramSHA256, "auditor", pw
	cfg.AuditDataPath = config.AuditDataPathRequest
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := budget.New(cfg.Memory())
	tr, err := FromConfig(&cfg, NewSource("test"), b, NewMetrics(prometheus.NewRegistry()), nil)
	if err != nil {
		t.Fatal(err)
	}
	conns := openConns(tr, 2)
	for i := range 20 {
		if err := recordEvent(context.Background(), tr, conns, i); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(t, cfg.AuditFile)); n != 20 {
		t.Errorf("file holds %d events", n)
	}
	if b.Used() != 0 {
		t.Errorf("budget used %d after the stop", b.Used())
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(auditTopic),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(scram.Auth{User: "auditor", Pass: "s3cret"}.AsSha256Mechanism()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < 20 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of 20 events on the topic", got)
		}
		got += fs.NumRecords()
	}
}

// TestFromConfigErrorsNameTheFlag checks that a Kafka sink whose secret
// cannot be read is refused naming the flag, never the secret.
func TestFromConfigErrorsNameTheFlag(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = []string{"127.0.0.1:1"}
	cfg.AuditKafkaTopic = "audit"
	cfg.UpstreamSASLMechanism, cfg.UpstreamSASLUsername = config.MechanismPlain, "proxy"
	t.Setenv(config.EnvUpstreamSASLPassword, "")
	_, err := FromConfig(&cfg, nil, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "--upstream-sasl-mechanism PLAIN") || !strings.Contains(err.Error(), config.EnvUpstreamSASLPassword) {
		t.Errorf("borrowed SASL without a secret: %v", err)
	}
	cfg.AuditKafkaBootstrap = []string{"127.0.0.1:1"}
	cfg.AuditKafkaSASLMechanism, cfg.AuditKafkaSASLUsername = config.MechanismScramSHA512, "a"
	cfg.AuditKafkaSASLPasswordFile = filepath.Join(t.TempDir(), "absent")
	_, err = FromConfig(&cfg, nil, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "--audit-kafka-sasl-mechanism SCRAM-SHA-512") || !strings.Contains(err.Error(), "absent") {
		t.Errorf("own SASL without a secret: %v", err)
	}
	t.Setenv(config.EnvAuditKafkaSASLPassword, "topsecret")
	cfg.AuditKafkaSASLPasswordFile = ""
	tr, err := FromConfig(&cfg, nil, nil, nil, nil)
	if err != nil {
		t.Fatalf("password from the environment: %v", err)
	}
	tr.Shutdown(context.Background())
}
