package proxy_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
)

// secureKafka is the secured Apache Kafka that testenv/kafka starts
// (start.sh secure or secure-cluster), described by the variables of its
// secrets/env file.
type secureKafka struct {
	seeds                   []string
	ca, serverName          string
	user, password          string
	proxyUser, proxyPwdFile string
}

func needSecureKafka(t *testing.T) secureKafka {
	t.Helper()
	seeds := os.Getenv("INORDER_SECURE_KAFKA")
	if seeds == "" {
		t.Skip("no secured Kafka: run testenv/kafka/start.sh secure, then `set -a; . $KAFKA_RUN_DIR/secure/secrets/env; set +a` (see testenv/kafka/README.md)")
	}
	pw, err := os.ReadFile(os.Getenv("INORDER_SECURE_KAFKA_PASSWORD_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	return secureKafka{
		seeds:        strings.Split(seeds, ","),
		ca:           os.Getenv("INORDER_SECURE_KAFKA_CA"),
		serverName:   os.Getenv("INORDER_SECURE_KAFKA_SERVER_NAME"),
		user:         os.Getenv("INORDER_SECURE_KAFKA_USER"),
		password:     strings.TrimSpace(string(pw)),
		proxyUser:    os.Getenv("INORDER_SECURE_KAFKA_PROXY_USER"),
		proxyPwdFile: os.Getenv("INORDER_SECURE_KAFKA_PROXY_PASSWORD_FILE"),
	}
}

// createTopic creates topic through the client's connection, so that the
// workload does not depend on the broker creating topics on first use.
func createTopic(t *testing.T, ctx context.Context, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 && code != 36 { // 36: already exists
		t.Fatalf("create %s: error %d", topic, code)
	}
}

// TestSecureKafka runs the two ways of fronting a secured Apache Kafka
// (SASL_SSL) through the proxy, in both ordering modes: the proxy
// authenticating for plaintext clients, and clients bringing their own
// SCRAM over TLS to the proxy, with kafka-python's legacy SaslHandshake v0
// played by a kgo client capped to it. A wrong proxy password is refused
// with the documented log line.
func TestSecureKafka(t *testing.T) {
	sk := needSecureKafka(t)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run("proxy-authenticates/"+string(mode), func(t *testing.T) {
			p := startProxy(t, mode, sk.seeds, func(c *config.Config) {
				c.UpstreamTLSCA = sk.ca
				c.UpstreamTLSServerName = sk.serverName
				c.UpstreamSASLMechanism = config.MechanismScramSHA512
				c.UpstreamSASLUsername = sk.proxyUser
				c.UpstreamSASLPasswordFile = sk.proxyPwdFile
			})
			ctx := testContext(t, 120*time.Second)
			if err := p.Discover(ctx); err != nil {
				t.Fatalf("discovery: %v", err)
			}
			topic := "secure-auth-" + string(mode) + "-" + run
			createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
			produceInOrder(t, ctx, topic, 3, 300, 0, kgo.SeedBrokers(p.Addr()))
		})

		// kafka-python's flow is a SaslHandshake v0 and then raw tokens:
		// SCRAM's two rounds, PLAIN's and OAUTHBEARER's one.
		v0 := kversion.Stable()
		v0.SetMaxKeyVersion(17, 0)
		for _, variant := range []struct {
			name string
			opts []kgo.Opt
		}{
			{"", []kgo.Opt{kgo.SASL(scram.Auth{User: sk.user, Pass: sk.password}.AsSha256Mechanism())}},
			{"/SaslHandshake-v0/SCRAM-SHA-512", []kgo.Opt{kgo.MaxVersions(v0), kgo.SASL(scram.Auth{User: sk.user, Pass: sk.password}.AsSha512Mechanism())}},
			{"/SaslHandshake-v0/PLAIN", []kgo.Opt{kgo.MaxVersions(v0), kgo.SASL(plain.Auth{User: sk.user, Pass: sk.password}.AsMechanism())}},
			{"/SaslHandshake-v0/OAUTHBEARER", []kgo.Opt{kgo.MaxVersions(v0), kgo.SASL(oauth.Auth{Token: unsignedJWT(sk.user)}.AsMechanism())}},
		} {
			name := "pass-through/" + string(mode) + variant.name
			mechs := variant.opts
			t.Run(name, func(t *testing.T) {
				k := newPKI(t)
				cert, key := k.files(t, "proxy", "127.0.0.1")
				p := startProxy(t, mode, sk.seeds, func(c *config.Config) {
					c.TLSCert, c.TLSKey = cert, key
					c.UpstreamTLSCA = sk.ca
				})
				ctx := testContext(t, 120*time.Second)
				opts := append([]kgo.Opt{kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, ""))}, mechs...)
				topic := strings.ReplaceAll("secure-pass-"+name+"-"+run, "/", "-")
				createTopic(t, ctx, topic, opts...)
				produceInOrder(t, ctx, topic, 3, 300, 0, opts...)
			})
		}
	}

	t.Run("re-authentication", func(t *testing.T) {
		ms, _ := strconv.Atoi(os.Getenv("INORDER_SECURE_KAFKA_REAUTH_MS"))
		if ms <= 0 {
			t.Skip("set INORDER_SECURE_KAFKA_REAUTH_MS to the broker's connections.max.reauth.ms (KAFKA_REAUTH_MS at start) to test re-authentication")
		}
		lifetime := time.Duration(ms) * time.Millisecond
		for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
			// The broker closes a connection used after its session
			// expired, so producing on the same connections for over
			// two lifetimes fails unless the proxy renews them in time.
			p := startProxy(t, mode, sk.seeds, func(c *config.Config) {
				c.UpstreamTLSCA = sk.ca
				c.UpstreamSASLMechanism = config.MechanismScramSHA256
				c.UpstreamSASLUsername = sk.proxyUser
				c.UpstreamSASLPasswordFile = sk.proxyPwdFile
			})
			ctx := testContext(t, 120*time.Second)
			topic := "secure-reauth-" + string(mode) + "-" + run
			createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
			start := time.Now()
			const n = 200
			produceInOrder(t, ctx, topic, 3, n, 2*lifetime/n+time.Millisecond, kgo.SeedBrokers(p.Addr()))
			if took := time.Since(start); took < 2*lifetime {
				t.Fatalf("%s: the workload took %v, shorter than two sessions of %v", mode, took, lifetime)
			}
			if strings.Contains(p.log.String(), "upstream failed") {
				t.Fatalf("%s: an upstream connection failed:\n%s", mode, p.log.String())
			}
		}
	})

	t.Run("proxy-authenticates/OAUTHBEARER", func(t *testing.T) {
		if !strings.Contains(os.Getenv("INORDER_SECURE_KAFKA_MECHANISMS"), config.MechanismOAuthBearer) {
			t.Skip("the secured Kafka does not offer OAUTHBEARER")
		}
		token := unsignedJWT(sk.proxyUser)
		p := startProxy(t, config.OrderingConnection, sk.seeds, func(c *config.Config) {
			c.UpstreamTLSCA = sk.ca
			c.UpstreamSASLMechanism = config.MechanismOAuthBearer
			c.UpstreamSASLTokenFile = writeSecret(t, token)
		})
		ctx := testContext(t, 120*time.Second)
		topic := "secure-oauth-" + run
		createTopic(t, ctx, topic, kgo.SeedBrokers(p.Addr()))
		produceInOrder(t, ctx, topic, 3, 100, 0, kgo.SeedBrokers(p.Addr()))
	})

	t.Run("wrong-password", func(t *testing.T) {
		p := startProxy(t, config.OrderingNone, sk.seeds, func(c *config.Config) {
			c.UpstreamTLSCA = sk.ca
			c.UpstreamSASLMechanism = config.MechanismScramSHA256
			c.UpstreamSASLUsername = sk.proxyUser
			c.UpstreamSASLPasswordFile = writeSecret(t, "not-the-password")
		})
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(testContext(t, 30*time.Second)); err == nil {
			t.Fatal("served with a wrong password")
		}
		p.log.waitFor(t, "upstream authentication failed")
		if strings.Contains(p.log.String(), "not-the-password") {
			t.Fatal("the password reached the log")
		}
	})

	t.Run("upstream-certificate-unverified", func(t *testing.T) {
		p := startProxy(t, config.OrderingNone, sk.seeds, func(c *config.Config) { c.UpstreamTLS = true })
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(testContext(t, 30*time.Second)); err == nil {
			t.Fatal("a broker signed by the test CA verified against the system roots")
		}
	})
}

// unsignedJWT is a token the broker's unsecured OAUTHBEARER validator
// accepts for user: an unsigned JWT whose sub names the principal.
func unsignedJWT(user string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return b64([]byte(`{"alg":"none"}`)) + "." +
		b64([]byte(fmt.Sprintf(`{"sub":"%s","iat":%d,"exp":%d}`, user, now, now+3600))) + "."
}
