package proxy

// The single topology (config.TopologySingle): the proxy is the cluster's
// only broker, at --listen's address. The view of the cluster every
// connection shares is single.View, built here with what it needs of the
// proxy (singleHost). A client connection's upstream connections are in
// single_conn.go, the life of a split request in single_forward.go and
// single_gather.go, the Fetch rounds in single_fetch.go, what orders a
// Fetch after the writes before it in single_fetchdeps.go, and the memory
// a split request, a Fetch's room and a merged answer reserve in
// single_cost.go, the quotas applied to a merged answer in
// single_quota.go.
// DESIGN.md, "The single endpoint", tells the whole.

import (
	"net"

	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/splitmerge"
)

// singleHost is the proxy as the single topology's view sees it
// (single.Host).
type singleHost struct{ p *Proxy }

func (h singleHost) Upstreams() []string      { return h.p.current().Upstreams }
func (h singleHost) Allowed(host string) bool { return h.p.nodes.allow.allows(host) }
func (h singleHost) Health(err error)         { h.p.health.record(err) }
func (h singleHost) Ready()                   { h.p.noteReady() }

// newSingleView builds the single topology's view: the one broker at the
// bootstrap listener's port (or the advertised one), the proxy's own
// client dialling through dialDiscovery.
func newSingleView(p *Proxy) (*single.View, error) {
	port := p.boot.Addr().(*net.TCPAddr).Port
	if p.cfg.AdvertisedPort != 0 {
		port = p.cfg.AdvertisedPort
	}
	return single.NewView(singleHost{p}, single.Config{
		Self:        splitmerge.Self{NodeID: single.SelfNodeID, Host: p.advHost, Port: int32(port)},
		Seeds:       p.cfg.Upstreams,
		DialTimeout: p.cfg.DialTimeout,
		Dial:        p.dialDiscovery,
		Timeout:     probeTimeout,
		Log:         p.log,
	})
}
