package proxy

// The sni topology: every client connection arrives on Listen's one TLS
// port, and the server name of its ClientHello says where it goes (the
// bootstrap name to the upstream bootstrap, a broker's name to that node,
// a controller's name to that controller). The name is read once, in the
// handshake, when crypto/tls hands the ClientHello to admit (through
// tlsconf.Server.ConfigFor, for every handshake, resumed sessions
// included): a name the proxy does not serve gets no certificate, so
// crypto/tls refuses it with the unrecognized_name alert before anything
// is dialled, and a served one leaves its route on the socket (sniConn)
// for the connection to take after the handshake (routeByName). Nothing after the handshake looks at
// the name again, so routing costs nothing per byte. The node table
// (nodes.go) is the one place nodes are known: its rewrite.Mapper writes
// every broker address as that node's name on the one port, and admit
// looks nodes up there by id.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/sni"
)

// maxLoggedName bounds the server name written to the log: a client may
// send up to 64 KiB, a DNS name has at most 253 characters.
const maxLoggedName = 255

// sniRoute is where a served server name leads.
type sniRoute struct {
	role   metrics.SNIRole
	id     int32
	target target
}

// sniConn is a client's socket on the SNI listener. It carries what the
// handshake decided from the server name to the connection, and counts
// the socket's bytes for the route's metrics once the route is known.
type sniConn struct {
	*net.TCPConn
	// Set by admit, in the handshake, before the connection reads them
	// after it; one goroutine runs both.
	route   sniRoute
	refused error // why the name was refused, wrapping ErrServerName
	// counts is set once the handshake is done; a close_notify sent by a
	// Close racing with that may go uncounted.
	counts atomic.Pointer[metrics.SNICounters]
}

func (c *sniConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	c.counts.Load().Received(n)
	return n, err
}

func (c *sniConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.counts.Load().Sent(n)
	return n, err
}

// sniListener accepts TCP connections and returns them as TLS server
// connections over an sniConn, whose handshake admit decides.
type sniListener struct {
	net.Listener
	cfg *tls.Config
}

func (l sniListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("sni listener: accepted a %T, not a TCP connection", nc)
	}
	return tls.Server(&sniConn{TCPConn: tc}, l.cfg), nil
}

// sniListener makes ln, bound to --listen, the SNI listener.
func (p *Proxy) sniListener(ln net.Listener) net.Listener {
	return sniListener{Listener: ln, cfg: p.sec.listener.ConfigFor(p.admit)}
}

// admit is the SNI listener's decision on a ClientHello: it resolves the
// server name to a route and leaves it on the connection, or refuses the
// name (counted, and logged rate-limited with the name and the reason).
// It never dials.
func (p *Proxy) admit(hello *tls.ClientHelloInfo) bool {
	sc, ok := hello.Conn.(*sniConn)
	if !ok {
		return false
	}
	route, why, err := p.resolveName(hello.ServerName)
	if err == nil {
		sc.route = route
		return true
	}
	name := hello.ServerName
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName] + "..."
	}
	sc.refused = fmt.Errorf("%w: %q: %v", ErrServerName, name, err)
	p.metrics.SNIRefused(why)
	if skipped, ok := p.sec.failures.allow("sni "+string(why), time.Now()); ok {
		p.log.Warn("tls server name refused; connection closed, nothing dialled", "server_name", name, "reason", string(why),
			"err", err.Error(), "client", sc.RemoteAddr().String(), "similar_refusals_not_logged", skipped)
	}
	return false
}

// resolveName returns the route of a server name, or why there is none.
func (p *Proxy) resolveName(name string) (sniRoute, metrics.SNIRefusal, error) {
	if name == "" {
		return sniRoute{}, metrics.SNINoName, errors.New("the client sent no server name; it must connect by one of the proxy's names")
	}
	t := &p.nodes
	role, id := t.names.Resolve(name)
	var controller bool
	switch role {
	case sni.RoleBootstrap:
		return sniRoute{role: metrics.SNIBootstrap, target: target{node: -1}}, "", nil
	case sni.RoleNode:
	case sni.RoleController:
		controller = true
	default:
		return sniRoute{}, metrics.SNIUnknownName, errors.New("neither the bootstrap name nor a broker's or controller's name")
	}
	n, err := t.byName(id, controller)
	switch {
	case errors.Is(err, ErrNotAllowed):
		return sniRoute{}, metrics.SNINotAllowed, err
	case err != nil:
		return sniRoute{}, metrics.SNIUnknownNode, fmt.Errorf("%w: node %d", err, id)
	}
	r := sniRoute{role: metrics.SNINode, id: id, target: t.target(n)}
	if controller {
		r.role = metrics.SNIController
		r.target.controller = true
	}
	return r, "", nil
}

// bootTarget is where the bootstrap listener's connections go: the
// upstream bootstrap, or, on the SNI listener, where each one's server
// name leads.
func (p *Proxy) bootTarget() target {
	return target{node: -1, byName: p.nodes.names != nil}
}

// sniRefusal returns why the handshake on nc refused the client's server
// name, or nil when it did not.
func sniRefusal(nc net.Conn) error {
	if sc := sniConnOf(nc); sc != nil {
		return sc.refused
	}
	return nil
}

// sniConnOf returns the sniConn under a connection of the SNI listener,
// or nil.
func sniConnOf(nc net.Conn) *sniConn {
	if tc, ok := nc.(*tls.Conn); ok {
		sc, _ := tc.NetConn().(*sniConn)
		return sc
	}
	return nil
}

// routeByName points a connection of the SNI listener, its handshake
// done, where its server name leads, and starts counting its bytes under
// that route. It does nothing for a connection of another listener.
func (c *conn) routeByName() {
	sc := sniConnOf(c.client)
	if sc == nil || !c.target.byName {
		return
	}
	c.target, c.node = sc.route.target, sc.route.target.node
	counts := c.p.metrics.SNIRoute(sc.route.role, sc.route.id)
	counts.Connected()
	sc.counts.Store(counts)
}

// checkCertificateNames warns at start for each of the proxy's names the
// listeners' certificate does not cover: a client verifying the server
// refuses those connections.
func (p *Proxy) checkCertificateNames() {
	pair := p.sec.listener.Certificate()
	leaf := pair.Leaf
	if leaf == nil && len(pair.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	if leaf == nil {
		return
	}
	n := p.nodes.names
	names := []string{n.Bootstrap, n.Node.Name(0)}
	if !n.Controller.IsZero() {
		names = append(names, n.Controller.Name(0))
	}
	for _, name := range names {
		if err := leaf.VerifyHostname(name); err != nil {
			p.log.Warn("the tls certificate does not cover a name the proxy hands out; clients that verify the server will refuse it: use a wildcard or list every name",
				"name", name, "certificate_names", leaf.DNSNames)
		}
	}
}
