package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/testcerts"
)

func mustCA(t *testing.T) *testcerts.CA {
	t.Helper()
	ca, err := testcerts.NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca *testcerts.CA, cn string, hosts ...string) testcerts.Pair {
	t.Helper()
	p, err := ca.Issue(cn, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// served returns the leaf certificate a TLS client sees from s.
func served(t *testing.T, s *Server, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, net.ErrClosed) && err.Error() != "EOF" {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func clientFor(ca *testcerts.CA) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

func TestReloadOnFileChange(t *testing.T) {
	ca := mustCA(t)
	dir := t.TempDir()
	cert, key, err := mustIssue(t, ca, "first", "127.0.0.1").Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cert, key, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Watch(20 * time.Millisecond)
	defer s.Close()
	if leaf, err := served(t, s, clientFor(ca)); err != nil || leaf.Subject.CommonName != "first" {
		t.Fatalf("before: %v %v", leaf, err)
	}
	// Rename into place, as editors and tools that replace files do.
	tmp := t.TempDir()
	nc, nk, err := mustIssue(t, ca, "second", "127.0.0.1").Write(tmp, "server")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(nk, key); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(nc, cert); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Certificate().Leaf.Subject.CommonName == "second" })
	if leaf, err := served(t, s, clientFor(ca)); err != nil || leaf.Subject.CommonName != "second" {
		t.Fatalf("after: %v %v", leaf, err)
	}
}

// TestReloadKubernetesSymlinkSwap swaps the ..data link of a directory laid
// out as Kubernetes mounts a secret: tls.crt -> ..data/tls.crt, ..data ->
// a timestamped directory.
func TestReloadKubernetesSymlinkSwap(t *testing.T) {
	ca := mustCA(t)
	mount := t.TempDir()
	version := func(name string) string {
		d := filepath.Join(mount, "..2026_"+name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		p := mustIssue(t, ca, name, "127.0.0.1")
		os.WriteFile(filepath.Join(d, "tls.crt"), p.CertPEM, 0o600)
		os.WriteFile(filepath.Join(d, "tls.key"), p.KeyPEM, 0o600)
		return filepath.Base(d)
	}
	if err := os.Symlink(version("one"), filepath.Join(mount, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewServer(filepath.Join(mount, "tls.crt"), filepath.Join(mount, "tls.key"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Watch(20 * time.Millisecond)
	defer s.Close()
	two := version("two")
	tmpLink := filepath.Join(mount, "..data_tmp")
	if err := os.Symlink(two, tmpLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmpLink, filepath.Join(mount, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Certificate().Leaf.Subject.CommonName == "two" })
}

func TestBadPairKeepsTheOld(t *testing.T) {
	ca := mustCA(t)
	dir := t.TempDir()
	cert, key, err := mustIssue(t, ca, "good", "127.0.0.1").Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cert, key, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A key that does not match the certificate.
	if err := os.WriteFile(key, mustIssue(t, ca, "other").KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("a mismatched pair was accepted")
	}
	if leaf, err := served(t, s, clientFor(ca)); err != nil || leaf.Subject.CommonName != "good" {
		t.Fatalf("after a bad reload: %v %v", leaf, err)
	}
}

func TestClientCertificates(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	dir := t.TempDir()
	cert, key, err := mustIssue(t, ca, "server", "127.0.0.1").Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cert, key, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(p testcerts.Pair) *tls.Config {
		c := clientFor(ca)
		pair, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
		return c
	}
	if _, err := served(t, s, withCert(mustIssue(t, ca, "client"))); err != nil {
		t.Errorf("a client certificate from the CA was refused: %v", err)
	}
	if _, err := served(t, s, clientFor(ca)); err == nil {
		t.Error("a client without a certificate was accepted")
	}
	if _, err := served(t, s, withCert(mustIssue(t, other, "stranger"))); err == nil {
		t.Error("a client certificate from another CA was accepted")
	}
}

func TestUpstream(t *testing.T) {
	ca := mustCA(t)
	dir := t.TempDir()
	caFile, _ := ca.WriteCA(dir, "ca")
	cert, key, _ := mustIssue(t, ca, "proxy").Write(dir, "client")
	cfg, err := Upstream(UpstreamOptions{CA: caFile, Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.ServerName != "" {
		t.Fatalf("config %+v", cfg)
	}
	if got := ForHost(cfg, "broker-1"); got.ServerName != "broker-1" || cfg.ServerName != "" {
		t.Fatalf("ForHost changed the base or did not set the name")
	}
	empty := filepath.Join(dir, "empty.crt")
	os.WriteFile(empty, []byte("not a certificate"), 0o600)
	if _, err := Upstream(UpstreamOptions{CA: empty}); !errors.Is(err, ErrNoCertificates) {
		t.Fatalf("a CA file without certificates: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// headConn keeps the first bytes read from the server.
type headConn struct {
	net.Conn
	head []byte
}

func (h *headConn) Read(b []byte) (int, error) {
	n, err := h.Conn.Read(b)
	h.head = append(h.head, b[:n]...)
	return n, err
}

// TestConfigForRefusesByName: a ClientHello that admit refuses ends the
// handshake with a fatal unrecognized_name alert (112) as the server's
// first record; an admitted one gets the certificate. Both TLS versions,
// each with a client that resumes sessions: admit sees every handshake,
// the resumed ones too.
func TestConfigForRefusesByName(t *testing.T) {
	ca := mustCA(t)
	dir := t.TempDir()
	cert, key, err := mustIssue(t, ca, "server", "*.example.com").Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cert, key, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	cfg := s.ConfigFor(func(hello *tls.ClientHelloInfo) bool {
		asked.Add(1)
		return hello.ServerName == "a.example.com"
	})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cache := tls.NewLRUClientSessionCache(8)
		var resumed int
		for i, name := range []string{"a.example.com", "a.example.com", "b.example.com", "a.example.com", "b.example.com"} {
			admitted := name == "a.example.com"
			raw, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			hc := &headConn{Conn: raw}
			client := clientFor(ca)
			client.ServerName, client.MaxVersion, client.ClientSessionCache = name, version, cache
			c := tls.Client(hc, client)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			before := asked.Load()
			err = c.Handshake()
			if err == nil && version == tls.VersionTLS13 {
				c.Read(make([]byte, 1)) // TLS 1.3 tickets come after the handshake
			}
			if c.ConnectionState().DidResume {
				resumed++
			}
			c.Close()
			if asked.Load() != before+1 {
				t.Errorf("TLS %x, handshake %d (%s): admit asked %d times", version, i, name, asked.Load()-before)
			}
			switch {
			case admitted && err != nil:
				t.Errorf("TLS %x, %s: %v", version, name, err)
			case !admitted && err == nil:
				t.Errorf("TLS %x, %s: served", version, name)
			case !admitted && (len(hc.head) < 7 || hc.head[0] != 21 || hc.head[5] != 2 || hc.head[6] != 112):
				t.Errorf("TLS %x, %s: the server's first bytes are %x, not a fatal unrecognized_name alert", version, name, hc.head)
			}
		}
		if resumed == 0 {
			t.Errorf("TLS %x: no handshake resumed a session: resumption went untested", version)
		}
	}
}
