package proxy_test

import (
	"crypto/tls"
	"io"
	"net"
	"slices"
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

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/testcerts"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestAuditRefusedLoginClaimed: a refused login is recorded with whom the
// client named as itself in claimed_principal (the SCRAM user name as the
// proxy unescapes it, PLAIN's authcid), while principal stays the
// unproven User:ANONYMOUS; no password is in the event, and a successful
// login carries no claim.
func TestAuditRefusedLoginClaimed(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	p, stop := auditedProxy(t, kc, config.OrderingNone, config.TopologyPorts, config.AuditDataPathRequest)
	ctx := testContext(t, 30*time.Second)
	cases := []struct {
		mech    sasl.Mechanism
		secret  string
		claimed string
	}{
		{scram.Auth{User: "mallory", Pass: "mallory-pw"}.AsSha256Mechanism(), "mallory-pw", "User:mallory"},
		{scram.Auth{User: "alice", Pass: "not-alice-secret"}.AsSha512Mechanism(), "not-alice-secret", "User:alice"},
		// SCRAM escapes "," and "=" in the name (RFC 5802's saslname).
		{scram.Auth{User: "eve=x,y", Pass: "eve-pw"}.AsSha256Mechanism(), "eve-pw", "User:eve=x,y"},
		// A long name is cut to clientauth.MaxClaimed bytes, at a
		// character's start.
		{scram.Auth{User: "x" + strings.Repeat("é", 150), Pass: "long-pw"}.AsSha256Mechanism(), "long-pw", "User:x" + strings.Repeat("é", 127) + "..."},
		{plain.Auth{User: "bob", Pass: "bob-wrong"}.AsMechanism(), "bob-wrong", "User:bob"},
	}
	login := func(m sasl.Mechanism) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(m))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx)
	}
	for _, c := range cases {
		if err := login(c.mech); err == nil {
			t.Fatalf("%s login claiming %s accepted", c.mech.Name(), c.claimed)
		}
	}
	if err := login(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()); err != nil {
		t.Fatal(err)
	}
	var refused, allowed []auditEvent
	for _, e := range stop() {
		if e.Type != "io.inorder.audit.authentication" {
			continue
		}
		if e.Decision == "deny" {
			refused = append(refused, e)
		} else {
			allowed = append(allowed, e)
		}
	}
	if len(refused) != len(cases) {
		t.Fatalf("%d refused logins recorded, want %d: %+v", len(refused), len(cases), refused)
	}
	for i, c := range cases {
		e := refused[i]
		claimed := "(none)"
		if e.Claimed != nil {
			claimed = *e.Claimed
		}
		if claimed != c.claimed || e.Principal != "User:ANONYMOUS" || e.Mechanism != c.mech.Name() ||
			e.APIKey != "SASLAuthenticate" || e.ErrorCode != kerr.SaslAuthenticationFailed.Code || e.Reason == "" ||
			e.Listener != "node" && e.Listener != "bootstrap" || e.Connection == 0 || !strings.HasPrefix(e.ClientAddress, "127.0.0.1:") ||
			len(e.Resources) != 0 {
			t.Errorf("refused %s login claiming %s recorded as %+v (claimed %s)", c.mech.Name(), c.claimed, e, claimed)
		}
		if strings.Contains(e.Reason, c.secret) || strings.Contains(claimed, c.secret) {
			t.Errorf("a password in the event: %+v", e)
		}
	}
	if len(allowed) == 0 {
		t.Fatal("the successful login is not recorded")
	}
	for _, e := range allowed {
		if e.Principal != "User:alice" || e.Claimed != nil {
			t.Errorf("successful login recorded as %+v", e)
		}
	}
}

// certAuditProxy runs a proxy whose clients present certificates of k,
// mapped to principals by rules, its audit recorded into rec.
func certAuditProxy(t *testing.T, rules string) (p *testProxy, k *pki, rec *recorded) {
	t.Helper()
	k = newPKI(t)
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cert, key := k.files(t, "proxy", "127.0.0.1")
	mapper, err := authn.ParsePrincipalMappingRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	rec = &recorded{}
	p = startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, k.caFile
	}, proxy.WithClientAuth(clientauth.New(clientauth.Config{CertPrincipal: mapper.Principal})), proxy.WithRecorder(rec))
	return p, k, rec
}

// TestAuditCertificateRefused: a client certificate that no mapping rule
// maps is recorded as a refused TLS authentication when the connection
// opens, with the certificate's subject and why.
func TestAuditCertificateRefused(t *testing.T) {
	p, k, rec := certAuditProxy(t, `RULE:^CN=bob(,.*)?$/bob/`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DialTLSConfig(k.tlsConfig(t, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(testContext(t, 20*time.Second)); err == nil {
		t.Fatal("a certificate no rule maps was accepted")
	}
	cl.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.opens) == 0 || len(rec.auths) != len(rec.opens) {
		t.Fatalf("%d connections opened, %d authentications; want one each", len(rec.opens), len(rec.auths))
	}
	for i, o := range rec.opens {
		if o.Principal != "" || !strings.Contains(o.TLSSubject, "CN=alice") {
			t.Errorf("connection %d opened as %+v", i, o)
		}
	}
	for _, a := range rec.auths {
		if a.Mechanism != "TLS" || a.APIKey != audit.NoAPIKey || a.Principal != "" || a.Claimed != "" ||
			!strings.Contains(a.Reason, authn.ErrNoMatchingRule.Error()) {
			t.Errorf("authentication %+v", a)
		}
	}
}

// TestAuditTLSHandshakeRefused: a client certificate the CAs do not verify
// (one of another CA, one expired) is refused at the handshake as before,
// with the alert that says why, and recorded as one refused TLS
// authentication naming its subject and the reason; a good certificate
// still authenticates. In each topology whose listeners speak TLS.
func TestAuditTLSHandshakeRefused(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySNI, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) {
			testAuditTLSHandshakeRefused(t, topology)
		})
	}
}

func testAuditTLSHandshakeRefused(t *testing.T, topology config.Topology) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	mapper, err := authn.ParsePrincipalMappingRules(authn.DefaultPrincipalMappingRules)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorded{}
	opts := []proxy.Option{proxy.WithClientAuth(clientauth.New(clientauth.Config{CertPrincipal: mapper.Principal})), proxy.WithRecorder(rec)}
	var k *pki
	var addr, serverName string
	if topology == config.TopologySNI {
		sp := startSNIProxy(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config, k *pki) { c.TLSClientCA = k.caFile }, opts...)
		k, addr, serverName = sp.pki, net.JoinHostPort("127.0.0.1", sp.port), sniBootstrap
	} else {
		k = newPKI(t)
		cert, key := k.files(t, "proxy", "127.0.0.1")
		p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) {
			c.Topology = topology
			c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, k.caFile
		}, opts...)
		if topology == config.TopologySingle {
			if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		addr, serverName = p.Addr(), "127.0.0.1"
	}
	withCert := func(pair testcerts.Pair) *tls.Config {
		cfg := k.tlsConfig(t, "")
		c, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
		return cfg
	}
	stranger, err := newPKI(t).ca.Issue("stranger", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	expired, err := k.ca.IssueValid("late", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		subject string
		cfg     *tls.Config
		alert   string // what the client is told, as before
		reason  string
	}{
		{"CN=stranger", withCert(stranger), "unknown certificate authority", "unknown authority"},
		{"CN=late", withCert(expired), "expired certificate", "expired"},
	}
	for _, c := range refused {
		if err := tlsApiVersions(addr, serverName, c.cfg); err == nil || !strings.Contains(err.Error(), c.alert) {
			t.Errorf("%s: the client saw %v, want the alert %q", c.subject, err, c.alert)
		}
	}
	if err := tlsApiVersions(addr, serverName, k.tlsConfig(t, "alice")); err != nil {
		t.Fatalf("a good certificate: %v", err)
	}

	deadline := time.Now().Add(10 * time.Second)
	recordedNow := func() (opens, conns []audit.ConnInfo, auths []audit.Authentication) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Clone(rec.opens), slices.Clone(rec.authConns), slices.Clone(rec.auths)
	}
	for {
		_, _, auths := recordedNow()
		if len(auths) >= len(refused)+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second event for a connection would come now
	opens, conns, auths := recordedNow()
	if len(opens) != len(auths) {
		t.Fatalf("%d connections opened, %d authentications, want one each: %+v %+v", len(opens), len(auths), opens, auths)
	}
	for _, c := range refused {
		n := 0
		for i, o := range conns {
			if o.TLSSubject != c.subject {
				continue
			}
			n++
			a := auths[i]
			if a.Mechanism != "TLS" || a.APIKey != audit.NoAPIKey || a.Principal != "" || !strings.Contains(a.Reason, c.reason) ||
				o.Principal != "" || o.ID == 0 || !strings.HasPrefix(o.ClientAddress, "127.0.0.1:") {
				t.Errorf("%s: recorded as %+v, authentication %+v", c.subject, o, a)
			}
		}
		if n != 1 {
			t.Errorf("%s: %d refused authentications recorded, want 1: %+v %+v", c.subject, n, conns, auths)
		}
	}
	good := 0
	for i, o := range conns {
		if o.TLSSubject == "CN=alice" {
			good++
			if a := auths[i]; a.Reason != "" || a.Principal != "User:CN=alice" || a.Mechanism != "TLS" {
				t.Errorf("the good certificate: recorded as %+v", a)
			}
		}
	}
	if good != 1 {
		t.Errorf("the good certificate: %d authentications recorded, want 1: %+v", good, conns)
	}
}

// tlsApiVersions sends one ApiVersions request over TLS with cfg to addr,
// verified as serverName, and reads its answer's length: the error a
// client sees when the handshake refuses it (in TLS 1.3, after the
// client's side of the handshake ended).
func tlsApiVersions(addr, serverName string, cfg *tls.Config) error {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	cfg.ServerName = serverName
	tc := tls.Client(raw, cfg)
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		return err
	}
	if _, err := tc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		return err
	}
	_, err = io.ReadFull(tc, make([]byte, 4))
	return err
}
