package proxy

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
)

// syncBuffer is a log sink safe for the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tableProxy returns a proxy that is not serving, for driving its node
// table directly, and its log.
func tableProxy(t *testing.T, mut func(*config.Config)) (*Proxy, *syncBuffer) {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstreams = []string{"127.0.0.1:1"}
	if mut != nil {
		mut(&cfg)
	}
	logs := &syncBuffer{}
	p, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, logs
}

// listening reports whether the proxy accepts on port.
func listening(port int32) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func mapNode(t *testing.T, p *Proxy, id int32, host string, port int32) int32 {
	t.Helper()
	h, lport, err := p.nodes.MapNode(id, host, port)
	if err != nil {
		t.Fatalf("MapNode(%d, %s) failed, which would close the connection: %v", id, host, err)
	}
	if h != p.advHost {
		t.Fatalf("MapNode(%d) returned host %q, not the proxy's %q", id, h, p.advHost)
	}
	return lport
}

func TestNodeListenerCap(t *testing.T) {
	p, logs := tableProxy(t, nil)
	p.nodes.limit = 3
	for id := range int32(3) {
		if port := mapNode(t, p, id, "b"+strconv.Itoa(int(id)), 9092); port == 0 || !listening(port) {
			t.Fatalf("node %d under the cap got port %d", id, port)
		}
	}
	if port := mapNode(t, p, 3, "b3", 9092); port != 0 {
		t.Fatalf("node past the cap got listener port %d", port)
	}
	if got := p.Stats().Nodes; got != 3 {
		t.Fatalf("%d nodes held past a cap of 3", got)
	}
	if !strings.Contains(logs.String(), "cap reached") {
		t.Fatalf("the cap is not logged:\n%s", logs)
	}
	// Nodes already known keep working past the cap.
	if port := mapNode(t, p, 1, "b1", 9092); port == 0 {
		t.Fatal("a known node lost its listener once the cap was reached")
	}
}

func TestNodeMoves(t *testing.T) {
	p, logs := tableProxy(t, func(c *config.Config) { c.AllowUpstream = []string{"*.good.example"} })
	port := mapNode(t, p, 1, "a.good.example", 9092)
	tgt := p.nodes.target(p.nodes.nodes[1])
	if addr, err := tgt.resolve(); err != nil || addr != "a.good.example:9092" {
		t.Fatalf("resolve = %q, %v", addr, err)
	}
	if again := mapNode(t, p, 1, "b.good.example", 9093); again != port {
		t.Fatalf("a moved node changed listener: %d -> %d", port, again)
	}
	if addr, err := tgt.resolve(); err != nil || addr != "b.good.example:9093" {
		t.Fatalf("after the move resolve = %q, %v", addr, err)
	}
	if !strings.Contains(logs.String(), "node moved") {
		t.Fatalf("the move is not logged:\n%s", logs)
	}
	// Moved outside the allow-list: new connections are refused and
	// responses name no reachable port.
	if again := mapNode(t, p, 1, "evil.example", 9092); again != 0 {
		t.Fatalf("node moved outside the allow-list still mapped to port %d", again)
	}
	if _, err := tgt.resolve(); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("connections to a node moved outside the allow-list resolve: %v", err)
	}
}

func TestNodeOutsideAllowList(t *testing.T) {
	p, logs := tableProxy(t, func(c *config.Config) {
		c.AllowUpstream = []string{"*.good.example", "10.0.0.0/8", "kafka-1"}
	})
	for _, host := range []string{"evil.example", "good.example", "11.0.0.1", "kafka-10"} {
		if port := mapNode(t, p, 7, host, 9092); port != 0 {
			t.Fatalf("%s outside the allow-list got listener port %d", host, port)
		}
		delete(p.nodes.nodes, 7)
	}
	if !strings.Contains(logs.String(), "node=7") || !strings.Contains(logs.String(), "outside allow-upstream") {
		t.Fatalf("a refused node is not logged by id:\n%s", logs)
	}
	for i, host := range []string{"b.good.example", "x.y.GOOD.example", "10.1.2.3", "kafka-1"} {
		if port := mapNode(t, p, int32(i), host, 9092); port == 0 || !listening(port) {
			t.Fatalf("%s inside the allow-list got port %d", host, port)
		}
	}
}

func TestNodeListenerCannotOpen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	base := taken.Addr().(*net.TCPAddr).Port
	if base > 65000 {
		t.Skip("ephemeral port too close to the top of the range for this layout")
	}
	p, logs := tableProxy(t, func(c *config.Config) { c.NodePortBase = base })
	// Node 0 wants the taken port: only it is unreachable.
	if port := mapNode(t, p, 0, "b0", 9092); port != 0 {
		t.Fatalf("node on a taken port mapped to %d", port)
	}
	if !strings.Contains(logs.String(), "node=0") {
		t.Fatalf("the failed listener is not logged by node:\n%s", logs)
	}
	var other int32
	for id := int32(1); id < 20 && other == 0; id++ {
		other = mapNode(t, p, id, "b", 9092)
	}
	if other == 0 || !listening(other) {
		t.Fatal("no other node could open a listener after one failed")
	}
	// At start the failure is an error, so the operator sees it.
	if _, err := p.nodes.mapNode(0, "b0", 9092); !errors.Is(err, ErrNodePort) {
		t.Fatalf("mapNode of the failed node: %v", err)
	}
	// Out of range is the same.
	if port := mapNode(t, p, int32(65536-base), "far", 9092); port != 0 {
		t.Fatalf("node out of the port range mapped to %d", port)
	}
}

func TestNodeOpenedDuringClose(t *testing.T) {
	p, _ := tableProxy(t, nil)
	var wg sync.WaitGroup
	ports := make(chan int32, 200)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for id := range int32(200) {
			_, port, err := p.nodes.MapNode(id, "b", 9092)
			if err != nil {
				t.Errorf("MapNode during Close: %v", err)
			}
			ports <- port
		}
	}()
	time.Sleep(time.Millisecond)
	p.Close()
	wg.Wait()
	close(ports)
	for port := range ports {
		if port != 0 && listening(port) {
			t.Fatalf("a listener opened during Close still accepts on %d", port)
		}
	}
	if _, port, _ := p.nodes.MapNode(500, "b", 9092); port != 0 {
		t.Fatalf("a node mapped after Close got port %d", port)
	}
}

func TestControllersNotExposedByDefault(t *testing.T) {
	p, _ := tableProxy(t, nil)
	if _, port, err := p.nodes.MapController(1, "127.0.0.1", 9093); err != nil || port != 0 {
		t.Fatalf("controller mapped to %d (%v) without expose-controllers", port, err)
	}
	if n := len(p.nodes.controllers); n != 0 {
		t.Fatalf("%d controller listeners without expose-controllers", n)
	}
	p2, _ := tableProxy(t, func(c *config.Config) { c.ExposeControllers = true })
	_, port, err := p2.nodes.MapController(1, "127.0.0.1", 9093)
	if err != nil || port == 0 || !listening(port) {
		t.Fatalf("exposed controller: port %d, %v", port, err)
	}
}
