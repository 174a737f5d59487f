package config

import (
	"fmt"
	"net"
	"os"

	"github.com/spf13/pflag"
)

// SASL mechanisms the proxy can authenticate to the upstream with.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// EnvUpstreamSASLPassword is the environment variable the upstream SASL
// password is read from when no password file is given. A password is never
// taken from a flag value, which would show in the process list and in
// shell history.
const EnvUpstreamSASLPassword = "INORDER_UPSTREAM_SASL_PASSWORD"

// Security holds TLS on both sides and SASL from the proxy. Every field's
// zero value turns its feature off: plaintext listeners, a plaintext
// upstream, and SASL passed through from clients.
type Security struct {
	// TLSCert and TLSKey are PEM files; when set, every listener speaks
	// TLS. They are re-read when they change and on SIGHUP.
	TLSCert string
	TLSKey  string
	// TLSClientCA is a PEM file of CAs; when set, clients must present a
	// certificate that verifies against them (mutual TLS).
	TLSClientCA string

	// UpstreamTLS dials the upstream with TLS, verified with the system
	// roots. Any other UpstreamTLS* field implies it.
	UpstreamTLS bool
	// UpstreamTLSCA is a PEM file of CAs that replaces the system roots.
	UpstreamTLSCA string
	// UpstreamTLSCert and UpstreamTLSKey are the proxy's client
	// certificate towards the upstream.
	UpstreamTLSCert string
	UpstreamTLSKey  string
	// UpstreamTLSServerName is verified and sent as SNI on connections to
	// the configured upstream addresses, when those addresses are not the
	// certificate's name. Empty means the dialled host. Node addresses
	// learned from metadata are always verified by their own host names.
	UpstreamTLSServerName string
	// UpstreamTLSInsecureSkipVerify accepts any upstream certificate.
	// A warning is logged at every start.
	UpstreamTLSInsecureSkipVerify bool

	// UpstreamSASLMechanism makes the proxy authenticate every upstream
	// connection itself: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
	// OAUTHBEARER. Empty passes clients' own SASL through.
	UpstreamSASLMechanism string
	// UpstreamSASLUsername is the user for PLAIN and SCRAM.
	UpstreamSASLUsername string
	// UpstreamSASLPasswordFile holds the password, re-read at each
	// authentication. Empty means the INORDER_UPSTREAM_SASL_PASSWORD
	// environment variable.
	UpstreamSASLPasswordFile string
	// UpstreamSASLTokenFile holds the OAUTHBEARER token, re-read at each
	// authentication.
	UpstreamSASLTokenFile string
	// AllowUnauthenticatedClients lets the proxy authenticate upstream for
	// clients it has not authenticated itself while listening on a
	// non-loopback address. False refuses that unless TLSClientCA is set.
	AllowUnauthenticatedClients bool

	ClientAuth
	ACL
}

// ListenerTLS reports whether the listeners speak TLS.
func (s *Security) ListenerTLS() bool { return s.TLSCert != "" }

// UpstreamTLSEnabled reports whether upstream connections use TLS.
func (s *Security) UpstreamTLSEnabled() bool {
	return s.UpstreamTLS || s.UpstreamTLSCA != "" || s.UpstreamTLSCert != "" ||
		s.UpstreamTLSServerName != "" || s.UpstreamTLSInsecureSkipVerify
}

func bindSecurityFlags(fs *pflag.FlagSet, s *Security) {
	fs.StringVar(&s.TLSCert, "tls-cert", s.TLSCert, "PEM certificate of every listener; turns TLS on towards clients")
	fs.StringVar(&s.TLSKey, "tls-key", s.TLSKey, "PEM private key of --tls-cert")
	fs.StringVar(&s.TLSClientCA, "tls-client-ca", s.TLSClientCA, "PEM CAs that client certificates must verify against (mutual TLS)")
	fs.BoolVar(&s.UpstreamTLS, "upstream-tls", s.UpstreamTLS, "dial the upstream with TLS, verified with the system roots")
	fs.StringVar(&s.UpstreamTLSCA, "upstream-tls-ca", s.UpstreamTLSCA, "PEM CAs that verify the upstream instead of the system roots")
	fs.StringVar(&s.UpstreamTLSCert, "upstream-tls-cert", s.UpstreamTLSCert, "PEM client certificate presented to the upstream")
	fs.StringVar(&s.UpstreamTLSKey, "upstream-tls-key", s.UpstreamTLSKey, "PEM private key of --upstream-tls-cert")
	fs.StringVar(&s.UpstreamTLSServerName, "upstream-tls-server-name", s.UpstreamTLSServerName, "name verified and sent as SNI when dialling the --upstream addresses (default: their host)")
	fs.BoolVar(&s.UpstreamTLSInsecureSkipVerify, "upstream-tls-insecure-skip-verify", s.UpstreamTLSInsecureSkipVerify, "accept any upstream certificate (unsafe; warned at every start)")
	fs.StringVar(&s.UpstreamSASLMechanism, "upstream-sasl-mechanism", s.UpstreamSASLMechanism, "authenticate upstream as the proxy: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (default: pass clients' SASL through)")
	fs.StringVar(&s.UpstreamSASLUsername, "upstream-sasl-username", s.UpstreamSASLUsername, "user for PLAIN and SCRAM")
	fs.StringVar(&s.UpstreamSASLPasswordFile, "upstream-sasl-password-file", s.UpstreamSASLPasswordFile, "file holding the password, re-read at each authentication (default: $"+EnvUpstreamSASLPassword+")")
	fs.StringVar(&s.UpstreamSASLTokenFile, "upstream-sasl-token-file", s.UpstreamSASLTokenFile, "file holding the OAUTHBEARER token, re-read at each authentication")
	fs.BoolVar(&s.AllowUnauthenticatedClients, "allow-unauthenticated-clients", s.AllowUnauthenticatedClients, "with --upstream-sasl-mechanism on a non-loopback listener, serve clients that neither present a client certificate nor authenticate with --client-sasl-mechanisms")
	bindClientAuthFlags(fs, &s.ClientAuth)
	bindACLFlags(fs, &s.ACL)
}

func (c *Config) validateSecurity() error {
	s := &c.Security
	if err := pair("tls-cert", s.TLSCert, "tls-key", s.TLSKey); err != nil {
		return err
	}
	if s.TLSClientCA != "" && s.TLSCert == "" {
		return invalid("tls-client-ca", s.TLSClientCA, "needs --tls-cert and --tls-key: client certificates are asked for on TLS listeners only")
	}
	if err := pair("upstream-tls-cert", s.UpstreamTLSCert, "upstream-tls-key", s.UpstreamTLSKey); err != nil {
		return err
	}
	if err := validateSASL("upstream", s.UpstreamSASLMechanism, s.UpstreamSASLUsername, s.UpstreamSASLPasswordFile, s.UpstreamSASLTokenFile); err != nil {
		return err
	}
	if err := c.validateClientAuth(); err != nil {
		return err
	}
	if err := c.validateACL(); err != nil {
		return err
	}
	if s.UpstreamSASLMechanism != "" && s.TLSClientCA == "" && !s.ClientSASL() && !s.AllowUnauthenticatedClients && !loopbackListen(c.Listen) {
		return invalid("listen", c.Listen, "is not a loopback address, and with --upstream-sasl-mechanism every client would act with the proxy's identity: "+
			"authenticate clients with --client-sasl-mechanisms or --tls-client-ca, or accept this with --allow-unauthenticated-clients")
	}
	// In the order --help lists them, so that a certificate and its key
	// both missing are reported certificate first.
	for _, f := range []struct {
		name, path string
		secret     bool
	}{
		{"tls-cert", s.TLSCert, false},
		{"tls-key", s.TLSKey, true},
		{"tls-client-ca", s.TLSClientCA, false},
		{"upstream-tls-ca", s.UpstreamTLSCA, false},
		{"upstream-tls-cert", s.UpstreamTLSCert, false},
		{"upstream-tls-key", s.UpstreamTLSKey, true},
		{"upstream-sasl-password-file", s.UpstreamSASLPasswordFile, true},
		{"upstream-sasl-token-file", s.UpstreamSASLTokenFile, true},
	} {
		if err := checkFile(f.name, f.path, f.secret); err != nil {
			return err
		}
	}
	return nil
}

// pair refuses a certificate without its key or a key without its
// certificate, naming the one that was given.
func pair(certName, cert, keyName, key string) error {
	switch {
	case cert != "" && key == "":
		return invalid(certName, cert, "needs --"+keyName+", its private key")
	case cert == "" && key != "":
		return invalid(keyName, key, "needs --"+certName+", the certificate it is the key of")
	}
	return nil
}

// loopbackListen reports whether listen binds only the loopback interface.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkFile refuses a file that cannot be read and, when it holds a
// secret, one that other users may read: whoever can read it can act as
// the proxy. Group access is allowed, since Kubernetes mounts secrets for a
// non-root user through its group.
func checkFile(field, path string, secret bool) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return invalid(field, path, "cannot be read: "+FileReason(err))
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return invalid(field, path, fmt.Sprintf("cannot be read: %v", err))
	}
	if secret && fi.Mode().Perm()&0o004 != 0 {
		return invalid(field, path, fmt.Sprintf("holds a secret and is readable by other users (mode %v): chmod o-r it", fi.Mode().Perm()))
	}
	return nil
}

// validateSASL checks one set of the --PREFIX-sasl-* flags with which the
// proxy authenticates as a client: the mechanism, and what it needs.
func validateSASL(prefix, mechanism, username, passwordFile, tokenFile string) error {
	flag := func(name string) string { return prefix + "-sasl-" + name }
	switch mechanism {
	case "":
		for _, f := range []struct{ name, value string }{
			{flag("username"), username},
			{flag("password-file"), passwordFile},
			{flag("token-file"), tokenFile},
		} {
			if f.value != "" {
				return invalid(f.name, f.value, "needs --"+flag("mechanism"))
			}
		}
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		if username == "" {
			return invalid(flag("username"), "", "is required by --"+flag("mechanism")+" "+mechanism)
		}
		if tokenFile != "" {
			return invalid(flag("token-file"), tokenFile, "is only for --"+flag("mechanism")+" OAUTHBEARER")
		}
	case MechanismOAuthBearer:
		if tokenFile == "" {
			return invalid(flag("token-file"), "", "is required by --"+flag("mechanism")+" OAUTHBEARER")
		}
	default:
		return invalid(flag("mechanism"), mechanism, "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	}
	return nil
}
