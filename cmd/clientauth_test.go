package cmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
