package audit

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaOptions configure a KafkaSink. The zero value of each field is
// described beside it.
type KafkaOptions struct {
	// Topic receives the events. Required; the sink does not create it.
	Topic string
	// Bootstrap are the cluster's addresses. Required.
	Bootstrap []string
	// TLS dials the cluster with TLS. Nil dials in plaintext.
	TLS *tls.Config
	// SASL authenticates to the cluster. Nil authenticates not.
	SASL sasl.Mechanism
	// Linger is how long a batch waits for more events before it is sent.
	// Zero means 5ms: events arrive one at a time from many connections,
	// and a short linger makes one produce request of many.
	Linger time.Duration
	// Opts are further client options, after the sink's own.
	Opts []kgo.Opt
}

// KafkaSink produces events to a Kafka topic with franz-go: idempotent
// (kgo's default), acks from every in-sync replica, each record keyed by
// its principal so that one principal's events stay in order in one
// partition. The record's value is the event's JSON object (without the
// newline) with a content-type header of application/json.
//
// A record is retried by the client for as long as it takes (no delivery
// timeout), so that a cluster that goes away and comes back loses nothing
// and, thanks to idempotence, duplicates nothing; meanwhile the write
// waits, the queue fills and /readyz reports the sink stalled (see
// QueueOptions.StallAfter). A record the client fails (the topic does not
// exist, authorization) is written again by the queue after a backoff.
type KafkaSink struct {
	cl *kgo.Client
}

var contentType = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}

// NewKafkaSink returns a sink producing to o.Topic. It does not dial until
// the first write.
func NewKafkaSink(o KafkaOptions) (*KafkaSink, error) {
	if o.Topic == "" {
		return nil, errors.New("audit kafka: no topic")
	}
	if len(o.Bootstrap) == 0 {
		return nil, errors.New("audit kafka: no bootstrap address")
	}
	if o.Linger == 0 {
		o.Linger = 5 * time.Millisecond
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Bootstrap...),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(o.Linger),
		kgo.RecordDeliveryTimeout(0),
		kgo.ClientID("inorder-audit"),
	}
	if o.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(o.TLS))
	}
	if o.SASL != nil {
		opts = append(opts, kgo.SASL(o.SASL))
	}
	opts = append(opts, o.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("audit kafka: %w", err)
	}
	return &KafkaSink{cl: cl}, nil
}

// Name is SinkKafka.
func (s *KafkaSink) Name() SinkName { return SinkKafka }

// Write produces recs and waits for every acknowledgement, or for ctx.
// Records are produced with a context of their own: once buffered, a
// record is the client's until it is acknowledged or fails, so that a
// record is never both cancelled and written.
func (s *KafkaSink) Write(ctx context.Context, recs []Record) (int, error) {
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(recs))
	)
	wg.Add(len(recs))
	for i := range recs {
		v := recs[i].Value
		v = bytes.TrimSuffix(v, []byte{'\n'})
		r := &kgo.Record{Key: []byte(recs[i].Key), Value: v, Headers: contentType}
		s.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// The promises may still run and write errs: it is not read.
		return 0, fmt.Errorf("audit kafka: %w", ctx.Err())
	}
	for i, err := range errs {
		if err != nil {
			// Records after i may have been written: the queue writes
			// them again, which is at least once.
			return i, fmt.Errorf("audit kafka: %w", err)
		}
	}
	return len(recs), nil
}

// Close closes the client; records not yet acknowledged fail.
func (s *KafkaSink) Close() error {
	s.cl.Close()
	return nil
}

// SASLOptions say how a KafkaSink authenticates. Secrets are read from
// their files (or the environment) at each authentication, so that a
// rotated one applies to the next connection, and appear in no error.
type SASLOptions struct {
	Mechanism    string // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
	Username     string // PLAIN and SCRAM
	PasswordFile string // PLAIN and SCRAM; empty: the environment variable PasswordEnv
	PasswordEnv  string
	TokenFile    string // OAUTHBEARER
}

// ErrNoSecret: the password or token file is empty or cannot be read, or
// neither the file nor the environment variable gives a password.
var ErrNoSecret = errors.New("audit kafka: no SASL secret")

// NewSASL returns the mechanism o asks for, having checked that its secret
// can be read now.
func NewSASL(o SASLOptions) (sasl.Mechanism, error) {
	password := func() (string, error) {
		if o.PasswordFile != "" {
			return readSecret(o.PasswordFile)
		}
		if p := os.Getenv(o.PasswordEnv); p != "" && o.PasswordEnv != "" {
			return p, nil
		}
		return "", fmt.Errorf("%w: no password file, and $%s is empty", ErrNoSecret, o.PasswordEnv)
	}
	var m sasl.Mechanism
	switch o.Mechanism {
	case "PLAIN":
		m = plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := password()
			return plain.Auth{User: o.Username, Pass: p}, err
		})
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		fn := func(context.Context) (scram.Auth, error) {
			p, err := password()
			return scram.Auth{User: o.Username, Pass: p}, err
		}
		m = scram.Sha512(fn)
		if o.Mechanism == "SCRAM-SHA-256" {
			m = scram.Sha256(fn)
		}
	case "OAUTHBEARER":
		m = oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			t, err := readSecret(o.TokenFile)
			return oauth.Auth{Token: t}, err
		})
	default:
		return nil, fmt.Errorf("audit kafka: SASL mechanism %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", o.Mechanism)
	}
	if _, _, err := m.Authenticate(context.Background(), ""); err != nil {
		return nil, err
	}
	return m, nil
}

// readSecret reads a one-line secret; a trailing newline is not part of
// it. The error names the file, never its content.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNoSecret, path, errors.Unwrap(err))
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("%w: %s is empty", ErrNoSecret, path)
	}
	return string(b), nil
}
