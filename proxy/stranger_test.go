package proxy_test

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// clientHello returns the first bytes a TLS client sends: its ClientHello.
func clientHello(t *testing.T) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tls.Client(c, &tls.Config{ServerName: "kafka.example.com"}).Handshake()
		c.Close()
	}()
	buf := make([]byte, 16<<10)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// sendStranger writes b on a new connection to addr and waits for the
// proxy to close it without a byte of answer; it returns the client's
// address, which the log names.
func sendStranger(t *testing.T, addr string, b []byte) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, nc); n != 0 || err != nil {
		t.Fatalf("read %d bytes, err %v; want a close with no answer", n, err)
	}
	return nc.LocalAddr().String()
}

// TestStrangersOnThePlaintextListener: an HTTP request or a TLS
// ClientHello sent to the Kafka port is named for what it is, with what
// to do, and not as a frame above --max-request-size, which invites
// raising the limit; nor is it counted as a frame that limit refused.
func TestStrangersOnThePlaintextListener(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	for _, tc := range []struct {
		name   string
		send   []byte
		reason string
	}{
		{"GET", []byte("GET /metrics HTTP/1.1\r\nHost: localhost:9092\r\n\r\n"),
			`an HTTP request (GET) on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)`},
		{"POST", []byte("POST /v1/produce HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
			`an HTTP request (POST) on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)`},
		{"DELETE", []byte("DELETE /x HTTP/1.1\r\n\r\n"),
			`an HTTP request (DELETE) on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)`},
		{"HTTP/2", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
			`an HTTP request (HTTP/2) on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)`},
		{"ClientHello", clientHello(t),
			`a TLS ClientHello on a plaintext listener: the client uses TLS; enable --tls-cert and --tls-key, or connect without TLS`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := sendStranger(t, p.Addr(), tc.send)
			p.log.waitFor(t, "client="+local)
			line := logLine(p.log.String(), "client="+local)
			if want := `level=WARN msg="connection closed" client=` + local + ` node=-1 reason="bad request: ` + tc.reason + `"`; !strings.Contains(line, want) {
				t.Errorf("log line\n\t%s\nwant\n\t%s", line, want)
			}
		})
	}
	if n, _ := findCounter(t, m, metrics.NameFramesRefused, "setting", "max-request-size"); n != 0 {
		t.Errorf("%v strangers counted as frames --max-request-size refused", n)
	}
}

// TestStrangersOnTheTLSListener: a plaintext Kafka client on a TLS
// listener is told to enable TLS; an HTTP request there is named as one.
func TestStrangersOnTheTLSListener(t *testing.T) {
	k := newPKI(t)
	kc := newCluster(t, kfake.NumBrokers(1))
	cert, key := k.files(t, "proxy", "127.0.0.1")
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.TLSCert, c.TLSKey = cert, key
	})
	apiVersions := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	for _, tc := range []struct {
		name   string
		send   []byte
		reason string
	}{
		{"Kafka", apiVersions, `a plaintext Kafka client on a TLS listener: enable TLS (security.protocol=SSL) in the client`},
		{"GET", []byte("GET / HTTP/1.1\r\n\r\n"), `an HTTP request (GET) on the Kafka port: point HTTP clients at the admin endpoint (--admin-listen)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			local := nc.LocalAddr().String()
			nc.Write(tc.send)
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.Copy(io.Discard, nc)
			// The warning is rate-limited by kind; the close reason is
			// logged for every connection.
			want := `level=DEBUG msg="connection closed" client=` + local + ` node=-1 reason="tls handshake failed: ` + tc.reason + `"`
			p.log.waitFor(t, want)
		})
	}
	if !strings.Contains(p.log.String(), `level=WARN msg="tls handshake failed; connection closed" client=`) ||
		!strings.Contains(p.log.String(), `reason="a plaintext Kafka client on a TLS listener: enable TLS (security.protocol=SSL) in the client"`) {
		t.Errorf("the first plaintext client was not warned about:\n%s", p.log)
	}
}
