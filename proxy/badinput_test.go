package proxy_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/devcluster"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/proxy"
)

// frame builds a request frame with the given header fields and body.
func frame(key, version int16, corr int32, clientID string, flexibleHeader bool, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if flexibleHeader {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func lengthPrefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// TestBadInput sends each kind of malformed input on one connection and
// checks that the proxy closes exactly that connection with a log line
// naming the reason and the client, while a second, well-behaved
// connection opened before it keeps working.
func TestBadInput(t *testing.T) {
	metadataV1 := frame(3, 1, 7, "c", false, []byte{0, 0, 0, 0})
	cases := []struct {
		name   string
		send   [][]byte // written in order; a nil entry half-closes
		reason string
	}{
		{"length above limit", [][]byte{lengthPrefix(200 << 20)}, "frame length above the limit"},
		{"negative length", [][]byte{lengthPrefix(0xffffffff)}, "frame length above the limit"},
		{"length below minimum", [][]byte{lengthPrefix(3), {0, 1, 2}}, "frame length below the minimum"},
		{"client id past the frame", [][]byte{frame(3, 1, 1, "", false, nil)[:4], []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff}}, "malformed header"},
		{"truncated frame", [][]byte{metadataV1[:9], nil}, "connection closed inside a frame"},
		{"unknown api key", [][]byte{frame(9999, 0, 1, "c", false, nil)}, "unknown api key"},
		{"version above supported", [][]byte{frame(3, 99, 1, "c", true, nil)}, "unsupported api version"},
		{"malformed produce body", [][]byte{frame(0, 7, 1, "c", false, []byte{0xff})}, "truncated before acks"},
	}
	kc := newCluster(t, kfake.SeedTopics(1, "good"))
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		p := startProxy(t, mode, kc.ListenAddrs(), func(c *config.Config) { c.MaxRequestSize = 100 << 20 })
		for _, tc := range cases {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				ctx := testContext(t, 30*time.Second)
				good, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer good.Close()
				if _, err := good.Write(metadataV1); err != nil {
					t.Fatal(err)
				}

				bad, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer bad.Close()
				local := bad.LocalAddr().String()
				for _, b := range tc.send {
					if b == nil {
						bad.(*net.TCPConn).CloseWrite()
						continue
					}
					if _, err := bad.Write(b); err != nil {
						t.Fatal(err)
					}
				}
				bad.SetReadDeadline(time.Now().Add(10 * time.Second))
				if n, err := io.Copy(io.Discard, bad); err != nil || n != 0 {
					t.Fatalf("bad connection: read %d bytes, err %v; want a clean close with no response", n, err)
				}
				bad.Close()
				p.log.waitFor(t, "client="+local)
				line := logLine(p.log.String(), "client="+local)
				if !strings.Contains(line, tc.reason) {
					t.Fatalf("log line %q does not name the reason %q", line, tc.reason)
				}

				// The good connection, opened before the bad one,
				// still gets its answer and keeps working.
				good.SetReadDeadline(time.Now().Add(10 * time.Second))
				readResponse(t, good, 7)
				if _, err := pipeprobe.ProducePipelined(ctx, p.Addr(), "good", 0, 10, pipeprobe.Options{}); err != nil {
					t.Fatalf("a new connection after the bad one: %v", err)
				}
			})
		}
	}
}

func logLine(log, substr string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) && strings.Contains(l, "connection closed") {
			return l
		}
	}
	return ""
}

// readResponse reads one response frame and checks its correlation id.
func readResponse(t *testing.T, c net.Conn, corr int32) []byte {
	t.Helper()
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	return b[4:]
}

// TestKeyNotServedByEmbeddedBroker checks that a key the embedded kfake
// does not serve is refused by the proxy and never reaches kfake, which
// would panic the process.
func TestKeyNotServedByEmbeddedBroker(t *testing.T) {
	dc, err := devcluster.Start(testContext(t, 20*time.Second), devcluster.Options{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	var unserved int16 = -1
	for k := int16(0); k < 100; k++ {
		if _, ok := dc.Versions(k); !ok {
			if max, known := maxKnown(k); known && max >= 0 {
				unserved = k
				break
			}
		}
	}
	if unserved < 0 {
		t.Fatal("the embedded broker serves every key kmsg knows: nothing left to refuse, so this test proves nothing")
	}
	p := startProxy(t, config.OrderingNone, dc.ListenAddrs(), nil, proxy.WithVersions(dc.Versions))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(frame(unserved, 0, 1, "c", false, nil))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, _ := io.Copy(io.Discard, c); n != 0 {
		t.Fatalf("got %d bytes for an unserved key", n)
	}
	c.Close()
	p.log.waitFor(t, "is not served by the upstream")
}

func maxKnown(key int16) (int16, bool) {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return 0, false
	}
	return r.MaxVersion(), true
}

// TestApiVersions checks the three ApiVersions rules: a version above what
// the proxy parses is answered like a broker would (v0 body, error 35); the
// advertised versions never exceed what the proxy can parse; and a v5
// request carrying a ClusterID and NodeID on the bootstrap listener is not
// refused by the upstream.
func TestApiVersions(t *testing.T) {
	kc := newCluster(t)
	// Record the ClusterID and NodeID of every ApiVersions v5 the
	// backend receives; the proxy must clear both on bootstrap
	// connections, never just one.
	type seen struct {
		cluster *string
		node    int32
	}
	got := make(chan seen, 16)
	kc.ControlKey(18, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if r := req.(*kmsg.ApiVersionsRequest); r.Version >= 5 {
			got <- seen{r.ClusterID, r.NodeID}
		}
		return nil, nil, false
	})
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(frame(18, 99, 42, "c", true, []byte{0}))
	body := readResponse(t, c, 42)
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.Version = 0
	if err := v0.ReadFrom(body); err != nil {
		t.Fatalf("answer to ApiVersions v99 is not a v0 body: %v", err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) == 0 {
		t.Fatalf("answer to v99: error %d keys %v", v0.ErrorCode, v0.ApiKeys)
	}

	// The connection stays usable: the client retries lower.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	cluster := "some-other-cluster"
	req.ClusterID, req.NodeID = &cluster, 77
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	out := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 43)
	c.Write(out)
	body = readResponse(t, c, 43)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 5
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v5 on the bootstrap listener: error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	select {
	case s := <-got:
		if s.cluster != nil || s.node != -1 {
			t.Fatalf("upstream received ClusterID %v NodeID %d; want both cleared", s.cluster, s.node)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the backend never saw the ApiVersions v5 request")
	}
	for _, k := range resp.ApiKeys {
		max, ok := maxKnown(k.ApiKey)
		if !ok || k.MaxVersion > max {
			t.Fatalf("advertised key %d up to v%d; the proxy parses up to v%d (known %v)", k.ApiKey, k.MaxVersion, max, ok)
		}
	}
}

// TestDevFixupCreateTopicsConfigs checks that behind the embedded broker a
// created topic's config list is an empty list, not null: the Java admin
// client dereferences it.
func TestDevFixupCreateTopicsConfigs(t *testing.T) {
	dc, err := devcluster.Start(testContext(t, 20*time.Second), devcluster.Options{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	for _, fix := range []bool{false, true} {
		opts := []proxy.Option{proxy.WithVersions(dc.Versions)}
		if fix {
			opts = append(opts, proxy.WithFixup(devcluster.Fixup{}))
		}
		p := startProxy(t, config.OrderingNone, dc.ListenAddrs(), nil, opts...)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 5
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = fmt.Sprintf("fixup-%v", fix)
		rt.NumPartitions, rt.ReplicationFactor = 1, 1
		req.Topics = append(req.Topics, rt)
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 9))
		body := readResponse(t, c, 9)
		c.Close()
		// Flexible response header: one empty tag section before the body.
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.Version = 5
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create: %+v", resp.Topics)
		}
		if got := resp.Topics[0].Configs == nil; got == fix {
			t.Fatalf("fixup %v: configs null = %v", fix, got)
		}
	}
}
