package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/upauth"
)

// TestUpstreamPrincipalCredentials: two principals authenticated at the
// proxy, User:app1 and User:app2, are mapped by an
// --upstream-principal-credentials file to the Kafka users alice and bob,
// whose ACLs differ; through the proxy each is allowed and denied by
// Kafka's StandardAuthorizer as its own Kafka user. The proxy enforces no
// ACL and holds no credentials of its own. Its ACLs and topics are removed
// at the end, so that the differential that shares the node sees none.
func TestUpstreamPrincipalCredentials(t *testing.T) {
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	topicA, topicB := "upc-alice-"+tok, "upc-bob-"+tok

	admin := kadm.NewClient(newClient(t, e.bootstrap, e.super, e.password(t, e.super)))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, topicA, topicB); err != nil {
		t.Fatal(err)
	}
	acls := func(user, topic string) *kadm.ACLBuilder {
		return kadm.NewACLs().Topics(topic).Allow("User:"+user).AllowHosts("*").
			Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	}
	for _, b := range []*kadm.ACLBuilder{acls("alice", topicA), acls("bob", topicB)} {
		if _, err := admin.CreateACLs(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, b := range []*kadm.ACLBuilder{acls("alice", topicA), acls("bob", topicB)} {
			if _, err := admin.DeleteACLs(ctx, b); err != nil {
				t.Errorf("deleting the ACLs: %v", err)
			}
		}
		if _, err := admin.DeleteTopics(ctx, topicA, topicB); err != nil {
			t.Errorf("deleting the topics: %v", err)
		}
	})

	// The proxy's own users, app1 and app2, with passwords of their own.
	var creds authn.Credentials
	clients := map[string]string{"app1": "app1-proxy-pw-" + tok, "app2": "app2-proxy-pw-" + tok}
	for user, pw := range clients {
		c, err := authn.NewCredential(config.MechanismScramSHA256, []byte(pw), authn.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := creds.Set(user, config.MechanismScramSHA256, c); err != nil {
			t.Fatal(err)
		}
	}
	mech, err := authn.NewSCRAM(config.MechanismScramSHA256, authn.NewStore(&creds))
	if err != nil {
		t.Fatal(err)
	}
	mapping := filepath.Join(t.TempDir(), "principals.yaml")
	doc := "principals:\n" +
		"  User:app1: {mechanism: SCRAM-SHA-512, username: alice, passwordFile: " + e.passwordFile("alice") + "}\n" +
		"  User:app2: {mechanism: SCRAM-SHA-256, username: bob, passwordFile: " + e.passwordFile("bob") + "}\n"
	if err := os.WriteFile(mapping, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ids, err := upauth.LoadPrincipals(mapping, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.Upstreams = "127.0.0.1:0", []string{e.bootstrap}
	logged := new(lockedLog)
	log := slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := proxy.New(cfg, log, proxy.WithClientAuth(clientauth.New(clientauth.Config{Mechanisms: []authn.Mechanism{mech}})),
		proxy.WithUpstreamIdentities(ids))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Discover(ctx); err != nil && !errors.Is(err, proxy.ErrUpstreamNeedsCredentials) {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}

	produce := func(user, topic string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(scram.Auth{User: user, Pass: clients[user]}.AsSha256Mechanism()),
			kgo.DisableIdempotentWrite(), kgo.RequestRetries(0), kgo.ProducerLinger(0), kgo.MaxVersions(versions()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte(user)}).FirstErr()
	}
	for _, tc := range []struct{ user, kafkaUser, allowed, denied string }{
		{"app1", "alice", topicA, topicB}, {"app2", "bob", topicB, topicA},
	} {
		if err := produce(tc.user, tc.allowed); err != nil {
			t.Errorf("%s (as %s) producing to %s: %v, want it allowed by Kafka", tc.user, tc.kafkaUser, tc.allowed, err)
		}
		if err := produce(tc.user, tc.denied); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s (as %s) producing to %s: %v, want TOPIC_AUTHORIZATION_FAILED from Kafka", tc.user, tc.kafkaUser, tc.denied, err)
		}
	}
	p.Close()
	out := logged.String()
	for _, user := range []string{"alice", "bob"} {
		if strings.Contains(out, e.password(t, user)) {
			t.Errorf("the proxy log holds %s's Kafka password", user)
		}
	}
	if t.Failed() {
		t.Logf("proxy log:\n%s", out)
	}
}

// lockedLog is a log the proxy's goroutines write at once.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
