//go:build unix

package proxy_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// BenchmarkMetricsCost measures what recording metrics adds per request:
// small Produce requests (one 100-byte record), 32 pipelined on one
// connection, through the proxy with metrics off and on, in both ordering
// modes. Small requests make the per-request cost visible; "direct" is the
// broker alone. Besides wall time it reports cpu-ns/op, the CPU the whole
// test process (client, proxy and broker) spent per request, which a busy
// machine disturbs far less than wall time; the difference between metrics
// on and off is what recording costs.
func BenchmarkMetricsCost(b *testing.B) {
	kc, frame := blackholeProduce(b, 100)

	const depth = 32
	pipelined := func(b *testing.B, addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		window := make(chan struct{}, depth)
		rd := bufio.NewReader(c)
		resp := make([]byte, 64<<10)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
		n := b.N
		wrote := make(chan error, 1)
		go func() {
			for range n {
				window <- struct{}{}
				if _, err := c.Write(frame); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		for range n {
			if _, err := io.ReadFull(rd, resp[:4]); err != nil {
				b.Fatal(err)
			}
			size := binary.BigEndian.Uint32(resp)
			if _, err := io.ReadFull(rd, resp[:size]); err != nil {
				b.Fatal(err)
			}
			<-window
		}
		if err := <-wrote; err != nil {
			b.Fatal(err)
		}
	}
	b.Run("direct", func(b *testing.B) { pipelined(b, kc.ListenAddrs()[0]) })
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, on := range []bool{false, true} {
			name := string(mode) + "/metrics-off"
			var opts []proxy.Option
			if on {
				name = string(mode) + "/metrics-on"
				opts = append(opts, proxy.WithMetrics(metrics.New()))
			}
			b.Run(name, func(b *testing.B) {
				p := startProxy(b, mode, kc.ListenAddrs(), nil, opts...)
				pipelined(b, p.Addr())
			})
		}
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
