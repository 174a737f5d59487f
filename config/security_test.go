package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestSecurityValidation(t *testing.T) {
	dir := t.TempDir()
	private := filepath.Join(dir, "private")
	os.WriteFile(private, []byte("pw"), 0o600)
	group := filepath.Join(dir, "group")
	os.WriteFile(group, []byte("pw"), 0o640)
	world := filepath.Join(dir, "world")
	os.WriteFile(world, []byte("pw"), 0o644)
	cert := filepath.Join(dir, "cert.pem") // read by tlsconf; here it need only exist
	os.WriteFile(cert, []byte("pem"), 0o644)
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, []byte("pem"), 0o644)
	absent := filepath.Join(dir, "absent")

	cases := []struct {
		name   string
		listen string
		s      Security
		want   []string // substrings of the error; nil: valid
	}{
		{"tls pair", "", Security{TLSCert: cert, TLSKey: private}, nil},
		{"cert without key", "", Security{TLSCert: cert}, []string{`tls-cert: "` + cert + `" needs --tls-key`}},
		{"key without cert", "", Security{TLSKey: private}, []string{`tls-key: "` + private + `" needs --tls-cert`}},
		{"cert and key missing", "", Security{TLSCert: absent, TLSKey: absent + ".key"}, []string{`tls-cert: "` + absent + `" cannot be read: no such file or directory`}},
		{"client ca without cert", "", Security{TLSClientCA: ca}, []string{"tls-client-ca", "needs --tls-cert"}},
		{"client ca missing", "", Security{TLSCert: cert, TLSKey: private, TLSClientCA: absent}, []string{"tls-client-ca", absent, "cannot be read"}},
		{"upstream ca missing", "", Security{UpstreamTLSCA: absent}, []string{`upstream-tls-ca: "` + absent + `" cannot be read`}},
		{"upstream cert without key", "", Security{UpstreamTLSCert: cert}, []string{"upstream-tls-cert", "needs --upstream-tls-key"}},
		{"unknown mechanism", "", Security{UpstreamSASLMechanism: "GSSAPI"}, []string{"upstream-sasl-mechanism", "GSSAPI"}},
		{"scram without user", "", Security{UpstreamSASLMechanism: MechanismScramSHA256}, []string{"upstream-sasl-username"}},
		{"oauth without token", "", Security{UpstreamSASLMechanism: MechanismOAuthBearer}, []string{"upstream-sasl-token-file"}},
		{"user without mechanism", "", Security{UpstreamSASLUsername: "u"}, []string{"upstream-sasl-username", "upstream-sasl-mechanism"}},
		{"scram on loopback", "", Security{UpstreamSASLMechanism: MechanismScramSHA512, UpstreamSASLUsername: "u", UpstreamSASLPasswordFile: private}, nil},
		{"group-readable secret", "", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u", UpstreamSASLPasswordFile: group}, nil},
		{"world-readable password", "", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u", UpstreamSASLPasswordFile: world}, []string{"upstream-sasl-password-file", world, "other users"}},
		{"world-readable tls key", "", Security{TLSCert: cert, TLSKey: world}, []string{"tls-key", world}},
		{"missing secret file", "", Security{UpstreamSASLMechanism: MechanismOAuthBearer, UpstreamSASLTokenFile: absent}, []string{"upstream-sasl-token-file", absent}},
		{"sasl on every interface", "0.0.0.0:9092", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u"}, []string{"tls-client-ca", "allow-unauthenticated-clients", "0.0.0.0:9092"}},
		{"sasl on every interface, allowed", "0.0.0.0:9092", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u", AllowUnauthenticatedClients: true}, nil},
		{"sasl on every interface, mtls", "0.0.0.0:9092", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u", TLSCert: cert, TLSKey: private, TLSClientCA: ca}, nil},
		{"sasl on localhost", "localhost:9092", Security{UpstreamSASLMechanism: MechanismPlain, UpstreamSASLUsername: "u"}, nil},
	}
	for _, tc := range cases {
		c := Default()
		if tc.listen != "" {
			c.Listen = tc.listen
		}
		c.Security = tc.s
		err := c.Validate()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestUpstreamTLSImplied(t *testing.T) {
	for _, s := range []Security{{UpstreamTLS: true}, {UpstreamTLSCA: "ca"}, {UpstreamTLSCert: "c"}, {UpstreamTLSServerName: "n"}, {UpstreamTLSInsecureSkipVerify: true}} {
		if !s.UpstreamTLSEnabled() {
			t.Errorf("%+v does not turn upstream TLS on", s)
		}
	}
	if (&Security{}).UpstreamTLSEnabled() {
		t.Error("the zero value turns upstream TLS on")
	}
}

func TestNoPasswordFlag(t *testing.T) {
	c := Default()
	fs := flags(&c)
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasSuffix(f.Name, "password") || strings.HasSuffix(f.Name, "token") {
			t.Errorf("--%s takes a secret as a plain flag value", f.Name)
		}
	})
}
