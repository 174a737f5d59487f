package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/testcerts"
)

// sniTableProxy is tableProxy in the sni topology, with a certificate for
// certNames.
func sniTableProxy(t *testing.T, certNames []string, mut func(*config.Config)) (*Proxy, *syncBuffer) {
	t.Helper()
	ca, err := testcerts.NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("proxy", certNames...)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := pair.Write(t.TempDir(), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	return tableProxy(t, func(c *config.Config) {
		c.Topology = config.TopologySNI
		c.SNIBootstrap, c.SNINodePattern = "kafka.example.com", "b{id}.kafka.example.com"
		c.TLSCert, c.TLSKey = cert, key
		if mut != nil {
			mut(c)
		}
	})
}

// TestSNINodeTable: in the sni topology every node maps to its name on
// the one port (or the advertised port) and no listener opens; a node
// outside the allow-list keeps its name with port 0 and is refused by
// name; controllers are kept by id, the first address winning, and map to
// the bootstrap name with port 0 unless exposed.
func TestSNINodeTable(t *testing.T) {
	p, logs := sniTableProxy(t, []string{"kafka.example.com", "*.kafka.example.com"}, func(c *config.Config) {
		c.AllowUpstream = []string{"*.internal"}
		c.ExposeControllers = true
		c.SNIControllerPattern = "c{id}.kafka.example.com"
		c.AdvertisedPort = 443
	})
	if strings.Contains(logs.String(), "does not cover") {
		t.Fatalf("a wildcard certificate was reported as not covering the names:\n%s", logs)
	}
	if got := p.Addr(); got != "kafka.example.com:443" {
		t.Fatalf("Addr() = %s", got)
	}
	for _, tc := range []struct {
		id         int32
		host       string
		wantHost   string
		wantPort   int32
		controller bool
	}{
		{0, "k0.internal", "b0.kafka.example.com", 443, false},
		{2 << 20, "k1.internal", "b2097152.kafka.example.com", 443, false},
		{5, "10.1.1.1", "b5.kafka.example.com", 0, false}, // not allowed
		{-1, "k9.internal", "kafka.example.com", 0, false},
		{1, "k0.internal", "c1.kafka.example.com", 443, true},
		{1, "k0-other.internal", "c1.kafka.example.com", 443, true}, // a second listener of controller 1
		{2, "10.1.1.2", "c2.kafka.example.com", 0, true},
	} {
		mapper := p.nodes.MapNode
		if tc.controller {
			mapper = p.nodes.MapController
		}
		host, port, err := mapper(tc.id, tc.host, 9092)
		if err != nil || host != tc.wantHost || port != tc.wantPort {
			t.Errorf("map(%d, %s, controller %v) = %s:%d, %v; want %s:%d", tc.id, tc.host, tc.controller, host, port, err, tc.wantHost, tc.wantPort)
		}
	}
	if nodes, controllers := p.nodes.listening(); nodes != 0 || controllers != 0 {
		t.Fatalf("%d node and %d controller listeners open in the sni topology", nodes, controllers)
	}
	if err := p.nodes.openErr(); err != nil {
		t.Fatalf("readiness sees %v", err)
	}
	for name, want := range map[string]error{
		"b0.kafka.example.com": nil, "B2097152.KAFKA.example.com": nil, "c1.kafka.example.com": nil,
		"b5.kafka.example.com": ErrNotAllowed, "c2.kafka.example.com": ErrNotAllowed,
		"b1.kafka.example.com": errUnknownNode, "c0.kafka.example.com": errUnknownNode,
	} {
		r, _, err := p.resolveName(name)
		if !errors.Is(err, want) {
			t.Errorf("resolveName(%s): %v, want %v", name, err, want)
		}
		if err == nil && (r.target.resolve == nil || r.target.controller != strings.HasPrefix(name, "c")) {
			t.Errorf("resolveName(%s) = %+v", name, r)
		}
	}
	r, _, err := p.resolveName("c1.kafka.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if addr, err := r.target.resolve(); err != nil || addr != "k0.internal:9092" {
		t.Errorf("controller 1's name reaches %s (%v), want its first address", addr, err)
	}

	// Without exposed controllers, a controller is the bootstrap name
	// with port 0.
	q, _ := sniTableProxy(t, []string{"kafka.example.com", "*.kafka.example.com"}, nil)
	if host, port, _ := q.nodes.MapController(1, "127.0.0.1", 9093); host != "kafka.example.com" || port != 0 {
		t.Errorf("an unexposed controller maps to %s:%d", host, port)
	}
	if _, port, _ := q.nodes.MapNode(1, "127.0.0.1", 9092); port == 0 || port != q.nodes.advPort {
		t.Errorf("a node maps to port %d, want the listener's %d", port, q.nodes.advPort)
	}
}

// TestSNICertificateNames: a certificate that covers none of the proxy's
// names is reported at start, naming each.
func TestSNICertificateNames(t *testing.T) {
	_, logs := sniTableProxy(t, []string{"other.example.com"}, nil)
	for _, name := range []string{"kafka.example.com", "b0.kafka.example.com"} {
		if !strings.Contains(logs.String(), "does not cover a name the proxy hands out") || !strings.Contains(logs.String(), "name="+name) {
			t.Errorf("no warning for %s:\n%s", name, logs)
		}
	}
}
