package proxy_test

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestUnreadHeadsKeepOrder pipelines, on one connection through the proxy
// in connection mode, large Produce requests with small ones and
// OffsetCommits among them, to a backend that handles requests
// concurrently and answers in completion order. With correlation ids that
// count up by one, large requests go upstream unread, head and all, under
// the client's own ids; with shuffled ids none can, and each head is read
// and rewritten. Either way the responses come back in request order under
// the client's ids, and every partition holds every record sent to it (in
// the order the backend chose to write them: in connection mode the
// proxy forwards without waiting, trusting the backend to handle a
// connection's requests in the order written,
// which this one does not).
func TestUnreadHeadsKeepOrder(t *testing.T) {
	const partitions = 4
	for _, numbered := range []bool{true, false} {
		name := "shuffled ids"
		if numbered {
			name = "numbered ids"
		}
		t.Run(name, func(t *testing.T) {
			reqs, sent, large := streamingMix(partitions, 20)
			newBackend := func() *hostile.Reorderer { return newReorderer(t, 0, 2*time.Millisecond, "s", partitions) }
			ctx := testContext(t, 60*time.Second)
			reordersDirectly(t, ctx, newBackend, reqs)

			b := newBackend()
			m := metrics.New()
			p := startProxy(t, config.OrderingConnection, []string{b.Addr()}, nil, proxy.WithMetrics(m))
			res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{Numbered: numbered})
			if err != nil {
				t.Fatal(err)
			}
			inOrderNoErrors(t, res)
			partitionsHold(t, ctx, b, sent, false)

			// Every large request streamed, its head read or not. A
			// head is peeked at only after a large request, and
			// goes unread only when the peek saw all of it.
			spliced := streamedCounter(t, m, metrics.StreamedRequestSpliced, 1)
			unread := streamedCounter(t, m, metrics.StreamedRequestUnread, 1)
			if spliced+unread != float64(large) {
				t.Fatalf("%v large requests spliced and %v unread, want %d in all", spliced, unread, large)
			}
			if numbered && unread == 0 {
				t.Fatal("no request went upstream unread")
			}
			if !numbered && unread != 0 {
				t.Fatalf("%v requests with shuffled ids went upstream unread", unread)
			}
		})
	}
}

// TestUnreadHeadsStopForOtherNumbering: a client whose correlation ids
// skip (one counter shared by its connections) has its heads read from the
// first that does not fit on; a request that then counts on from there is
// read too, and answered under its own id.
func TestUnreadHeadsStopForOtherNumbering(t *testing.T) {
	_, m, c := connectionModeConn(t)
	frame := bigProduceFrame()
	send := func(corr int32) {
		t.Helper()
		binary.BigEndian.PutUint32(frame[8:], uint32(corr))
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		readResponse(t, c, corr)
	}
	for _, corr := range []int32{40, 41, 42, 50, 51, 52} {
		send(corr)
	}
	// 40 is read (the first request fixes the numbering), 41 and 42 go
	// unread, 50 does not fit, and from then on every head is read.
	if n := streamedCounter(t, m, metrics.StreamedRequestUnread, 2); n != 2 {
		t.Fatalf("%v requests unread, want 2", n)
	}
	if n := streamedCounter(t, m, metrics.StreamedRequestSpliced, 4); n != 4 {
		t.Fatalf("%v requests spliced with their heads read, want 4", n)
	}
}

// TestUnreadRequestTruncated: a request that would go upstream unread is
// cut short by the client. The proxy closes that connection with a log
// line naming the truncation, and the next connection is served.
func TestUnreadRequestTruncated(t *testing.T) {
	p, m, c := connectionModeConn(t)
	local := c.LocalAddr().String()
	frame := bigProduceFrame()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	readResponse(t, c, 5)
	binary.BigEndian.PutUint32(frame[8:], 6)
	c.Write(frame[:100<<10])
	c.(*net.TCPConn).CloseWrite()
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read %d bytes (%v); want a close with no response", n, err)
	}
	p.log.waitFor(t, "client="+local)
	if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "inside a frame") {
		t.Fatalf("log line %q does not name the truncation", line)
	}
	// Only the cut request could have been unread; it was on its way.
	if n := counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedRequestUnread)); n != 0 {
		t.Fatalf("%v requests counted as streamed unread, want none: the one was cut", n)
	}
	produceOn(t, p.Addr(), bigProduceFrame(), 5)
}

// connectionModeConn starts a one-broker kfake with topic "big", a proxy
// in connection mode in front of it, and a connection to the proxy with
// a 20 s deadline, closed when the test ends.
func connectionModeConn(t *testing.T) (*testProxy, *metrics.Metrics, net.Conn) {
	t.Helper()
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
	m := metrics.New()
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return p, m, c
}
