package proxy

import (
	"context"
	"errors"

	"github.com/inorder-proxy/inorder/audit"
)

// auditCertRefused records a client certificate that maps to no principal
// as a refused authentication (mechanism TLS) when the connection opens,
// with its subject (the event's tls_subject) and why; client reader. The
// client is closed at its first request, recorded as a denial of its own.
func (c *conn) auditCertRefused(subject string) {
	if subject == "" || c.auth.s == nil {
		return
	}
	err := c.auth.s.CertRefused()
	if err == nil {
		return
	}
	_ = c.p.aud.rec.Authentication(c.auditContext(), c.aud.a, &audit.Authentication{Mechanism: "TLS", APIKey: audit.NoAPIKey, Reason: err.Error()})
}

// auditHandshakeRefused records a TLS handshake that refused the client's
// certificate (the CAs do not verify it) as a refused authentication,
// mechanism TLS, with the certificate's subject and why, on a connection
// of its own that opens and closes with it; the connection's goroutine,
// before it ends. A handshake that fails otherwise (no certificate where
// one is required, a client that does not speak TLS, a timeout) claims no
// one and is not recorded: the log and
// inorder_tls_handshake_failures_total count it.
func (c *conn) auditHandshakeRefused(err error) {
	rec := c.p.aud.rec
	var refused *certRefusedError
	if rec == nil || !errors.As(err, &refused) {
		return
	}
	info := audit.ConnInfo{ID: c.p.aud.ids.Add(1), Listener: c.listenerName(), ClientAddress: c.client.RemoteAddr().String(),
		TLSSubject: refused.cert.Subject.String()}
	a := rec.Open(info)
	// The connection is not served: a wait for room in a full queue is
	// bounded as a closing connection's is, and by the proxy's stop.
	ctx, cancel := context.WithTimeout(c.p.ctx, lingerTimeout)
	defer cancel()
	_ = rec.Authentication(ctx, a, &audit.Authentication{Mechanism: "TLS", APIKey: audit.NoAPIKey, Reason: refused.reason})
	_ = rec.Close(ctx, a)
}
