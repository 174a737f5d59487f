package cmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSNILocalRecipe runs the core of README's recipe for trying the SNI
// topology on one machine: deploy/sni-local.sh makes the certificate and
// the hosts line, `inorder dev --topology sni` serves with them, and a
// franz-go client that takes its names from the hosts file through its
// Dialer (README's workaround for franz-go) produces and consumes through
// the bootstrap's name and the brokers' names on the one port, verified
// against the script's CA.
func TestSNILocalRecipe(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("deploy/sni-local.sh needs openssl")
	}
	dir := filepath.Join(t.TempDir(), "sni-local")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "../deploy/sni-local.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("deploy/sni-local.sh: %v\n%s", err, out)
	}
	hosts := readHostsLine(t, filepath.Join(dir, "hosts"))
	for _, name := range []string{"bootstrap.kafka.test", "broker-0.kafka.test", "broker-9.kafka.test"} {
		if hosts[name] != "127.0.0.1" {
			t.Fatalf("hosts puts %s at %q, want 127.0.0.1: %v", name, hosts[name], hosts)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "proxy.key")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("proxy.key: %v, mode %v: others may read it", err, fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Fatalf("the CA's key is left behind: %v", err)
	}

	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--shutdown-grace", "1s",
		"--topology", "sni", "--tls-cert", filepath.Join(dir, "proxy.crt"), "--tls-key", filepath.Join(dir, "proxy.key"),
		"--sni-bootstrap", "bootstrap.kafka.test", "--sni-node-pattern", "broker-{id}.kafka.test")
	defer stop()
	if !strings.HasPrefix(addr, "bootstrap.kafka.test:") {
		t.Fatalf("dev says clients connect to %s, want bootstrap.kafka.test:PORT", addr)
	}

	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("ca.crt holds no certificate")
	}
	var (
		mu     sync.Mutex
		dialed = map[string]bool{}
	)
	// README's franz-go workaround: the name asked is looked up in the
	// hosts file, dialled there, and sent and verified as the server name.
	dialer := kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		name, port, err := net.SplitHostPort(host)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dialed[name] = true
		mu.Unlock()
		ip, ok := hosts[name]
		if !ok {
			ip = name
		}
		d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: name}}
		return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
	})
	const topic = "sni-local"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	const n = 30
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", got, err)
		}
		got += fs.NumRecords()
	}
	mu.Lock()
	defer mu.Unlock()
	brokers := 0
	for name := range dialed {
		if strings.HasPrefix(name, "broker-") && strings.HasSuffix(name, ".kafka.test") {
			brokers++
		}
	}
	t.Logf("dialled %v", dialed)
	if !dialed["bootstrap.kafka.test"] || brokers == 0 {
		t.Errorf("the client dialled %v: want the bootstrap name and the brokers' names", dialed)
	}
}

// readHostsLine reads a hosts file into name → address.
func readHostsLine(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		for _, name := range f[min(1, len(f)):] {
			m[name] = f[0]
		}
	}
	return m
}
