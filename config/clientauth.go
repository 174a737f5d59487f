package config

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// ClientMechanisms are the SASL mechanisms the proxy can authenticate
// clients with, in the order SaslHandshake lists them.
var ClientMechanisms = []string{MechanismScramSHA256, MechanismScramSHA512, MechanismPlain, MechanismOAuthBearer}

// ClientAuth is the authentication of clients at the proxy. Its zero value
// authenticates nobody: clients' SASL passes through to the upstream, or is
// refused while the proxy authenticates upstream itself.
type ClientAuth struct {
	// ClientSASLMechanisms are the mechanisms the proxy answers clients'
	// SASL with, itself; their SASL then never reaches the upstream.
	// Empty: none.
	ClientSASLMechanisms []string
	// ClientCredentials is the file of SCRAM credentials (inorder
	// credentials) that SCRAM and PLAIN check clients against, re-read when
	// it changes and on SIGHUP. Required by those mechanisms.
	ClientCredentials string
	// ClientSASLPlainWithoutTLS accepts PLAIN on plaintext listeners, where
	// the password crosses the network in the clear. False refuses it
	// there.
	ClientSASLPlainWithoutTLS bool
	// ClientSessionLifetime bounds a client's SASL session, as Kafka's
	// connections.max.reauth.ms does: clients that authenticate with
	// SaslAuthenticate v1 or later must re-authenticate within it or be
	// disconnected. Zero: no bound.
	ClientSessionLifetime time.Duration
}

func bindClientAuthFlags(fs *pflag.FlagSet, a *ClientAuth) {
	fs.Var((*listValue)(&a.ClientSASLMechanisms), "client-sasl-mechanisms", "authenticate clients at the proxy with these SASL mechanisms: "+strings.Join(ClientMechanisms, ", ")+" (default: none; clients' SASL passes through)")
	fs.StringVar(&a.ClientCredentials, "client-credentials", a.ClientCredentials, "file of client credentials (inorder credentials) for SCRAM and PLAIN, re-read when it changes")
	fs.BoolVar(&a.ClientSASLPlainWithoutTLS, "client-sasl-plain-without-tls", a.ClientSASLPlainWithoutTLS, "accept PLAIN from clients on a listener without TLS (the password crosses the network in the clear)")
	fs.DurationVar(&a.ClientSessionLifetime, "client-session-lifetime", a.ClientSessionLifetime, "longest client SASL session; clients re-authenticate within it or are disconnected (0: no bound)")
}

func (c *Config) validateClientAuth() error {
	a := &c.ClientAuth
	scram := false
	for i, m := range a.ClientSASLMechanisms {
		if !slices.Contains(ClientMechanisms, m) {
			return invalid("client-sasl-mechanisms", m, "is not a client SASL mechanism: want "+strings.Join(ClientMechanisms, ", "))
		}
		if slices.Contains(a.ClientSASLMechanisms[:i], m) {
			return invalid("client-sasl-mechanisms", m, "is listed twice")
		}
		if m == MechanismOAuthBearer {
			return invalid("client-sasl-mechanisms", m, "is not available in this build")
		}
		scram = scram || m != MechanismOAuthBearer
	}
	switch {
	case scram && a.ClientCredentials == "":
		return invalid("client-credentials", "", "is required by --client-sasl-mechanisms SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (create it with inorder credentials add)")
	case !scram && a.ClientCredentials != "":
		return invalid("client-credentials", a.ClientCredentials, "needs --client-sasl-mechanisms with SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN")
	case a.ClientSASLPlainWithoutTLS && !slices.Contains(a.ClientSASLMechanisms, MechanismPlain):
		return invalid("client-sasl-plain-without-tls", "true", "needs PLAIN in --client-sasl-mechanisms")
	case a.ClientSessionLifetime < 0:
		return invalid("client-session-lifetime", a.ClientSessionLifetime.String(), "must not be negative (0: no bound)")
	case a.ClientSessionLifetime > 0 && len(a.ClientSASLMechanisms) == 0:
		return invalid("client-session-lifetime", a.ClientSessionLifetime.String(), "needs --client-sasl-mechanisms")
	}
	return checkFile("client-credentials", a.ClientCredentials, true)
}

// ClientSASL reports whether the proxy authenticates clients' SASL itself.
func (a *ClientAuth) ClientSASL() bool { return len(a.ClientSASLMechanisms) > 0 }
