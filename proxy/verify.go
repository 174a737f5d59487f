package proxy

// The live-traffic verifier's seam (--verify; package verify). Each
// connection gets a verify.Conn only when it is on: without --verify,
// conn.verify is nil and the hooks (one in flush, two in the upstream
// reader) cost a nil check each.

import "github.com/inorder-proxy/inorder/verify"

// Verifier returns the proxy's verifier, or nil without --verify.
func (p *Proxy) Verifier() *verify.Verifier { return p.verifier }

func (c *conn) newVerify() *verify.Conn {
	if c.p.verifier == nil {
		return nil
	}
	return c.p.verifier.Conn(c.client.RemoteAddr().String(), c.upstreamAddr)
}

// upstreamAddr is the address of the upstream connection, for the
// verifier's examples; "" before it is dialled.
func (c *conn) upstreamAddr() string {
	if up := c.up; up != nil {
		return up.RemoteAddr().String()
	}
	return ""
}
