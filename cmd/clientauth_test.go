package cmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/authn"
)

// writeCredentials writes a credential file holding users (name to
// password) with SCRAM-SHA-256.
func writeCredentials(t *testing.T, path string, users map[string]string) {
	t.Helper()
	var c authn.Credentials
	for u, pw := range users {
		cred, err := authn.NewCredential(authn.MechanismSCRAMSHA256, []byte(pw), authn.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(u, authn.MechanismSCRAMSHA256, cred); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// TestServeAuthenticatesClients runs serve with --client-sasl-mechanisms:
// a client with a password in the file produces, one without is refused,
// and a user added to the file while serve runs can log in at once.
func TestServeAuthenticatesClients(t *testing.T) {
	kc := newBroker(t, kfake.SeedTopics(1, "t"))
	creds := filepath.Join(t.TempDir(), "clients.yaml")
	writeCredentials(t, creds, map[string]string{"alice": "alice-secret"})
	addr, _, errOut, stop := startStreams(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--client-session-lifetime", "1h")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login := func(user, pw string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha256Mechanism()),
			kgo.DefaultProduceTopic("t"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// Ping returns a refusal; a produce would retry it until ctx ends.
		if err := cl.Ping(ctx); err != nil {
			return err
		}
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte(user)}).FirstErr()
	}
	if err := login("alice", "alice-secret"); err != nil {
		t.Fatalf("alice: %v\n%s", err, errOut.String())
	}
	if err := login("bob", "bob-secret"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("bob before he is added: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	writeCredentials(t, creds, map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	waitText(t, errOut, "client credentials loaded")
	if err := login("bob", "bob-secret"); err != nil {
		t.Fatalf("bob once added: %v\n%s", err, errOut.String())
	}
	for _, secret := range []string{"alice-secret", "bob-secret"} {
		if strings.Contains(errOut.String(), secret) {
			t.Fatalf("a password in the log:\n%s", errOut.String())
		}
	}
	// A file that no longer parses keeps the users loaded.
	if err := os.WriteFile(creds, []byte("users: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, "client credentials not reloaded")
	if err := login("bob", "bob-secret"); err != nil {
		t.Fatalf("bob after a broken file: %v", err)
	}
}

// TestServeUpstreamPrincipalCredentials runs serve with
// upstream-principal-credentials from its --config file in front of a
// broker that requires SASL: alice, mapped, produces as her upstream user;
// bob, not mapped while the proxy has no credentials of its own, is
// refused, and produces once the file maps him too. An inline password is
// refused at start.
func TestServeUpstreamPrincipalCredentials(t *testing.T) {
	kc := newBroker(t, kfake.SeedTopics(1, "t"), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "app-a", "upstream-a-pw"), kfake.User("PLAIN", "app-b", "upstream-b-pw"))
	dir := t.TempDir()
	creds := filepath.Join(dir, "clients.yaml")
	writeCredentials(t, creds, map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	pwA := filepath.Join(dir, "a.pw")
	if err := os.WriteFile(pwA, []byte("upstream-a-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("INORDER_TEST_APP_B", "upstream-b-pw")
	alice := "principals:\n  User:alice: {mechanism: SCRAM-SHA-512, username: app-a, passwordFile: " + pwA + "}\n"
	both := alice + "  User:bob: {mechanism: PLAIN, username: app-b, passwordEnv: INORDER_TEST_APP_B}\n"
	ids := filepath.Join(dir, "principals.yaml")
	if err := os.WriteFile(ids, []byte(alice), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "inorder.yaml")
	if err := os.WriteFile(cfg, []byte("upstream-principal-credentials: "+ids+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, errOut, stop := startStreams(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--config", cfg)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(user string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism()),
			kgo.DefaultProduceTopic("t"), kgo.RequestRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Value: []byte(user)}).FirstErr()
	}
	if err := produce("alice"); err != nil {
		t.Fatalf("alice: %v\n%s", err, errOut.String())
	}
	if err := produce("bob"); err == nil {
		t.Fatalf("bob produced without a mapping or credentials of the proxy's own")
	}
	waitText(t, errOut, "principal=User:bob")
	if err := os.WriteFile(ids+".new", []byte(both), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ids+".new", ids); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, "upstream principal credentials loaded")
	if err := produce("bob"); err != nil {
		t.Fatalf("bob once mapped: %v\n%s", err, errOut.String())
	}
	for _, secret := range []string{"upstream-a-pw", "upstream-b-pw"} {
		if strings.Contains(errOut.String(), secret) {
			t.Fatalf("an upstream password in the log:\n%s", errOut.String())
		}
	}

	inline := filepath.Join(dir, "inline.yaml")
	if err := os.WriteFile(inline, []byte("principals:\n  User:alice: {mechanism: PLAIN, username: app-a, password: upstream-a-pw}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, _, out := newCLI("serve", "--upstream", kc.ListenAddrs()[0], "--listen", "127.0.0.1:0",
		"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--upstream-principal-credentials", inline)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "secrets are not written in this file") || strings.Contains(err.Error()+out.String(), "upstream-a-pw") {
		t.Fatalf("an inline password: %v, want it refused without being quoted", err)
	}
}

// TestServeClientAuthFlagsValidated: the client authentication flags are
// refused as usage errors when they cannot work.
func TestServeClientAuthFlagsValidated(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "clients.yaml")
	writeCredentials(t, creds, map[string]string{"alice": "pw"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client-sasl-mechanisms", "GSSAPI"}, "--client-sasl-mechanisms: \"GSSAPI\" is not a client SASL mechanism"},
		{[]string{"--client-sasl-mechanisms", "SCRAM-SHA-256"}, "--client-credentials is required"},
		{[]string{"--client-credentials", creds}, "needs --client-sasl-mechanisms"},
		{[]string{"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--client-sasl-plain-without-tls"}, "needs PLAIN"},
		{[]string{"--client-sasl-mechanisms", "PLAIN", "--client-credentials", creds, "--client-session-lifetime", "-1s"}, "must not be negative"},
		{[]string{"--client-sasl-mechanisms", "OAUTHBEARER"}, "--client-oauth-jwks is required"},
		{[]string{"--client-sasl-mechanisms", "OAUTHBEARER", "--client-oauth-jwks", "http://idp/jwks"}, "must be an https:// URL or a file"},
		{[]string{"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--client-oauth-issuer", "x"}, "needs OAUTHBEARER"},
		{[]string{"--client-sasl-mechanisms", "PLAIN,PLAIN", "--client-credentials", creds}, "listed twice"},
		{[]string{"--tls-principal-mapping-rules", "DEFAULT"}, "needs --tls-client-ca"},
		{[]string{"--upstream-principal-credentials", creds}, "--upstream-principal-credentials: " + strconv.Quote(creds) + " needs client authentication"},
		{[]string{"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--upstream-principal-credentials", creds, "--topology", "single"}, "needs --upstream-sasl-mechanism with --topology single"},
	} {
		root, _, errOut := newCLI(append([]string{"serve", "--upstream", "127.0.0.1:1", "--listen", "127.0.0.1:0"}, tc.args...)...)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %T is not a usage error", tc.args, err)
		}
	}
}
