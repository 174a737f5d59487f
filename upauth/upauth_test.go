package upauth

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
)

func cluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// refusingCluster is cluster behind a front that answers refused
// credentials as Apache Kafka does (SASL_AUTHENTICATION_FAILED, then a
// close) where kfake only closes.
func refusingCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	k, err := hostile.NewKafkaSASL(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k.Addr()
}

func secretFile(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// authenticate dials addr, authenticates, and proves the session works with
// a metadata request on the same connection.
func authenticate(t *testing.T, a *Authenticator, addr string) (Session, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := a.Authenticate(ctx, nc, "127.0.0.1")
	if err != nil {
		return s, err
	}
	c := &authConn{nc: nc, corr: 100}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4 // a non-flexible response header
	resp := kmsg.NewPtrMetadataResponse()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.roundTrip(req, resp); err != nil {
		t.Fatalf("metadata after authentication: %v", err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("metadata after authentication: %d brokers", len(resp.Brokers))
	}
	return s, nil
}

func TestMechanisms(t *testing.T) {
	for _, mech := range []string{config.MechanismPlain, config.MechanismScramSHA256, config.MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			addr := cluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "proxy", "s3cret"),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "60000"}))
			a, err := New(Options{Mechanism: mech, Username: "proxy", PasswordFile: secretFile(t, "s3cret")})
			if err != nil {
				t.Fatal(err)
			}
			s, err := authenticate(t, a, addr)
			if err != nil {
				t.Fatal(err)
			}
			if s.Lifetime != time.Minute {
				t.Errorf("lifetime %v, want the broker's 1m", s.Lifetime)
			}
			if left := time.Until(s.ReauthAt); left <= 50*time.Second || left > time.Minute {
				t.Errorf("re-authentication due in %v, want a little under 1m", left)
			}
		})
	}
}

func TestPasswordFromEnvironment(t *testing.T) {
	addr := cluster(t, kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "proxy", "fromenv"))
	env := map[string]string{config.EnvUpstreamSASLPassword: "fromenv"}
	a, err := New(Options{Mechanism: config.MechanismPlain, Username: "proxy", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := authenticate(t, a, addr)
	if err != nil {
		t.Fatal(err)
	}
	if s.Lifetime != 0 || !s.ReauthAt.IsZero() {
		t.Errorf("a broker without a session lifetime gave %+v", s)
	}
}

func TestWrongPasswordIsRefusedWithoutTheSecret(t *testing.T) {
	for _, mech := range []string{config.MechanismPlain, config.MechanismScramSHA256} {
		t.Run(mech, func(t *testing.T) {
			addr := refusingCluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "proxy", "right"))
			a, err := New(Options{Mechanism: mech, Username: "proxy", PasswordFile: secretFile(t, "wrong-secret")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = authenticate(t, a, addr)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("got %v, want ErrRefused", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, mech) || !strings.Contains(msg, "proxy") || strings.Contains(msg, "wrong-secret") {
				t.Errorf("error %q must name the mechanism and user and never the password", msg)
			}
		})
	}
}

// TestDroppedExchangeIsNotARefusal: an upstream that closes or resets the
// connection in the middle of SaslAuthenticate, with no answer, has
// refused nothing: the error is the connection's, not ErrRefused. It says
// so on one line, as whom, and what to check, never with the secret.
func TestDroppedExchangeIsNotARefusal(t *testing.T) {
	for _, drop := range []string{"close", "reset"} {
		t.Run(drop, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "proxy", "pw"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			relay, err := hostile.NewRelay("127.0.0.1:0", c.ListenAddrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { relay.Close() })
			c.ControlKey(int16(kmsg.SASLAuthenticate), func(kmsg.Request) (kmsg.Response, error, bool) {
				if drop == "reset" {
					relay.Cut()
				}
				return nil, errors.New("connection dropped by the test"), true
			})
			a, err := New(Options{Mechanism: config.MechanismScramSHA256, Username: "proxy", PasswordFile: secretFile(t, "pw-7d1e")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = authenticate(t, a, relay.Addr())
			if err == nil || errors.Is(err, ErrRefused) {
				t.Fatalf("got %v, want the connection's failure, not ErrRefused", err)
			}
			ce, ok := errors.AsType[*ClosedError](err)
			if !ok || ce.Step != "SaslAuthenticate" {
				t.Fatalf("got %v (%T), want a *ClosedError at SaslAuthenticate", err, err)
			}
			msg := err.Error()
			for _, want := range []string{
				"the connection during SCRAM-SHA-256 authentication as user \"proxy\" (SaslAuthenticate: ",
				"usually a wrong password or user, or the mechanism not enabled on the broker's listener (some brokers close instead of answering a refusal)",
				"check --upstream-sasl-username, the password (--upstream-sasl-password-file or $INORDER_UPSTREAM_SASL_PASSWORD) and --upstream-sasl-mechanism",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if drop == "close" && !strings.HasPrefix(msg, "the upstream closed the connection during") {
				t.Errorf("error %q does not say the upstream closed the connection", msg)
			}
			if strings.Contains(msg, "pw-7d1e") || strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q holds the password or a line break", msg)
			}
		})
	}
}

func TestUnknownMechanismUpstream(t *testing.T) {
	addr := cluster(t, kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "proxy", "x"))
	a, err := New(Options{Mechanism: config.MechanismOAuthBearer, TokenFile: secretFile(t, "tok")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = authenticate(t, a, addr)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "PLAIN") {
		t.Fatalf("got %v, want a refusal listing what the upstream offers", err)
	}
}

func TestSecretReadAtEachAuthentication(t *testing.T) {
	addr := refusingCluster(t, kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA512, "proxy", "second"))
	file := secretFile(t, "first")
	a, err := New(Options{Mechanism: config.MechanismScramSHA512, Username: "proxy", PasswordFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authenticate(t, a, addr); !errors.Is(err, ErrRefused) {
		t.Fatalf("old password: got %v, want ErrRefused", err)
	}
	if err := os.WriteFile(file, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := authenticate(t, a, addr); err != nil {
		t.Fatalf("rotated password: %v", err)
	}
}

func TestMissingSecret(t *testing.T) {
	none := func(string) string { return "" }
	cases := []Options{
		{Mechanism: config.MechanismPlain, Username: "u", Getenv: none},
		{Mechanism: config.MechanismScramSHA256, Username: "u", PasswordFile: filepath.Join(t.TempDir(), "absent")},
		{Mechanism: config.MechanismOAuthBearer, TokenFile: secretFile(t, "")},
	}
	for _, o := range cases {
		if _, err := New(o); !errors.Is(err, ErrNoSecret) {
			t.Errorf("%+v: got %v, want ErrNoSecret", o, err)
		}
	}
}

func TestReauthMargin(t *testing.T) {
	cases := []struct{ lifetime, latency, want time.Duration }{
		{time.Hour, time.Millisecond, 3 * time.Minute},
		{10 * time.Second, time.Millisecond, time.Second},
		{10 * time.Second, 2 * time.Second, 2200 * time.Millisecond},
		{500 * time.Millisecond, time.Millisecond, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := reauthMargin(tc.lifetime, tc.latency); got != tc.want {
			t.Errorf("margin(%v, %v) = %v, want %v", tc.lifetime, tc.latency, got, tc.want)
		}
	}
}

// TestClosedErrorSaysWhatToCheck: each kind of closed exchange names the
// settings that bear on it.
func TestClosedErrorSaysWhatToCheck(t *testing.T) {
	for _, tc := range []struct {
		err  ClosedError
		want string
	}{
		{ClosedError{Mechanism: config.MechanismScramSHA512, User: "u", Step: "SaslHandshake", Err: io.EOF},
			`the upstream closed the connection during SCRAM-SHA-512 authentication as user "u" (SaslHandshake: EOF): usually a listener without SASL or without this mechanism; check --upstream-sasl-mechanism and the --upstream address`},
		{ClosedError{Mechanism: config.MechanismOAuthBearer, Step: "SaslAuthenticate", Err: io.ErrUnexpectedEOF},
			`the upstream closed the connection during OAUTHBEARER authentication (SaslAuthenticate: unexpected EOF): usually a token that is invalid or expired, or the mechanism not enabled on the broker's listener (some brokers close instead of answering a refusal); check --upstream-sasl-token-file and --upstream-sasl-mechanism`},
		{ClosedError{Mechanism: config.MechanismPlain, User: "u", Step: "SaslAuthenticate", Err: syscall.ECONNRESET},
			`the upstream reset the connection during PLAIN authentication as user "u" (SaslAuthenticate: connection reset by peer): usually a wrong password or user`},
	} {
		if got := tc.err.Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("got\n\t%s\nwant\n\t%s", got, tc.want)
		}
	}
}
