package proxy

import (
	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/config"
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

// AuditExchange returns a function that records, as a connection of p
// with cfg recording into rec does, the request frame answered by the
// response frame: read on the client reader, then delivered.
func AuditExchange(p *Proxy, cfg *config.Config, rec audit.Recorder, frame, resp []byte) (func(), error) {
	return auditExchange(p, cfg, rec, frame, resp, 0)
}

// AuditExchangeUnread is AuditExchange for a request whose body goes
// upstream unread (spliced), its head alone read by the proxy.
func AuditExchangeUnread(p *Proxy, cfg *config.Config, rec audit.Recorder, frame, resp []byte) (func(), error) {
	return auditExchange(p, cfg, rec, frame, resp, 1)
}

func auditExchange(p *Proxy, cfg *config.Config, rec audit.Recorder, frame, resp []byte, stream int) (func(), error) {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, err
	}
	p.aud.rec = rec
	c := &conn{p: p, cfg: cfg, halt: make(chan struct{})}
	c.aud.a = rec.Open(audit.ConnInfo{ID: 1, Listener: "node", ClientAddress: "127.0.0.1:1"})
	r := &request{hdr: h, frame: &wire.Buf{B: frame}, resp: &wire.Buf{B: resp}, stream: stream}
	rs := []*request{r}
	return func() {
		c.auditRead(r)
		c.auditDelivered(rs)
	}, nil
}
