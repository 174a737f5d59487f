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

// AuditExchangeStreamed is AuditExchange for a Produce whose body streams
// in None mode, its head alone read: with counted, its partitions are
// counted as the stream finds them (from frame, scanned here as the
// stream would), as they are; without, as they were not.
func AuditExchangeStreamed(p *Proxy, cfg *config.Config, rec audit.Recorder, frame, resp []byte, counted bool) (func(), error) {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, err
	}
	p.aud.rec = rec
	c := &conn{p: p, cfg: cfg, halt: make(chan struct{}), bs: new(bodyStream)}
	c.aud.a = rec.Open(audit.ConnInfo{ID: 1, Listener: "node", ClientAddress: "127.0.0.1:1"})
	head := frame[:min(len(frame), 4+spliceHead)]
	var steps []wire.StreamStep
	var s wire.ProduceScan
	if err := s.Reset(frame[h.Body:], h.Version); err != nil {
		return nil, err
	}
	for part, ok := s.Next(); ok; part, ok = s.Next() {
		steps = append(steps, wire.StreamStep{Found: true, Partition: part, Records: int64(len(part.Records))})
	}
	return func() {
		r := &request{hdr: h, frame: &wire.Buf{B: head}, resp: &wire.Buf{B: resp}, stream: len(frame) - len(head), scanBody: true}
		c.auditRead(r)
		if counted {
			c.bs.aud.Begin(r.aud)
			for _, st := range steps {
				c.aud.ev.Count(&c.bs.aud, st, st.Partition.Records)
			}
			c.aud.ev.Streamed(&c.bs.aud)
		}
		c.auditDelivered([]*request{r})
	}, nil
}
