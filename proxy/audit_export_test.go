package proxy

import (
	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/wire"
)

// AuditDenied records, as a connection of p recording into rec does, a
// request refused at the proxy.
func AuditDenied(p *Proxy, rec audit.Recorder, frame []byte, code int16, res ...audit.Resource) error {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return err
	}
	p.aud.rec = rec
	c := &conn{p: p, halt: make(chan struct{})}
	c.aud.a = rec.Open(audit.ConnInfo{ID: 1, Listener: "bootstrap", ClientAddress: "127.0.0.1:1"})
	c.auditDenied(h, frame, code, res...)
	return rec.Close(c.auditContext(), c.aud.a)
}
