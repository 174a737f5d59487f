package proxy

import "github.com/inorder-proxy/inorder/audit"

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
