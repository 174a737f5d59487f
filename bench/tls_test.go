package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/inorder-proxy/inorder/internal/testcerts"
)

// TestTLSRelay runs the workload through a relay that terminates the
// client's TLS and dials a TLS broker, the floor of the TLS benchmark.
func TestTLSRelay(t *testing.T) {
	ca, err := testcerts.NewCA("bench ca")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue("127.0.0.1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	server := &tls.Config{Certificates: []tls.Certificate{pair}}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBroker(BrokerConfig{Kind: Plain, Advertise: ln.Addr().String(), TLS: server})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	defer b.Close()
	r := newRelayOn(ln, b.Addr())
	r.SetTLS(server, client)
	done := make(chan error, 1)
	go func() { done <- r.Serve() }()
	defer func() {
		r.Close()
		<-done
	}()

	o := Default()
	o.Targets = []Target{{Name: "relay-tls", Addr: r.Addr(), TLS: client}}
	o.Records = 300
	o.Warmup = 0
	res, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Targets[0].Rounds[0].Produced; got != 300 {
		t.Fatalf("produced %d records through the TLS relay, want 300", got)
	}

	o.Targets[0].TLS = nil
	if _, err := Run(context.Background(), o, nil); err == nil {
		t.Fatal("a plaintext client got through the TLS relay")
	}
}
