package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
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
