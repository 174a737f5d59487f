package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestClientAuthFromFile: the client authentication settings are keys of
// the --config file like every flag, a list as a YAML list.
func TestClientAuthFromFile(t *testing.T) {
	creds := writeFile(t, "users: {}\n")
	file := writeFile(t, "upstream: a:1\nclient-sasl-mechanisms: [SCRAM-SHA-512, PLAIN]\nclient-credentials: "+creds+
		"\nclient-session-lifetime: 1h\nclient-sasl-plain-without-tls: true\n")
	c := Default()
	fs := flags(&c)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(fs, Default())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.ClientSASLMechanisms, ",") != "SCRAM-SHA-512,PLAIN" || got.ClientCredentials != creds ||
		got.ClientSessionLifetime != time.Hour || !got.ClientSASLPlainWithoutTLS || !got.ClientSASL() {
		t.Fatalf("file values not applied: %+v", got.ClientAuth)
	}
}

func TestClientAuthValidate(t *testing.T) {
	creds := writeFile(t, "users: {}\n")
	jwks := writeFile(t, `{"keys":[]}`)
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string // "" for valid
	}{
		{"none", func(*Config) {}, ""},
		{"scram", func(c *Config) { c.ClientSASLMechanisms, c.ClientCredentials = []string{"SCRAM-SHA-256"}, creds }, ""},
		{"oauth file", func(c *Config) { c.ClientSASLMechanisms, c.ClientOAuthJWKS = []string{"OAUTHBEARER"}, jwks }, ""},
		{"oauth url", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientOAuthJWKS = []string{"OAUTHBEARER"}, "https://idp/jwks"
		}, ""},
		{"unknown", func(c *Config) { c.ClientSASLMechanisms = []string{"GSSAPI"} }, "client-sasl-mechanisms"},
		{"no credentials", func(c *Config) { c.ClientSASLMechanisms = []string{"PLAIN"} }, "client-credentials"},
		{"credentials alone", func(c *Config) { c.ClientCredentials = creds }, "client-credentials"},
		{"oauth without keys", func(c *Config) { c.ClientSASLMechanisms = []string{"OAUTHBEARER"} }, "client-oauth-jwks"},
		{"oauth over http", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientOAuthJWKS = []string{"OAUTHBEARER"}, "http://idp/jwks"
		}, "client-oauth-jwks"},
		{"oauth keys missing", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientOAuthJWKS = []string{"OAUTHBEARER"}, "/nonexistent/jwks.json"
		}, "client-oauth-jwks"},
		{"issuer alone", func(c *Config) { c.ClientOAuthIssuer = "x" }, "client-oauth-issuer"},
		{"lifetime alone", func(c *Config) { c.ClientSessionLifetime = time.Minute }, "client-session-lifetime"},
		{"plain flag alone", func(c *Config) { c.ClientSASLPlainWithoutTLS = true }, "client-sasl-plain-without-tls"},
		{"mapping without ca", func(c *Config) { c.TLSPrincipalMappingRules = "DEFAULT" }, "tls-principal-mapping-rules"},
		{"upstream principals", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientCredentials, c.UpstreamPrincipalCredentials = []string{"SCRAM-SHA-256"}, creds, creds
		}, ""},
		{"upstream principals without client auth", func(c *Config) { c.UpstreamPrincipalCredentials = creds }, "upstream-principal-credentials"},
		{"upstream principals missing", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientCredentials, c.UpstreamPrincipalCredentials = []string{"SCRAM-SHA-256"}, creds, "/nonexistent/p.yaml"
		}, "upstream-principal-credentials"},
		{"upstream principals single", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientCredentials, c.UpstreamPrincipalCredentials = []string{"SCRAM-SHA-256"}, creds, creds
			c.Topology = TopologySingle
		}, "upstream-principal-credentials"},
		{"upstream principals single with the proxy's own", func(c *Config) {
			c.ClientSASLMechanisms, c.ClientCredentials, c.UpstreamPrincipalCredentials = []string{"SCRAM-SHA-256"}, creds, creds
			c.UpstreamSASLMechanism, c.UpstreamSASLUsername, c.UpstreamSASLPasswordFile = MechanismScramSHA512, "inorder", creds
			c.Topology = TopologySingle
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			err := c.Validate()
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("%v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestClientSASLAuthenticatesNonLoopback: a proxy that authenticates
// upstream in its own name may listen beyond loopback once clients
// authenticate to it.
func TestClientSASLAuthenticatesNonLoopback(t *testing.T) {
	c := Default()
	c.Listen = "0.0.0.0:9092"
	c.UpstreamSASLMechanism, c.UpstreamSASLUsername = MechanismScramSHA512, "inorder"
	if err := c.Validate(); err == nil {
		t.Fatal("every client acting as the proxy on a public listener was accepted")
	}
	c.ClientSASLMechanisms, c.ClientCredentials = []string{MechanismScramSHA256}, writeFile(t, "users: {}\n")
	if err := c.Validate(); err != nil {
		t.Fatalf("with client authentication: %v", err)
	}
}

// TestUpstreamPrincipalsSingleNeedOwnCredentials: the single topology
// learns the cluster in the proxy's own name, so the mapping there needs
// the proxy's credentials, and the refusal says which setting is missing
// and why.
func TestUpstreamPrincipalsSingleNeedOwnCredentials(t *testing.T) {
	creds := writeFile(t, "users: {}\n")
	c := Default()
	c.ClientSASLMechanisms, c.ClientCredentials, c.UpstreamPrincipalCredentials = []string{"SCRAM-SHA-256"}, creds, creds
	c.Topology = TopologySingle
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "needs --upstream-sasl-mechanism with --topology single") {
		t.Fatalf("%v, want a refusal naming --upstream-sasl-mechanism and the topology", err)
	}
}
