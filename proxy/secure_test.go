package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/testcerts"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// pki is a CA and the files the proxy, its upstream and its clients use.
type pki struct {
	ca     *testcerts.CA
	dir    string
	caFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := testcerts.NewCA("inorder test ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	return &pki{ca: ca, dir: dir, caFile: caFile}
}

// files issues a certificate for hosts and writes it as name.crt/name.key.
func (k *pki) files(t *testing.T, name string, hosts ...string) (cert, key string) {
	t.Helper()
	p, err := k.ca.Issue(name, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err = p.Write(k.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// tlsConfig trusts the CA and, if name is not empty, presents a
// certificate issued for it.
func (k *pki) tlsConfig(t *testing.T, name string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(k.ca.Cert)
	cfg := &tls.Config{RootCAs: pool}
	if name != "" {
		p, err := k.ca.Issue(name, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshakeCounter counts the SaslHandshake requests a kfake cluster sees.
func handshakeCounter(kc *kfake.Cluster) *atomic.Int64 { return countKey(kc, 17) }

// countKey counts the requests of one key a kfake cluster sees.
func countKey(kc *kfake.Cluster, key int16) *atomic.Int64 {
	var n atomic.Int64
	kc.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// produceInOrder produces n records per partition with an idempotent
// producer (5 requests in flight per broker), and reads them back, checking every partition's order.
func produceInOrder(t *testing.T, ctx context.Context, topic string, partitions int32, n int, pace time.Duration, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		for part := int32(0); part < partitions; part++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
		if pace > 0 {
			time.Sleep(pace)
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := make(map[int32]int)
	for got := 0; got < n*int(partitions); {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n*int(partitions), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if v, _ := strconv.Atoi(string(r.Value)); v != next[r.Partition] {
				t.Fatalf("partition %d: record %q, want %d", r.Partition, r.Value, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
}

// TestTLSAndProxySASL runs a client with a client certificate through a
// proxy that terminates mutual TLS, dials its upstream with TLS verified
// by a private CA, and authenticates there with SCRAM for the client, in
// both ordering modes; start-up discovery goes the same way.
func TestTLSAndProxySASL(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			k := newPKI(t)
			brokerCert, _ := k.ca.Issue("broker", "127.0.0.1")
			pair, err := tls.X509KeyPair(brokerCert.CertPEM, brokerCert.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			kc := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}), kfake.EnableSASL(),
				kfake.Superuser(config.MechanismScramSHA512, "inorder", "proxy-secret"), kfake.SeedTopics(3, "secure"))
			handshakes := handshakeCounter(kc)
			cert, key := k.files(t, "proxy", "127.0.0.1")
			p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) {
				c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, k.caFile
				c.UpstreamTLSCA = k.caFile
				c.UpstreamSASLMechanism = config.MechanismScramSHA512
				c.UpstreamSASLUsername = "inorder"
				c.UpstreamSASLPasswordFile = writeSecret(t, "proxy-secret")
			})
			ctx := testContext(t, 60*time.Second)
			if err := p.Discover(ctx); err != nil {
				t.Fatalf("discovery over TLS and SASL: %v", err)
			}
			if p.Stats().Nodes != 3 {
				t.Fatalf("discovery opened %d node listeners, want 3", p.Stats().Nodes)
			}
			produceInOrder(t, ctx, "secure", 3, 200, 0, kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "client")))
			if handshakes.Load() == 0 {
				t.Fatal("the proxy never authenticated upstream")
			}
			if p.Ready() != nil {
				t.Fatalf("not ready after successful authentications: %v", p.Ready())
			}
		})
	}
}

// TestTLSListenerRefusals: a plaintext client on the TLS port, a client
// without a certificate and one with a certificate from another CA are
// each closed with a log line naming the reason, rate-limited; a good
// client is served meanwhile.
func TestTLSListenerRefusals(t *testing.T) {
	k := newPKI(t)
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cert, key := k.files(t, "proxy", "127.0.0.1")
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, k.caFile
	}, proxy.WithMetrics(m))

	// Plaintext: an ApiVersions request, as a client that forgot TLS sends.
	for i := 0; i < 3; i++ {
		nc, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64)
		n, _ := nc.Read(buf)
		for err == nil {
			_, err = nc.Read(buf)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a plaintext client on the TLS port was not closed")
		}
		if n > 0 && string(buf[:4]) == "\x00\x00\x00\x00" {
			t.Fatal("a plaintext client got a Kafka answer")
		}
		nc.Close()
	}
	p.log.waitFor(t, "a plaintext Kafka client on a TLS listener: enable TLS (security.protocol=SSL) in the client")
	if c := strings.Count(p.log.String(), "tls handshake failed; connection closed"); c != 1 {
		t.Errorf("3 plaintext clients within the rate limit logged %d lines, want 1", c)
	}
	if n := counter(t, m, metrics.NameTLSHandshakeFailures, "side", "client", "reason", "plaintext"); n != 3 {
		t.Errorf("%s{reason=plaintext} = %v, want 3", metrics.NameTLSHandshakeFailures, n)
	}

	dialTLS := func(cfg *tls.Config) error {
		cfg.ServerName = "127.0.0.1"
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.Addr(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate at the first read.
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		_, err = c.Read(make([]byte, 4))
		return err
	}
	if err := dialTLS(k.tlsConfig(t, "")); err == nil {
		t.Error("a client without a certificate was served")
	}
	p.log.waitFor(t, "didn't provide a certificate")
	stranger := newPKI(t)
	cfg := k.tlsConfig(t, "")
	cfg.Certificates = stranger.tlsConfig(t, "stranger").Certificates
	if err := dialTLS(cfg); err == nil {
		t.Error("a client certificate from another CA was served")
	}
	p.log.waitFor(t, "client certificate does not verify")
	if err := dialTLS(k.tlsConfig(t, "client")); err != nil {
		t.Errorf("a good client after the refusals: %v", err)
	}
}

// TestCertificateReload replaces the listeners' certificate: new
// connections get the new one, a connection made before keeps working,
// and a bad pair keeps the old certificate.
func TestCertificateReload(t *testing.T) {
	k := newPKI(t)
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cert, key := k.files(t, "first", "127.0.0.1")
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) {
		c.TLSCert, c.TLSKey = cert, key
	})
	ctx := testContext(t, 30*time.Second)
	served := func() string {
		cfg := k.tlsConfig(t, "")
		cfg.ServerName = "127.0.0.1"
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.Addr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "first" {
		t.Fatalf("serving %q", cn)
	}

	next, err := k.ca.Issue("second", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cert+".new", next.CertPEM, 0o600)
	os.WriteFile(key+".new", next.KeyPEM, 0o600)
	os.Rename(key+".new", key)
	os.Rename(cert+".new", cert)
	if err := p.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "second" {
		t.Fatalf("after reload serving %q", cn)
	}
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a connection made before the reload: %v", err)
	}

	os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n"), 0o600)
	if err := p.ReloadCertificates(); err == nil {
		t.Fatal("a broken key was accepted")
	}
	p.log.waitFor(t, "keeping the current one")
	if cn := served(); cn != "second" {
		t.Fatalf("after a bad reload serving %q", cn)
	}
}

// TestUpstreamTLSVerification: an upstream whose certificate a private CA
// did not sign is refused; --upstream-tls-server-name verifies the
// configured address by another name.
func TestUpstreamTLSVerification(t *testing.T) {
	k, other := newPKI(t), newPKI(t)
	named, _ := k.ca.Issue("broker", "kafka.test") // not the dialled 127.0.0.1
	pair, err := tls.X509KeyPair(named.CertPEM, named.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kc := newCluster(t, kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}))
	ctx := testContext(t, 30*time.Second)
	ping := func(mut func(*config.Config)) error {
		p := startProxy(t, config.OrderingNone, kc.ListenAddrs()[:1], mut)
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		_, err = req.RequestWith(ctx, cl)
		return err
	}
	if err := ping(func(c *config.Config) { c.UpstreamTLSCA = other.caFile; c.UpstreamTLSServerName = "kafka.test" }); err == nil {
		t.Error("an upstream signed by an unknown CA was accepted")
	}
	if err := ping(func(c *config.Config) { c.UpstreamTLSCA = k.caFile }); err == nil {
		t.Error("an upstream whose certificate does not name the dialled host was accepted")
	}
	if err := ping(func(c *config.Config) { c.UpstreamTLSCA = k.caFile; c.UpstreamTLSServerName = "kafka.test" }); err != nil {
		t.Errorf("with the server name set: %v", err)
	}
}

// TestUpstreamRefusesProxyCredentials: against a broker that answers the
// refusal as Kafka does, the client's connection is closed, the log names
// the mechanism and user but never the password, further clients do not
// reach the broker while the proxy backs off, readiness says why, and a
// corrected password file is used after the back-off.
func TestUpstreamRefusesProxyCredentials(t *testing.T) {
	up, err := hostile.NewKafkaSASL(kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "inorder", "right"), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	handshakes := handshakeCounter(up.Cluster())
	pwFile := writeSecret(t, "wrong-password")
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, []string{up.Addr()}, func(c *config.Config) {
		c.UpstreamSASLMechanism = config.MechanismPlain
		c.UpstreamSASLUsername = "inorder"
		c.UpstreamSASLPasswordFile = pwFile
	}, proxy.WithMetrics(m))
	ctx := testContext(t, 30*time.Second)
	ping := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx)
	}
	if err := ping(); err == nil {
		t.Fatal("served with refused credentials")
	}
	p.log.waitFor(t, "upstream authentication failed")
	log := p.log.String()
	if !strings.Contains(log, "mechanism=PLAIN") || !strings.Contains(log, "user=inorder") || strings.Contains(log, "wrong-password") {
		t.Fatalf("the log must name the mechanism and user and never the password:\n%s", log)
	}
	if up.Refusals() == 0 {
		t.Fatal("the broker refused nothing: the test would not tell a refusal from a drop")
	}
	if err := p.Ready(); !errors.Is(err, proxy.ErrNotReady) || !errors.Is(err, proxy.ErrUpstreamAuth) || !strings.Contains(err.Error(), "user inorder") {
		t.Fatalf("Ready() = %v, want ErrNotReady for ErrUpstreamAuth naming the user", err)
	}
	before := handshakes.Load()
	for i := 0; i < 5; i++ {
		if err := ping(); err == nil {
			t.Fatal("served while backing off")
		}
	}
	if after := handshakes.Load(); after != before {
		t.Fatalf("clients retrying during the back-off reached the broker %d times", after-before)
	}
	os.WriteFile(pwFile, []byte("right"), 0o600)
	deadline := time.Now().Add(10 * time.Second)
	for ping() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the corrected password was never used")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.Ready(); errors.Is(err, proxy.ErrUpstreamAuth) {
		t.Fatalf("Ready() after recovery: %v", err)
	}
	if n := counter(t, m, metrics.NameSASLAuthentications, "mechanism", "PLAIN", "result", "failure"); n < 1 {
		t.Errorf("no failed authentication counted")
	}
	if n := counter(t, m, metrics.NameSASLAuthentications, "mechanism", "PLAIN", "result", "success"); n < 1 {
		t.Errorf("no successful authentication counted")
	}
}

// TestProxyReauthentication: with a session lifetime of 1.5s the proxy
// re-authenticates each upstream connection while a producer pipelines
// through it; nothing is lost or reordered, in both ordering modes.
func TestProxyReauthentication(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "inorder", "pw"),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"}), kfake.SeedTopics(2, "reauth"))
			handshakes, apiVersions := countKey(kc, 17), countKey(kc, 18)
			p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) {
				c.UpstreamSASLMechanism = config.MechanismScramSHA256
				c.UpstreamSASLUsername = "inorder"
				c.UpstreamSASLPasswordFile = writeSecret(t, "pw")
			})
			ctx := testContext(t, 60*time.Second)
			// 3s of produce: each connection's session is renewed every
			// 0.5s (1.5s minus the 1s margin).
			produceInOrder(t, ctx, "reauth", 2, 300, 10*time.Millisecond, kgo.SeedBrokers(p.Addr()))
			// kgo opens every connection with one ApiVersions, and the
			// proxy authenticates each once when dialling it.
			if renewals := handshakes.Load() - apiVersions.Load(); renewals < 4 {
				t.Fatalf("%d handshakes on %d connections: the sessions were not renewed", handshakes.Load(), apiVersions.Load())
			}
		})
	}
}

// TestClientSASLWhileProxyAuthenticates: a client that brings its own SASL
// to a proxy that authenticates for it gets an error answer at once.
func TestClientSASLWhileProxyAuthenticates(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "inorder", "pw"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.UpstreamSASLMechanism = config.MechanismScramSHA256
		c.UpstreamSASLUsername = "inorder"
		c.UpstreamSASLPasswordFile = writeSecret(t, "pw")
	})
	ctx := testContext(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0),
		kgo.SASL(scram.Auth{User: "inorder", Pass: "pw"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	err = cl.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "UNSUPPORTED_SASL_MECHANISM") {
		t.Fatalf("got %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the answer took %v", time.Since(start))
	}
	p.log.waitFor(t, "client sent SASL while the proxy authenticates for it")
}

// TestSASLPassThroughReauthentication: clients bring SCRAM credentials;
// the proxy forwards their SaslHandshake and SaslAuthenticate in order,
// including the KIP-368 re-authentications kgo runs as sessions expire.
func TestSASLPassThroughReauthentication(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA512, "client", "pw"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"}), kfake.SeedTopics(2, "pass"))
	handshakes, apiVersions := countKey(kc, 17), countKey(kc, 18)
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	ctx := testContext(t, 60*time.Second)
	produceInOrder(t, ctx, "pass", 2, 300, 10*time.Millisecond, kgo.SeedBrokers(p.Addr()),
		kgo.SASL(scram.Auth{User: "client", Pass: "pw"}.AsSha512Mechanism()))
	if renewals := handshakes.Load() - apiVersions.Load(); renewals < 2 {
		t.Fatalf("%d handshakes on %d connections in 3s of 1.5s sessions: no re-authentication went through", handshakes.Load(), apiVersions.Load())
	}
}
