package config

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/authn"
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
	// connections.max.reauth.ms does: clients must re-authenticate within
	// it (SaslAuthenticate v1 and later tell them when it ends) or be
	// disconnected. Zero: no bound.
	ClientSessionLifetime time.Duration

	// ClientOAuthJWKS is where OAUTHBEARER's verification keys are: an
	// https:// URL, fetched at start and refreshed, or a file, re-read
	// when it changes. Required by OAUTHBEARER.
	ClientOAuthJWKS string
	// ClientOAuthIssuer, if set, must equal a token's "iss".
	ClientOAuthIssuer string
	// ClientOAuthAudience, if set, must be among a token's "aud".
	ClientOAuthAudience string
	// ClientOAuthPrincipalClaim names the claim holding the principal's
	// name. Empty means "sub", as Kafka's sasl.oauthbearer.sub.claim.name.
	ClientOAuthPrincipalClaim string

	// TLSPrincipalMappingRules maps a client certificate's subject to its
	// principal, in Kafka's ssl.principal.mapping.rules syntax, for
	// clients that present a certificate (--tls-client-ca) and do not
	// authenticate with SASL. Empty means DEFAULT: the subject as is.
	TLSPrincipalMappingRules string

	// UpstreamPrincipalCredentials is a YAML file mapping the principals
	// the proxy authenticates to the credentials each reaches the upstream
	// with (mechanism, username, and the secret by file or environment
	// variable), so that the brokers' ACLs, quotas and logs tell the
	// applications apart. Re-read when it changes and on SIGHUP; an open
	// connection keeps the credentials it was dialled with. A principal
	// with no entry reaches the upstream with --upstream-sasl-mechanism's
	// credentials, and without them it is refused. Empty: every client
	// reaches the upstream in the proxy's name, or with no SASL.
	UpstreamPrincipalCredentials string
}

func bindClientAuthFlags(fs *pflag.FlagSet, a *ClientAuth) {
	fs.Var((*listValue)(&a.ClientSASLMechanisms), "client-sasl-mechanisms", "authenticate clients at the proxy with these SASL mechanisms: "+strings.Join(ClientMechanisms, ", ")+" (default: none; clients' SASL passes through)")
	fs.StringVar(&a.ClientCredentials, "client-credentials", a.ClientCredentials, "file of client credentials (inorder credentials) for SCRAM and PLAIN, re-read when it changes")
	fs.BoolVar(&a.ClientSASLPlainWithoutTLS, "client-sasl-plain-without-tls", a.ClientSASLPlainWithoutTLS, "accept PLAIN from clients on a listener without TLS (the password crosses the network in the clear)")
	fs.DurationVar(&a.ClientSessionLifetime, "client-session-lifetime", a.ClientSessionLifetime, "longest client SASL session; clients re-authenticate within it or are disconnected (0: no bound)")
	fs.StringVar(&a.ClientOAuthJWKS, "client-oauth-jwks", a.ClientOAuthJWKS, "OAUTHBEARER: the keys that sign clients' tokens, an https:// JWKS URL or a JWKS file")
	fs.StringVar(&a.ClientOAuthIssuer, "client-oauth-issuer", a.ClientOAuthIssuer, "OAUTHBEARER: the issuer (iss) tokens must name (default: not checked)")
	fs.StringVar(&a.ClientOAuthAudience, "client-oauth-audience", a.ClientOAuthAudience, "OAUTHBEARER: an audience (aud) tokens must name (default: not checked)")
	fs.StringVar(&a.ClientOAuthPrincipalClaim, "client-oauth-principal-claim", a.ClientOAuthPrincipalClaim, "OAUTHBEARER: the claim holding the principal's name (default: sub)")
	fs.StringVar(&a.UpstreamPrincipalCredentials, "upstream-principal-credentials", a.UpstreamPrincipalCredentials, "YAML file mapping client principals (User:alice) to the upstream SASL credentials each uses, re-read when it changes (needs --client-sasl-mechanisms or --tls-client-ca; default: the proxy's own identity for every client)")
	fs.StringVar(&a.TLSPrincipalMappingRules, "tls-principal-mapping-rules", a.TLSPrincipalMappingRules, "with --tls-client-ca, Kafka's ssl.principal.mapping.rules giving a certificate's principal (default: DEFAULT, the subject)")
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
		scram = scram || m != MechanismOAuthBearer
	}
	oauth := slices.Contains(a.ClientSASLMechanisms, MechanismOAuthBearer)
	for _, f := range []struct{ name, value string }{
		{"client-oauth-issuer", a.ClientOAuthIssuer},
		{"client-oauth-audience", a.ClientOAuthAudience},
		{"client-oauth-principal-claim", a.ClientOAuthPrincipalClaim},
		{"client-oauth-jwks", a.ClientOAuthJWKS},
	} {
		if !oauth && f.value != "" {
			return invalid(f.name, f.value, "needs OAUTHBEARER in --client-sasl-mechanisms")
		}
	}
	switch {
	case oauth && a.ClientOAuthJWKS == "":
		return invalid("client-oauth-jwks", "", "is required by --client-sasl-mechanisms OAUTHBEARER")
	case strings.Contains(a.ClientOAuthJWKS, "://") && !strings.HasPrefix(a.ClientOAuthJWKS, "https://"):
		return invalid("client-oauth-jwks", a.ClientOAuthJWKS, "must be an https:// URL or a file")
	case a.ClientOAuthJWKS != "" && !strings.Contains(a.ClientOAuthJWKS, "://"):
		if err := checkFile("client-oauth-jwks", a.ClientOAuthJWKS, false); err != nil {
			return err
		}
	}
	if a.TLSPrincipalMappingRules != "" {
		if c.TLSClientCA == "" {
			return invalid("tls-principal-mapping-rules", a.TLSPrincipalMappingRules, "needs --tls-client-ca: only client certificates are mapped")
		}
		if _, err := authn.ParsePrincipalMappingRules(a.TLSPrincipalMappingRules); err != nil {
			return invalid("tls-principal-mapping-rules", a.TLSPrincipalMappingRules, "does not parse: "+err.Error())
		}
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
	case a.UpstreamPrincipalCredentials != "" && !a.ClientSASL() && c.TLSClientCA == "":
		return invalid("upstream-principal-credentials", a.UpstreamPrincipalCredentials, "needs client authentication at the proxy: --client-sasl-mechanisms, or --tls-client-ca with --tls-principal-mapping-rules")
	case a.UpstreamPrincipalCredentials != "" && c.Topology == TopologySingle && c.UpstreamSASLMechanism == "":
		return invalid("upstream-principal-credentials", a.UpstreamPrincipalCredentials,
			"needs --upstream-sasl-mechanism with --topology single: the proxy learns the cluster (metadata, coordinators) in its own name")
	}
	if err := checkFile("upstream-principal-credentials", a.UpstreamPrincipalCredentials, false); err != nil {
		return err
	}
	return checkFile("client-credentials", a.ClientCredentials, true)
}

// ClientSASL reports whether the proxy authenticates clients' SASL itself.
func (a *ClientAuth) ClientSASL() bool { return len(a.ClientSASLMechanisms) > 0 }
