package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// The memory budget at the smallest size --max-memory takes, with the frame
// caps at their defaults (100MiB requests, 256MiB responses): the caps keep
// Kafka's meaning, a frame that must be held whole is charged to the
// budget, and one that never could be closes its own connection, named in
// the log and counted by the setting to raise.

const smallestBudget = 16 << 20

// waitMemoryFree waits until nothing of p's budget is held.
func waitMemoryFree(t *testing.T, p *testProxy) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().MemoryUsed != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the budget still held", p.Stats().MemoryUsed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRequestThatCannotFitClosesOnlyItsConnection: a Metadata request of
// 13 MiB, which the proxy must read whole, needs a 16 MiB buffer, more than
// a 16 MiB budget holds for request frames (three quarters of it); its
// connection is closed, and a client beside it is served before and after.
func TestRequestThatCannotFitClosesOnlyItsConnection(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
		c.MaxMemory = smallestBudget
	}, proxy.WithMetrics(m))
	good := dial(t, p.Addr())
	ask(t, good)
	big := dial(t, p.Addr())
	head := frame(3, 1, 9, "c", false, nil)
	binary.BigEndian.PutUint32(head, uint32(len(head)-4+13<<20))
	go func() {
		big.Write(head)
		big.Write(make([]byte, 13<<20))
	}()
	closedWithin(t, big, 10*time.Second)
	p.log.waitFor(t, "memory budget: a request needs a buffer of 16MiB, and --max-memory 16MiB holds at most 12MiB for one: raise --max-memory")
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxMemory)); n != 1 {
		t.Fatalf("%v frames refused for max-memory, want 1", n)
	}
	if n := counter(t, m, metrics.NameConnectionsClosed, "reason", string(metrics.CloseLimit)); n != 1 {
		t.Fatalf("%v connections closed at a limit, want 1", n)
	}
	ask(t, good)
	waitMemoryFree(t, p)
}

// TestResponseThatCannotFitClosesOnlyItsConnection: a Metadata response of
// 17 MiB, which the proxy must read whole to rewrite its addresses, needs a
// 32 MiB buffer, more than a 16 MiB budget; its connection is closed with
// the reason, and its memory goes back.
func TestResponseThatCannotFitClosesOnlyItsConnection(t *testing.T) {
	backend := connBackend(t, func(c net.Conn) {
		var hdr [12]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[:4]))-8); err != nil {
			return
		}
		resp := binary.BigEndian.AppendUint32(nil, 4+17<<20)
		resp = append(resp, hdr[8:12]...)
		c.Write(append(resp, make([]byte, 17<<20)...))
		io.Copy(io.Discard, c)
	})
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, []string{backend}, func(c *config.Config) {
		c.MaxMemory = smallestBudget
	}, proxy.WithMetrics(m))
	c := dial(t, p.Addr())
	if _, err := c.Write(metadataV1); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 10*time.Second)
	p.log.waitFor(t, "memory budget: a response needs a buffer of 32MiB, and --max-memory 16MiB holds at most 16MiB for one: raise --max-memory")
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxMemory)); n != 1 {
		t.Fatalf("%v frames refused for max-memory, want 1", n)
	}
	waitMemoryFree(t, p)
}

// TestFramesAboveTheBudgetPassWhenNotHeld: a 40 MiB Produce request, larger
// than the whole 16 MiB budget but within the request cap, goes through in
// both modes: its body is spliced (connection mode) or streamed with its
// partitions scanned (none mode), never held whole, so never charged
// whole.
func TestFramesAboveTheBudgetPassWhenNotHeld(t *testing.T) {
	req := multiProduce(9, "t", []int32{0}, []string{"big"}, 40<<20)
	big := kmsg.NewRequestFormatter().AppendRequest(nil, req, 3)
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p := startProxy(t, mode, []string{commitBackend(t, 0)}, func(c *config.Config) {
				c.MaxMemory = smallestBudget
			})
			c := dial(t, p.Addr())
			roundTrip(t, c, big)
			roundTrip(t, c, big)
			waitMemoryFree(t, p)
		})
	}
}

// TestFrameCapsNameTheirSetting: a request above --max-request-size is
// refused as before, and the log line and the metric name the setting.
func TestFrameCapsNameTheirSetting(t *testing.T) {
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, []string{commitBackend(t, 0)}, func(c *config.Config) {
		c.MaxMemory = smallestBudget
		c.MaxRequestSize = 1 << 20
	}, proxy.WithMetrics(m))
	c := dial(t, p.Addr())
	if _, err := c.Write(lengthPrefix(2 << 20)); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 10*time.Second)
	p.log.waitFor(t, "(--max-request-size)")
	if n := counter(t, m, metrics.NameFramesRefused, "setting", string(metrics.SettingMaxRequestSize)); n != 1 {
		t.Fatalf("%v frames refused for max-request-size, want 1", n)
	}
}
