package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/IBM/sarama"
	kafkasasl "github.com/segmentio/kafka-go/sasl"
	kafkaplain "github.com/segmentio/kafka-go/sasl/plain"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

// security is how every client of a run reaches the bootstrap address, read
// once from the environment (the same variables every workload of the
// matrix reads):
//
//	COMPAT_TLS_CA          PEM CA file: connect with TLS, verifying the server with it
//	COMPAT_TLS_CERT        PEM client certificate presented in the TLS handshake
//	COMPAT_TLS_KEY         its PEM private key (mutual TLS)
//	COMPAT_SASL_MECHANISM  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER: authenticate
//	COMPAT_SASL_USERNAME   the user
//	COMPAT_SASL_PASSWORD   its password
//	COMPAT_OAUTH_TOKEN_FILE OAUTHBEARER: the file holding the bearer token (a JWT)
//	COMPAT_SASL_HANDSHAKE  v0: sarama uses the legacy SaslHandshake v0 flow
//	COMPAT_HOSTS_FILE      a hosts file (/etc/hosts format): franz-go resolves
//	                       the names in it there, through its Dialer, and
//	                       sends them as the TLS server name (the proxy's
//	                       one-port topology, whose names DNS does not know)
//
// The zero value (nothing set) is plaintext without authentication.
type security struct {
	tls       *tls.Config
	mechanism string
	user      string
	pass      string
	// handshakeV0 asks for SaslHandshake v0 and raw tokens (sarama only:
	// franz-go and kafka-go always use SaslAuthenticate).
	handshakeV0 bool
	// token is OAUTHBEARER's bearer token.
	token string
	// certSubject names the client certificate, for the START line.
	certSubject string
	// hosts maps names to addresses for franz-go's dialer; nil: the
	// system resolver.
	hosts map[string]string
}

var sec security

func loadSecurity() error {
	if ca := os.Getenv("COMPAT_TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("COMPAT_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("COMPAT_TLS_CA: no certificate in %s", ca)
		}
		sec.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if cert, key := os.Getenv("COMPAT_TLS_CERT"), os.Getenv("COMPAT_TLS_KEY"); cert != "" || key != "" {
		if sec.tls == nil {
			return fmt.Errorf("COMPAT_TLS_CERT needs COMPAT_TLS_CA")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("COMPAT_TLS_CERT, COMPAT_TLS_KEY: %w", err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return fmt.Errorf("COMPAT_TLS_CERT: %w", err)
		}
		sec.tls.Certificates = []tls.Certificate{pair}
		sec.certSubject = leaf.Subject.String()
	}
	sec.mechanism = strings.ToUpper(os.Getenv("COMPAT_SASL_MECHANISM"))
	if sec.mechanism == "OAUTHBEARER" {
		tok, err := os.ReadFile(os.Getenv("COMPAT_OAUTH_TOKEN_FILE"))
		if err != nil {
			return fmt.Errorf("COMPAT_OAUTH_TOKEN_FILE: %w", err)
		}
		sec.token = strings.TrimSpace(string(tok))
	}
	sec.user, sec.pass = os.Getenv("COMPAT_SASL_USERNAME"), os.Getenv("COMPAT_SASL_PASSWORD")
	sec.handshakeV0 = os.Getenv("COMPAT_SASL_HANDSHAKE") == "v0"
	if f := os.Getenv("COMPAT_HOSTS_FILE"); f != "" {
		hosts, err := readHosts(f)
		if err != nil {
			return fmt.Errorf("COMPAT_HOSTS_FILE: %w", err)
		}
		sec.hosts = hosts
	}
	switch sec.mechanism {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER":
	default:
		return fmt.Errorf("COMPAT_SASL_MECHANISM %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", sec.mechanism)
	}
	return nil
}

// describe is the START line's summary of the security settings (never the password).
func (s security) describe() string {
	d := "plaintext"
	if s.tls != nil {
		d = "tls"
	}
	if s.certSubject != "" {
		d += ",client certificate " + s.certSubject
	}
	switch s.mechanism {
	case "":
	case "OAUTHBEARER":
		d += "+OAUTHBEARER(token from COMPAT_OAUTH_TOKEN_FILE)"
	default:
		d += "+" + s.mechanism + "(" + s.user + ")"
	}
	if s.handshakeV0 {
		d += ",SaslHandshake v0 where the client can"
	}
	if s.hosts != nil {
		d += ",names from COMPAT_HOSTS_FILE"
	}
	return d
}

// readHosts reads a hosts file: an address, then the names it has.
func readHosts(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	hosts := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		for _, name := range f[min(1, len(f)):] {
			hosts[strings.ToLower(name)] = f[0]
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s names no host", path)
	}
	return hosts, nil
}

// fromHostsFile reports whether addr's host is an address that a name of
// the hosts file resolves to.
func (s security) fromHostsFile(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) == nil {
		return false
	}
	for _, a := range s.hosts {
		if a == host {
			return true
		}
	}
	return false
}

// hostsDialer dials the address the hosts file gives a name (names it
// does not list as they are) and, with TLS, sends the name as the server
// name and verifies it, as kgo.DialTLSConfig would.
func (s security) hostsDialer() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip := host
		if a, ok := s.hosts[strings.ToLower(host)]; ok {
			ip = a
		}
		nc, err := d.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err != nil || s.tls == nil {
			return nc, err
		}
		cfg := s.tlsConfig()
		cfg.ServerName = host
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	})
}

// tlsConfig is a copy per client: the libraries set ServerName on it.
func (s security) tlsConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}

// kgoOpts are franz-go's options for the settings.
func (s security) kgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	switch {
	case s.hosts != nil:
		opts = append(opts, s.hostsDialer())
	case s.tls != nil:
		opts = append(opts, kgo.DialTLSConfig(s.tlsConfig()))
	}
	switch s.mechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.user, Pass: s.pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.pass}.AsSha512Mechanism()))
	case "OAUTHBEARER":
		opts = append(opts, kgo.SASL(oauth.Auth{Token: s.token}.AsMechanism()))
	}
	return opts
}

// sarama sets the settings on a sarama configuration. Sarama has no SCRAM
// implementation of its own: its documentation points at xdg-go/scram.
func (s security) sarama(c *sarama.Config) {
	if s.tls != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = s.tlsConfig()
	}
	if s.mechanism == "" {
		return
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.Version = sarama.SASLHandshakeV1
	if s.handshakeV0 {
		// The legacy flow: raw tokens after the handshake. Sarama then
		// refuses to send ApiVersions first and uses c.Version's request versions.
		c.Net.SASL.Version = sarama.SASLHandshakeV0
		c.ApiVersionsRequest = false
	}
	c.Net.SASL.User, c.Net.SASL.Password = s.user, s.pass
	c.Net.SASL.Mechanism = sarama.SASLMechanism(s.mechanism)
	if s.mechanism == "OAUTHBEARER" {
		c.Net.SASL.TokenProvider = saramaToken(s.token)
	}
	switch s.mechanism {
	case "SCRAM-SHA-256":
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA256} }
	case "SCRAM-SHA-512":
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA512} }
	}
}

// xdgSCRAM is sarama's SCRAMClient on xdg-go/scram.
type xdgSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authzID string) error {
	cl, err := x.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = cl.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// saramaToken is sarama's AccessTokenProvider for a fixed token.
type saramaToken string

func (t saramaToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(t)}, nil
}

// kafkaGoOAuth is OAUTHBEARER for kafka-go, which has no implementation of
// it: the initial response of RFC 7628 (a GS2 header, the token, no
// extensions); the server's empty answer ends the exchange.
type kafkaGoOAuth string

func (kafkaGoOAuth) Name() string { return "OAUTHBEARER" }
func (t kafkaGoOAuth) Start(context.Context) (kafkasasl.StateMachine, []byte, error) {
	return t, []byte("n,,\x01auth=Bearer " + string(t) + "\x01\x01"), nil
}
func (kafkaGoOAuth) Next(context.Context, []byte) (bool, []byte, error) { return true, nil, nil }

// kafkaGo is kafka-go's SASL mechanism for the settings (nil: none).
func (s security) kafkaGo() (kafkasasl.Mechanism, error) {
	switch s.mechanism {
	case "PLAIN":
		return kafkaplain.Mechanism{Username: s.user, Password: s.pass}, nil
	case "SCRAM-SHA-256":
		return kafkascram.Mechanism(kafkascram.SHA256, s.user, s.pass)
	case "SCRAM-SHA-512":
		return kafkascram.Mechanism(kafkascram.SHA512, s.user, s.pass)
	case "OAUTHBEARER":
		return kafkaGoOAuth(s.token), nil
	}
	return nil, nil
}
