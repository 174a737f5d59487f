// Package upauth authenticates the proxy's upstream connections with SASL
// in the proxy's own name, so that clients holding no credentials can use
// a cluster that requires them. The mechanisms are franz-go's pkg/sasl; the
// exchange is SaslHandshake v1 and SaslAuthenticate v1 requests built with
// kmsg, run on a connection before anything else is sent on it.
//
// Secrets are read from their file (or the environment) at each
// authentication, so a rotated password or token applies to the next
// connection and the next re-authentication, and they appear in no error.
package upauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
)

// Errors of an authentication. Match them with errors.Is.
var (
	// ErrRefused: the upstream refused the credentials by an error in
	// its answer. A connection closed during the exchange is not a
	// refusal.
	ErrRefused = errors.New("upstream authentication failed")
	// ErrNoSecret: the password or token file is empty or unreadable, or
	// neither the password file nor the environment variable is set.
	ErrNoSecret = errors.New("no upstream SASL secret")
)

// ClosedError is the error of an exchange whose connection the upstream
// closed or reset before answering. It does not wrap ErrRefused: nothing
// refused the credentials in an answer, and the connection is retried as
// a failed dial is. Its message names the mechanism, the user, the usual
// causes and the settings to check, on one line, never the secret.
type ClosedError struct {
	Mechanism string
	User      string // empty for OAUTHBEARER
	Step      string // SaslHandshake or SaslAuthenticate
	Err       error  // what reading or writing the connection returned
	// Source is where the credentials were configured when not by the
	// --upstream-sasl-* flags (Options.Source).
	Source string
}

func (e *ClosedError) Error() string {
	var b strings.Builder
	if errors.Is(e.Err, syscall.ECONNRESET) {
		b.WriteString("the upstream reset the connection during ")
	} else {
		b.WriteString("the upstream closed the connection during ")
	}
	b.WriteString(e.Mechanism)
	b.WriteString(" authentication")
	if e.User != "" {
		fmt.Fprintf(&b, " as user %q", e.User)
	}
	fmt.Fprintf(&b, " (%s: %v)", e.Step, e.Err)
	switch {
	case e.Source != "":
		b.WriteString(": usually a wrong password or user, a mechanism the broker's listener does not enable, or an invalid token; check " + e.Source)
	case e.Step == "SaslHandshake":
		b.WriteString(": usually a listener without SASL or without this mechanism; check --upstream-sasl-mechanism and the --upstream address")
	case e.Mechanism == config.MechanismOAuthBearer:
		b.WriteString(": usually a token that is invalid or expired, or the mechanism not enabled on the broker's listener (some brokers close instead of answering a refusal); check --upstream-sasl-token-file and --upstream-sasl-mechanism")
	default:
		b.WriteString(": usually a wrong password or user, or the mechanism not enabled on the broker's listener (some brokers close instead of answering a refusal); check --upstream-sasl-username, the password (--upstream-sasl-password-file or $" + config.EnvUpstreamSASLPassword + ") and --upstream-sasl-mechanism")
	}
	return b.String()
}

func (e *ClosedError) Unwrap() error { return e.Err }

// Options say how to authenticate. The zero value is not usable: New
// requires a mechanism.
type Options struct {
	Mechanism    string // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
	Username     string // PLAIN and SCRAM
	PasswordFile string // PLAIN and SCRAM; empty: PasswordEnv
	// PasswordEnv names the environment variable holding the password
	// when PasswordFile is empty; empty: config.EnvUpstreamSASLPassword.
	PasswordEnv string
	TokenFile   string // OAUTHBEARER
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Source says where the credentials are configured, for errors that
	// tell what to check; empty: the --upstream-sasl-* flags.
	Source string
}

// FromConfig returns the options the configuration asks for, and false when
// it asks for none.
func FromConfig(s config.Security) (Options, bool) {
	if s.UpstreamSASLMechanism == "" {
		return Options{}, false
	}
	return Options{
		Mechanism:    s.UpstreamSASLMechanism,
		Username:     s.UpstreamSASLUsername,
		PasswordFile: s.UpstreamSASLPasswordFile,
		TokenFile:    s.UpstreamSASLTokenFile,
	}, true
}

// Authenticator authenticates upstream connections. It is safe for
// concurrent use.
type Authenticator struct {
	o    Options
	mech sasl.Mechanism
}

// New checks that the secret can be read now and returns the
// Authenticator.
func New(o Options) (*Authenticator, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	a := &Authenticator{o: o}
	switch o.Mechanism {
	case config.MechanismPlain:
		a.mech = plain.Plain(func(context.Context) (plain.Auth, error) {
			pass, err := a.password()
			return plain.Auth{User: o.Username, Pass: pass}, err
		})
	case config.MechanismScramSHA256, config.MechanismScramSHA512:
		fn := func(context.Context) (scram.Auth, error) {
			pass, err := a.password()
			return scram.Auth{User: o.Username, Pass: pass}, err
		}
		if o.Mechanism == config.MechanismScramSHA256 {
			a.mech = scram.Sha256(fn)
		} else {
			a.mech = scram.Sha512(fn)
		}
	case config.MechanismOAuthBearer:
		a.mech = oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readSecret(o.TokenFile)
			return oauth.Auth{Token: tok}, err
		})
	default:
		return nil, fmt.Errorf("upstream-sasl-mechanism %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", o.Mechanism)
	}
	if _, _, err := a.mech.Authenticate(context.Background(), ""); err != nil {
		return nil, err
	}
	return a, nil
}

// Mechanism returns the mechanism's name.
func (a *Authenticator) Mechanism() string { return a.o.Mechanism }

// User returns the user name, empty for OAUTHBEARER.
func (a *Authenticator) User() string { return a.o.Username }

func (a *Authenticator) password() (string, error) {
	if a.o.PasswordFile != "" {
		return readSecret(a.o.PasswordFile)
	}
	env := a.o.PasswordEnv
	if env == "" {
		env = config.EnvUpstreamSASLPassword
	}
	if p := a.o.Getenv(env); p != "" {
		return p, nil
	}
	if a.o.PasswordEnv != "" {
		return "", fmt.Errorf("%w: $%s is not set", ErrNoSecret, env)
	}
	return "", fmt.Errorf("%w: set upstream-sasl-password-file or %s", ErrNoSecret, config.EnvUpstreamSASLPassword)
}

// readSecret reads a one-line secret; a trailing newline, as editors and
// `echo` write, is not part of it.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNoSecret, path, errors.Unwrap(err))
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("%w: %s is empty", ErrNoSecret, path)
	}
	return string(b), nil
}

// Session is the outcome of a successful authentication.
type Session struct {
	// Lifetime is the SessionLifetimeMs the upstream announced; zero
	// means the session does not expire.
	Lifetime time.Duration
	// ReauthAt is when the connection should re-authenticate, ahead of
	// the expiry by a margin for latency and clocks; zero when Lifetime
	// is zero.
	ReauthAt time.Time
}

// reauthMargin is how far ahead of the announced expiry a connection
// re-authenticates: 5% of the lifetime, at least a second or 1.1 times
// the exchange's own latency. The broker closes a connection used past
// its session, so erring early costs one exchange, erring late a
// connection.
func reauthMargin(lifetime, latency time.Duration) time.Duration {
	m := max(time.Second, latency+latency/10, lifetime/20)
	return min(m, lifetime)
}

func newSession(start time.Time, lifetimeMs int64) Session {
	if lifetimeMs <= 0 {
		return Session{}
	}
	// A lifetime beyond a year never matters and must not overflow.
	const maxMs = int64(365 * 24 * time.Hour / time.Millisecond)
	lifetime := time.Duration(min(lifetimeMs, maxMs)) * time.Millisecond
	latency := time.Since(start)
	return Session{Lifetime: lifetime, ReauthAt: start.Add(lifetime - reauthMargin(lifetime, latency))}
}
