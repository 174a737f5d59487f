package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/tlsconf"
	"github.com/inorder-proxy/inorder/upauth"
	"github.com/inorder-proxy/inorder/wire"
)

// security is the proxy's TLS and SASL state. Its zero value speaks
// plaintext on both sides and passes clients' SASL through.
type security struct {
	listener *tlsconf.Server       // nil: plaintext listeners
	upTLS    *tls.Config           // nil: plaintext upstream
	upName   string                // verified name of the configured upstreams; empty: their host
	auth     *upauth.Authenticator // nil: clients' SASL passes through
	gate     upauth.Gates
	failures rateLog // TLS handshakes and refused authentications
}

// handshakeTimeout bounds a client's TLS handshake, so a peer that opens a
// TLS port and sends nothing holds no connection for long.
const handshakeTimeout = 10 * time.Second

// initSecurity builds TLS and SASL from the configuration.
func (p *Proxy) initSecurity() error {
	s := &p.cfg.Security
	if s.ListenerTLS() {
		srv, err := tlsconf.NewServer(s.TLSCert, s.TLSKey, s.TLSClientCA, p.log)
		if err != nil {
			return err
		}
		srv.Watch(tlsconf.PollInterval)
		p.sec.listener = srv
	}
	if s.UpstreamTLSEnabled() {
		cfg, err := tlsconf.Upstream(tlsconf.UpstreamOptions{
			CA: s.UpstreamTLSCA, Cert: s.UpstreamTLSCert, Key: s.UpstreamTLSKey,
			InsecureSkipVerify: s.UpstreamTLSInsecureSkipVerify,
		})
		if err != nil {
			p.closeSecurity()
			return err
		}
		if s.UpstreamTLSInsecureSkipVerify {
			p.log.Warn("--upstream-tls-insecure-skip-verify is set: the upstream's certificate is not verified, and anyone on the path can read and change the traffic")
		}
		p.sec.upTLS, p.sec.upName = cfg, s.UpstreamTLSServerName
	}
	if o, ok := upauth.FromConfig(*s); ok {
		a, err := upauth.New(o)
		if err != nil {
			p.closeSecurity()
			return err
		}
		p.sec.auth = a
		if p.sec.upTLS == nil {
			p.log.Warn("the proxy authenticates upstream without TLS: the exchange can be read on the path", "mechanism", a.Mechanism())
		}
	}
	return nil
}

// closeSecurity stops the certificate watcher.
func (p *Proxy) closeSecurity() {
	if p.sec.listener != nil {
		p.sec.listener.Close()
	}
}

// ReloadCertificates re-reads the listeners' certificate and key now, as
// on SIGHUP. A pair that does not load keeps the current one and is
// returned as the error. Without TLS listeners it does nothing.
func (p *Proxy) ReloadCertificates() error {
	if p.sec.listener == nil {
		return nil
	}
	return p.sec.listener.Reload()
}

// listen opens a listener on addr, speaking TLS when configured.
func (p *Proxy) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return p.secure(ln), nil
}

// listenBoot is listen for the bootstrap listener, which WithListener may
// have opened already; with the sni topology it is the one SNI listener.
func (p *Proxy) listenBoot(addr string) (net.Listener, error) {
	ln := p.bound
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, err
		}
	}
	if p.cfg.Topology == config.TopologySNI {
		return p.sniListener(ln), nil
	}
	return p.secure(ln), nil
}

// secure wraps ln in TLS when the listeners speak it.
func (p *Proxy) secure(ln net.Listener) net.Listener {
	if p.sec.listener == nil {
		return ln
	}
	return tls.NewListener(ln, p.sec.listener.Config())
}

// handshake completes a client's TLS handshake, if the listener speaks TLS,
// before anything is dialled for it. A failure is logged, rate-limited,
// with its reason, and closes only this connection.
func (p *Proxy) handshake(ctx context.Context, nc net.Conn) error {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	err := tc.HandshakeContext(hctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ErrShutdown // cut by the proxy closing, not the client's fault
	}
	if refused := sniRefusal(nc); refused != nil {
		return refused // counted and logged by admit, with the name
	}
	kind, reason := tlsFailure(err)
	p.metrics.TLSHandshakeFailure(metrics.SideClient, kind)
	if skipped, ok := p.sec.failures.allow(string(kind), time.Now()); ok {
		p.log.Warn("tls handshake failed; connection closed", "client", nc.RemoteAddr().String(), "reason", reason, "similar_failures_not_logged", skipped)
	}
	failed := fmt.Errorf("%w: %s", ErrTLSHandshake, reason)
	if cert := refusedCertificate(err); cert != nil {
		return &certRefusedError{error: failed, cert: cert, reason: reason}
	}
	return failed
}

// certRefusedError is a handshake that refused the client certificate
// cert because the CAs do not verify it (an unknown authority, expired,
// a usage the certificate lacks): the audit records it as a refused
// authentication (auditclaim.go).
type certRefusedError struct {
	error
	cert   *x509.Certificate
	reason string
}

func (e *certRefusedError) Unwrap() error { return e.error }

// refusedCertificate is the client certificate a failed handshake did not
// verify, nil when the handshake failed otherwise. crypto/tls hands the
// certificates it refused back in its error, after sending the client
// the alert the failure calls for, so the verification and what the
// client sees stay crypto/tls's alone.
func refusedCertificate(err error) *x509.Certificate {
	var verify *tls.CertificateVerificationError
	if !errors.As(err, &verify) || len(verify.UnverifiedCertificates) == 0 {
		return nil
	}
	return verify.UnverifiedCertificates[0]
}

// tlsFailure names why a handshake failed, and its kind for metrics and
// rate limiting.
func tlsFailure(err error) (kind metrics.TLSFailure, reason string) {
	var rec tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &rec):
		return metrics.TLSPlaintext, plaintextOnTLS(rec.RecordHeader)
	case errors.As(err, &unknown):
		return metrics.TLSUnknownAuthority, "the client certificate does not verify: " + err.Error()
	case errors.As(err, &verify):
		return metrics.TLSBadCertificate, "the client certificate does not verify: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.TLSTimeout, fmt.Sprintf("no handshake within %v", handshakeTimeout)
	case errors.Is(err, io.EOF):
		return metrics.TLSEOF, "the client closed the connection during the handshake"
	}
	return metrics.TLSOther, err.Error()
}

// plaintextOnTLS says what a client that did not speak TLS sent, from
// the first bytes crypto/tls read as a record header.
func plaintextOnTLS(h [5]byte) string {
	if nk := wire.Sniff([4]byte(h[:4])); nk != nil && nk.Protocol == wire.HTTPRequest {
		return httpOnKafkaPort(nk)
	}
	if h[0] == 0 {
		// A Kafka length prefix: its first byte is 0 below 16 MiB, as
		// every first request of a connection is.
		return "a plaintext Kafka client on a TLS listener: enable TLS (security.protocol=SSL) in the client"
	}
	return fmt.Sprintf("the client did not speak TLS (its first bytes are % x): a plaintext client on a TLS listener", h[:])
}

// dialSecure makes an upstream connection ready for requests: TCP, then
// TLS when configured, then SASL when the proxy authenticates, as the
// identity ctx carries (upauth.WithIdentity) or else in its own name. configured
// says addr is one of the upstream addresses given to the proxy, which may
// be verified by another name; addresses learned from metadata are
// verified by their own host.
func (p *Proxy) dialSecure(ctx context.Context, addr string, configured bool) (net.Conn, upauth.Session, error) {
	auth := upauth.Identity(ctx, p.sec.auth)
	if err := p.sec.gate.Check(upauth.GateKey(addr, auth, p.sec.auth)); err != nil {
		return nil, upauth.Session{}, err
	}
	if timeout := p.current().DialTimeout; timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if p.ctx.Err() == nil {
			p.dialFails.failed(p.log, addr, err)
			p.dialFailed(err)
		}
		return nil, upauth.Session{}, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	host, _, _ := net.SplitHostPort(addr)
	if p.sec.upTLS != nil {
		name := host
		if configured && p.sec.upName != "" {
			name = p.sec.upName
		}
		tc := tls.Client(nc, tlsconf.ForHost(p.sec.upTLS, name))
		if err := tc.HandshakeContext(ctx); err != nil {
			kind, _ := tlsFailure(err)
			p.metrics.TLSHandshakeFailure(metrics.SideUpstream, kind)
			p.metrics.UpstreamDialError(metrics.DialTLS)
			nc.Close()
			return nil, upauth.Session{}, fmt.Errorf("tls to %s (verified as %s): %w", addr, name, err)
		}
		nc = tc
	}
	if auth == nil {
		p.dialFails.succeeded(p.log, addr)
		return nc, upauth.Session{}, nil
	}
	sess, err := p.authenticate(ctx, auth, nc, addr)
	if err != nil {
		nc.Close()
		if !errors.Is(err, ErrUpstreamAuth) && p.ctx.Err() == nil {
			// The connection failed during the exchange: no answer
			// refused anything, so it counts as a failed dial.
			p.dialFails.failed(p.log, addr, err)
			p.metrics.UpstreamDialError(metrics.DialSASL)
		}
		return nil, upauth.Session{}, err
	}
	p.dialFails.succeeded(p.log, addr)
	return nc, sess, nil
}

// authenticate runs a SASL exchange as auth on nc, connected to addr,
// records the outcome for the back-off of that address and identity and
// for readiness, and logs a refusal (rate-limited) with the mechanism and
// user.
func (p *Proxy) authenticate(ctx context.Context, auth *upauth.Authenticator, nc net.Conn, addr string) (upauth.Session, error) {
	host, _, _ := net.SplitHostPort(addr)
	sess, err := auth.Authenticate(ctx, nc, host)
	key := upauth.GateKey(addr, auth, p.sec.auth)
	switch {
	case err == nil:
		p.sec.gate.Succeeded(key)
		p.metrics.SASLAuthentication(auth.Mechanism(), metrics.ResultSuccess)
	case errors.Is(err, upauth.ErrRefused), errors.Is(err, upauth.ErrNoSecret):
		p.metrics.SASLAuthentication(auth.Mechanism(), metrics.ResultFailure)
		p.metrics.UpstreamDialError(metrics.DialSASL)
		wait := p.sec.gate.Failed(key, err)
		if skipped, ok := p.sec.failures.allow("sasl", time.Now()); ok {
			p.log.Error("upstream authentication failed", "upstream", addr, "mechanism", auth.Mechanism(), "user", auth.User(),
				"err", err, "retry_in", wait, "similar_failures_not_logged", skipped)
		}
		err = fmt.Errorf("%w: %v", ErrUpstreamAuth, err)
	}
	return sess, err
}
