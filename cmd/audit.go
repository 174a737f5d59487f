package cmd

import (
	"github.com/inorder-proxy/inorder/config"
)

// refuseAudit refuses the audit sinks while the proxy records no audit
// events: an operator who asks for a trail must not believe there is one.
// The audit package (events, queue, sinks) is complete; the proxy's
// request path does not call it yet.
func refuseAudit(c *config.Config) error {
	const why = "is not served yet: the proxy does not record audit events (see README, Audit trail)"
	switch {
	case c.AuditFile != "":
		return &config.FieldError{Field: "audit-file", Value: c.AuditFile, Reason: why}
	case c.AuditStdout:
		return &config.FieldError{Field: "audit-stdout", Value: "true", Reason: why}
	case c.AuditKafkaTopic != "":
		return &config.FieldError{Field: "audit-kafka-topic", Value: c.AuditKafkaTopic, Reason: why}
	}
	return nil
}
