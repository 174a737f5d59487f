package audit

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/tlsconf"
)

// FromConfig builds the trail the configuration asks for: its sinks, its
// queue (c.AuditQueueBytes, reserved from b) and the Trail, with src
// naming its events. It returns nil, nil when no sink is configured.
func FromConfig(c *config.Config, src *Source, b *budget.Budget, m *Metrics, log *slog.Logger) (*Trail, error) {
	if !c.AuditEnabled() {
		return nil, nil
	}
	sinks, err := SinksFromConfig(c)
	if err != nil {
		return nil, err
	}
	q := NewQueue(QueueOptions{MaxBytes: c.AuditQueueBytes(), OnFull: OnFull(c.AuditOnFull), Budget: b, Metrics: m, Logger: log}, sinks...)
	return New(Options{DataPath: DataPath(c.AuditDataPath), Interval: c.AuditSummaryInterval, Source: src}, q), nil
}

// SinksFromConfig opens the sinks the configuration asks for. On an error
// it closes those it opened.
func SinksFromConfig(c *config.Config) ([]Sink, error) {
	var sinks []Sink
	fail := func(err error) ([]Sink, error) {
		for _, s := range sinks {
			s.Close()
		}
		return nil, err
	}
	if c.AuditFile != "" {
		f, err := NewFileSink(FileOptions{Path: c.AuditFile, MaxSize: c.AuditFileMaxSize, Keep: c.AuditFileKeep, Sync: c.AuditFileSync})
		if err != nil {
			return fail(fmt.Errorf("--audit-file: %w", err))
		}
		sinks = append(sinks, f)
	}
	if c.AuditStdout {
		sinks = append(sinks, NewStdoutSink())
	}
	if c.AuditKafkaTopic != "" {
		o, err := kafkaOptions(c)
		if err != nil {
			return fail(err)
		}
		k, err := NewKafkaSink(o)
		if err != nil {
			return fail(err)
		}
		sinks = append(sinks, k)
	}
	return sinks, nil
}

// kafkaOptions reads the Kafka sink's cluster settings; an error names the
// flag at fault, the upstream's when the sink borrows them.
func kafkaOptions(c *config.Config) (KafkaOptions, error) {
	k := c.AuditKafka()
	o := KafkaOptions{Topic: c.AuditKafkaTopic, Bootstrap: k.Bootstrap}
	if len(o.Bootstrap) == 0 {
		return o, errors.New("--audit-kafka-topic: no cluster to produce to: set --audit-kafka-bootstrap (or --upstream)")
	}
	prefix := "--audit-kafka-"
	if k.TLSFromUpstream {
		prefix = "--upstream-"
	}
	if k.TLS {
		cfg, err := tlsconf.Upstream(tlsconf.UpstreamOptions{CA: k.CA, InsecureSkipVerify: k.InsecureSkip, CAFlag: prefix + "tls-ca"})
		if err != nil {
			return o, err
		}
		if k.Cert != "" {
			pair, err := tls.LoadX509KeyPair(k.Cert, k.Key)
			if err != nil {
				return o, fmt.Errorf("%stls-cert %q and %stls-key %q do not load: %w", prefix, k.Cert, prefix, k.Key, err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		o.TLS = cfg
	}
	if k.SASLMechanism != "" {
		prefix := "--audit-kafka-"
		if k.SASLFromUpstream {
			prefix = "--upstream-"
		}
		m, err := NewSASL(SASLOptions{Mechanism: k.SASLMechanism, Username: k.SASLUsername, PasswordFile: k.SASLPassword,
			PasswordEnv: k.SASLPasswordEnv, TokenFile: k.SASLTokenFile})
		if err != nil {
			return o, fmt.Errorf("%ssasl-mechanism %s: %w", prefix, k.SASLMechanism, err)
		}
		o.SASL = m
	}
	return o, nil
}
