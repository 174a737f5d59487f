package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// authUsers are the users of the client authentication tests.
var authUsers = map[string]string{"alice": "alice-secret", "bob": "bob-secret"}

// authGate returns a gate checking authUsers with SCRAM-SHA-256,
// SCRAM-SHA-512 and PLAIN (over plaintext only if plainWithoutTLS).
func authGate(t testing.TB, m *metrics.Metrics, life time.Duration, plainWithoutTLS bool) *clientauth.Gate {
	t.Helper()
	var creds authn.Credentials
	for user, pw := range authUsers {
		for _, mech := range authn.SCRAMMechanisms() {
			c, err := authn.NewCredential(mech, []byte(pw), authn.DefaultIterations)
			if err != nil {
				t.Fatal(err)
			}
			if err := creds.Set(user, mech, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := authn.NewStore(&creds)
	var mechs []authn.Mechanism
	for _, name := range authn.SCRAMMechanisms() {
		m, err := authn.NewSCRAM(name, store)
		if err != nil {
			t.Fatal(err)
		}
		mechs = append(mechs, m)
	}
	mechs = append(mechs, authn.NewPlain(store, authn.PlainOptions{AllowWithoutTLS: plainWithoutTLS}))
	return clientauth.New(clientauth.Config{Mechanisms: mechs, MaxSessionLifetime: life, Metrics: m})
}

// authProxy runs a proxy authenticating clients in front of kc.
func authProxy(t *testing.T, kc *kfake.Cluster, topology config.Topology, life time.Duration, plainWithoutTLS bool) (*testProxy, *metrics.Metrics) {
	t.Helper()
	return authProxyMode(t, kc, config.OrderingNone, topology, life, plainWithoutTLS)
}

// authProxyMode is authProxy in an ordering mode.
func authProxyMode(t *testing.T, kc *kfake.Cluster, mode config.Ordering, topology config.Topology, life time.Duration, plainWithoutTLS bool) (*testProxy, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.Topology = topology },
		proxy.WithMetrics(m), proxy.WithClientAuth(authGate(t, m, life, plainWithoutTLS)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log.String())
		}
	})
	return p, m
}

// TestClientAuthProduceConsume: real clients authenticate at the proxy
// with each mechanism, then produce and consume through it in order.
func TestClientAuthProduceConsume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topology config.Topology
		mech     sasl.Mechanism
		label    string
	}{
		{"ports-scram-sha-256", config.TopologyPorts, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "SCRAM-SHA-256"},
		{"ports-scram-sha-512", config.TopologyPorts, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), "SCRAM-SHA-512"},
		{"ports-plain", config.TopologyPorts, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), "PLAIN"},
		{"single-scram-sha-256", config.TopologySingle, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "SCRAM-SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const (
				topic      = "authed"
				partitions = 3
				perPart    = 20
			)
			kc := newCluster(t, kfake.SeedTopics(partitions, topic))
			if tc.topology == config.TopologySingle {
				spreadLeaders(t, kc, topic, partitions)
			}
			p, m := authProxy(t, kc, tc.topology, 0, true)
			ctx := testContext(t, 15*time.Second)
			prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(tc.mech), kgo.DefaultProduceTopic(topic),
				kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			produceEach(t, ctx, prod, partitions, 0, perPart, func(i int) []byte { return []byte(strconv.Itoa(i)) })
			prod.Close()
			seen := consumeGroup(t, p.Addr(), topic, "g", partitions*perPart, kgo.SASL(tc.mech))
			for part := int32(0); part < partitions; part++ {
				for i, v := range seen[part] {
					if v != strconv.Itoa(i) {
						t.Fatalf("partition %d offset %d: %q, want %d", part, i, v, i)
					}
				}
			}
			if n := counter(t, m, metrics.NameClientAuthentications, "mechanism", tc.label, "result", "success"); n < 2 {
				t.Errorf("%s successes counted: %v, want at least 2 (producer and consumer)", tc.label, n)
			}
			if n := counter(t, m, metrics.NameClientAuthentications, "result", "failure"); n != 0 {
				t.Errorf("failures counted: %v", n)
			}
			p.log.waitFor(t, "principal=User:alice")
			// Every client here authenticates first: each line about
			// one of their connections names who it is.
			for _, line := range strings.Split(p.log.String(), "\n") {
				if strings.Contains(line, " client=") && !strings.Contains(line, " principal=User:alice") {
					t.Errorf("a connection's log line without its principal: %s", line)
				}
			}
		})
	}
}

// TestClientAuthWrongPassword: the client learns SASL_AUTHENTICATION_FAILED
// with authn's message; other clients are not affected.
func TestClientAuthWrongPassword(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	p, m := authProxy(t, kc, config.TopologyPorts, 0, false)
	ctx := testContext(t, 30*time.Second)
	good, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()),
		kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bad, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "bob", Pass: "guess"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid credentials") {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED saying invalid credentials", err)
	}
	if strings.Contains(err.Error(), "guess") {
		t.Fatalf("the refusal shows the password: %v", err)
	}
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("the good client after another's refusal: %v", err)
	}
	if n := counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-256", "result", "failure"); n < 1 {
		t.Errorf("failures counted: %v", n)
	}
	p.log.waitFor(t, "client authentication closed the connection")
	if strings.Contains(p.log.String(), "guess") || strings.Contains(p.log.String(), "secret") {
		t.Fatalf("a password in the log:\n%s", p.log.String())
	}
}

// TestClientAuthRefusalDelaysClose: a refused SaslAuthenticate is answered
// in order, then the connection closes after authn.FailureDelay.
func TestClientAuthRefusalDelaysClose(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, _ := authProxy(t, kc, config.TopologyPorts, 0, true)
	c := dialAuth(t, p.Addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = 2, []byte("\x00alice\x00wrong")
	resp := c.do(a).(*kmsg.SASLAuthenticateResponse)
	answered := time.Now()
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "invalid credentials") {
		t.Fatalf("refusal: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	c.waitClosed()
	if took := time.Since(answered); took < authn.FailureDelay*8/10 {
		t.Fatalf("closed %v after the refusal, want about %v", took, authn.FailureDelay)
	}
}

// TestClientAuthPlainNeedsTLS: PLAIN over a plaintext listener is refused
// unless allowed.
func TestClientAuthPlainNeedsTLS(t *testing.T) {
	kc := newCluster(t)
	p, _ := authProxy(t, kc, config.TopologyPorts, 0, false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.Ping(testContext(t, 20*time.Second))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "without TLS") {
		t.Fatalf("PLAIN over plaintext: %v, want SASL_AUTHENTICATION_FAILED saying TLS is needed", err)
	}
}

// TestClientAuthUnknownMechanism: a handshake naming a mechanism that is
// not enabled is answered with UNSUPPORTED_SASL_MECHANISM and the list.
func TestClientAuthUnknownMechanism(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, _ := authProxy(t, kc, config.TopologyPorts, 0, false)
	c := dialAuth(t, p.Addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	r := c.do(hs).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN" {
		t.Fatalf("handshake: error %d, mechanisms %v", r.ErrorCode, r.SupportedMechanisms)
	}
	c.waitClosed()
}

// TestClientAuthRequestBeforeAuthentication: ApiVersions is answered before
// authentication; any other request closes the connection unanswered.
func TestClientAuthRequestBeforeAuthentication(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, _ := authProxy(t, kc, config.TopologyPorts, 0, false)
	c := dialAuth(t, p.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	if r := c.do(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Fatalf("ApiVersions before authentication: error %d, %d keys", r.ErrorCode, len(r.ApiKeys))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	c.waitClosed()
	p.log.waitFor(t, "not allowed before authentication")

	// During the exchange, only SaslAuthenticate.
	c = dialAuth(t, p.Addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	c.send(md)
	c.waitClosed()
}

// TestClientAuthLegacyTokens: after a SaslHandshake v0, SCRAM runs over raw
// length-prefixed tokens, then Kafka framing resumes; a wrong password
// closes the connection.
func TestClientAuthLegacyTokens(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) { testClientAuthLegacyTokens(t, topology) })
	}
}

func testClientAuthLegacyTokens(t *testing.T, topology config.Topology) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, m := authProxy(t, kc, topology, 0, false)
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{"alice-secret", true}, {"wrong", false}} {
		c := dialAuth(t, p.Addr())
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, "SCRAM-SHA-256"
		if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", r.ErrorCode)
		}
		sess, tok, err := scram.Auth{User: "alice", Pass: tc.pass}.AsSha256Mechanism().Authenticate(context.Background(), "proxy")
		if err != nil {
			t.Fatal(err)
		}
		c.nc.Write(rawFrame(tok))
		first, err := readRaw(c.nc)
		if err != nil {
			t.Fatalf("server-first token: %v", err)
		}
		_, tok, err = sess.Challenge(first)
		if err != nil {
			t.Fatal(err)
		}
		c.nc.Write(rawFrame(tok))
		if !tc.ok {
			// The raw flow has no way to carry the refusal but the close.
			for {
				if _, err := readRaw(c.nc); err != nil {
					break
				}
			}
			continue
		}
		final, err := readRaw(c.nc)
		if err != nil {
			t.Fatalf("server-final token: %v", err)
		}
		if done, _, err := sess.Challenge(final); err != nil || !done {
			t.Fatalf("server-final: done %v, %v", done, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		if r := c.do(md).(*kmsg.MetadataResponse); len(r.Brokers) == 0 {
			t.Fatal("metadata after the raw exchange names no broker")
		}
	}
	if ok, bad := counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-256", "result", "success"),
		counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-256", "result", "failure"); ok != 1 || bad != 1 {
		t.Fatalf("counted %v successes, %v failures; want 1 and 1", ok, bad)
	}
}

// TestClientAuthReauthenticatePipelined: a re-authentication sent behind
// pipelined produces is answered in its place, the produces before and
// after it succeed in order, and a session left to expire closes the
// connection at its next request.
func TestClientAuthReauthenticatePipelined(t *testing.T) {
	for _, tc := range []struct {
		topology config.Topology
		mode     config.Ordering
	}{
		{config.TopologyPorts, config.OrderingNone},
		{config.TopologyPorts, config.OrderingConnection},
		{config.TopologySingle, config.OrderingNone},
	} {
		topology := tc.topology
		t.Run(string(topology)+"-"+string(tc.mode), func(t *testing.T) {
			const life = 1500 * time.Millisecond
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			p, m := authProxyMode(t, kc, tc.mode, topology, life, false)
			// Slow produces, so that the re-authentication is read and
			// answered while they are still in flight upstream.
			kc.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				time.Sleep(40 * time.Millisecond)
				return nil, nil, false
			})
			c := dialAuth(t, p.Addr())
			mech := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
			if r := c.scramLogin(mech); r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > life.Milliseconds() {
				t.Fatalf("session lifetime %dms, want within (0, %v]", r.SessionLifetimeMillis, life)
			}
			produce := func() *kmsg.ProduceRequest {
				req := kmsg.NewPtrProduceRequest()
				req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = oneRecordBatch()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			}
			// Five produces, then the re-authentication, all before
			// reading any answer.
			var reqs []kmsg.Request
			for range 5 {
				reqs = append(reqs, produce())
			}
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, mech.Name()
			sess, first, err := mech.Authenticate(context.Background(), "proxy")
			if err != nil {
				t.Fatal(err)
			}
			a := kmsg.NewPtrSASLAuthenticateRequest()
			a.Version, a.SASLAuthBytes = 2, first
			reqs = append(reqs, hs, a)
			var corrs []int32
			for _, r := range reqs {
				corrs = append(corrs, c.send(r))
			}
			var offsets []int64
			for i, r := range reqs {
				resp := c.recv(r, corrs[i])
				switch resp := resp.(type) {
				case *kmsg.ProduceResponse:
					rp := resp.Topics[0].Partitions[0]
					if rp.ErrorCode != 0 {
						t.Fatalf("produce %d: error %d", i, rp.ErrorCode)
					}
					offsets = append(offsets, rp.BaseOffset)
				case *kmsg.SASLHandshakeResponse:
					if resp.ErrorCode != 0 {
						t.Fatalf("re-authentication handshake: error %d", resp.ErrorCode)
					}
				case *kmsg.SASLAuthenticateResponse:
					if resp.ErrorCode != 0 {
						t.Fatalf("re-authentication: error %d", resp.ErrorCode)
					}
					_, final, err := sess.Challenge(resp.SASLAuthBytes)
					if err != nil {
						t.Fatal(err)
					}
					a2 := kmsg.NewPtrSASLAuthenticateRequest()
					a2.Version, a2.SASLAuthBytes = 2, final
					r2 := c.do(a2).(*kmsg.SASLAuthenticateResponse)
					if r2.ErrorCode != 0 || r2.SessionLifetimeMillis <= 0 {
						t.Fatalf("re-authentication final: error %d, lifetime %d", r2.ErrorCode, r2.SessionLifetimeMillis)
					}
					if done, _, err := sess.Challenge(r2.SASLAuthBytes); err != nil || !done {
						t.Fatalf("server-final: done %v, %v", done, err)
					}
				}
			}
			for i := 1; i < len(offsets); i++ {
				if offsets[i] != offsets[i-1]+1 {
					t.Fatalf("produce offsets %v: not in write order", offsets)
				}
			}
			after := c.do(produce()).(*kmsg.ProduceResponse)
			if rp := after.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.BaseOffset != offsets[len(offsets)-1]+1 {
				t.Fatalf("produce after re-authentication: error %d at offset %d", rp.ErrorCode, rp.BaseOffset)
			}
			if n := counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-512", "result", "success"); n != 2 {
				t.Fatalf("successes counted: %v, want 2", n)
			}
			// Past the lifetime, anything but a re-authentication closes.
			time.Sleep(life + 200*time.Millisecond)
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 9
			c.send(md)
			c.waitClosed()
			p.log.waitFor(t, "session expired")
		})
	}
}

// TestClientAuthReauthenticateKgo: kgo re-authenticates on its own before
// the session the proxy announced ends, and keeps producing.
func TestClientAuthReauthenticateKgo(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	// kgo renews at least a second before the end, and the proxy, as
	// Kafka, renews a session at most once a second: 2.5s renews every
	// 1.5s.
	p, m := authProxy(t, kc, config.TopologyPorts, 2500*time.Millisecond, false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Every connection the client uses has authenticated once.
	before := counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-256", "result", "success")
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := counter(t, m, metrics.NameClientAuthentications, "mechanism", "SCRAM-SHA-256", "result", "success"); n < before+2 {
		t.Fatalf("successes counted: %v, %v before producing for 4s: want re-authentications", n, before)
	}
	if strings.Contains(p.log.String(), "client authentication closed") {
		t.Fatalf("a connection closed by the client authentication:\n%s", p.log.String())
	}
}

// authClient speaks Kafka framing by hand, to send what kgo never would.
type authClient struct {
	t    *testing.T
	nc   net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func dialAuth(t *testing.T, addr string) *authClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &authClient{t: t, nc: nc, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")), corr: 100}
}

func (c *authClient) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	if _, err := c.nc.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
	return c.corr
}

func (c *authClient) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	b, err := readRaw(c.nc)
	if err != nil {
		c.t.Fatalf("%s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(b[0])<<24 | int32(b[1])<<16 | int32(b[2])<<8 | int32(b[3]); got != corr {
		c.t.Fatalf("%s response: correlation id %d, want %d (out of order)", kmsg.NameForKey(req.Key()), got, corr)
	}
	b = b[4:]
	if req.IsFlexible() && req.Key() != 18 {
		b = b[1:] // no tagged fields in the header
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("%s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func (c *authClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// waitClosed fails the test unless the proxy closes the connection without
// another response.
func (c *authClient) waitClosed() {
	c.t.Helper()
	b, err := readRaw(c.nc)
	if err == nil {
		c.t.Fatalf("a response of %d bytes where the connection should close", len(b))
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
		c.t.Fatalf("connection not closed: %v", err)
	}
}

// scramLogin authenticates with SaslHandshake v1 and SaslAuthenticate v2.
func (c *authClient) scramLogin(mech sasl.Mechanism) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		c.t.Fatalf("handshake: error %d", r.ErrorCode)
	}
	sess, tok, err := mech.Authenticate(context.Background(), "proxy")
	if err != nil {
		c.t.Fatal(err)
	}
	for {
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.Version, a.SASLAuthBytes = 2, tok
		r := c.do(a).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			c.t.Fatalf("authenticate: error %d %v", r.ErrorCode, r.ErrorMessage)
		}
		done, next, err := sess.Challenge(r.SASLAuthBytes)
		if err != nil {
			c.t.Fatal(err)
		}
		if done {
			return r
		}
		tok = next
	}
}

// TestClientAuthLargeFrameBeforeAuthentication: before authentication a
// frame may not exceed Kafka's sasl.server.max.receive.size; the client is
// closed on its length prefix, before the proxy reads it.
func TestClientAuthLargeFrameBeforeAuthentication(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, _ := authProxy(t, kc, config.TopologyPorts, 0, false)
	c := dialAuth(t, p.Addr())
	c.nc.Write([]byte{0, 0x10, 0, 0}) // 1 MiB announced, nothing more sent
	c.waitClosed()
	p.log.waitFor(t, "before authentication")

	// Once authenticated, the usual bound applies.
	c = dialAuth(t, p.Addr())
	c.scramLogin(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	md.Topics = make([]kmsg.MetadataRequestTopic, 30000)
	for i := range md.Topics {
		md.Topics[i].Topic = kmsg.StringPtr(fmt.Sprintf("t%029d", i))
	}
	if r := c.do(md).(*kmsg.MetadataResponse); len(r.Topics) != len(md.Topics) {
		t.Fatalf("a %d-topic Metadata after authentication: %d topics answered", len(md.Topics), len(r.Topics))
	}
}
