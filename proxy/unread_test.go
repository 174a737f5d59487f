package proxy_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
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
			m, large := pipelineStreamingMix(t, config.OrderingConnection, partitions, 20, numbered)
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
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			p, m, c := modeConn(t, mode)
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
		})
	}
}

// TestCutRequestAnswersThoseBefore: a client that stops inside a large
// Produce, after its head went upstream, still gets the response to the
// request before it, which the upstream answers later, and only then is
// the connection closed. In both modes, with ids with gaps (the head is
// read) and ids one by one (the head may go unread); the two requests
// write different partitions, so in None mode the second does not wait
// for the first.
func TestCutRequestAnswersThoseBefore(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, numbered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/numbered=%v", mode, numbered), func(t *testing.T) {
				// Every request waits 300 ms at the backend: the cut
				// is seen long before the first is answered.
				b := newReorderer(t, 300*time.Millisecond, 300*time.Millisecond, "cut", 2)
				p := startProxy(t, mode, []string{b.Addr()}, nil)
				fmtr := kmsg.NewRequestFormatter()
				first := produceV9("cut", -1, largeBatch(200<<10))
				second := produceV9("cut", -1, largeBatch(200<<10))
				second.Topics[0].Partitions[0].Partition = 1
				secondID := int32(9)
				if numbered {
					secondID = 2
				}
				stream := fmtr.AppendRequest(nil, first, 1)
				cut := fmtr.AppendRequest(nil, second, secondID)
				stream = append(stream, cut[:100<<10]...)
				c := dial(t, p.Addr())
				local := c.LocalAddr().String()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(stream); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				resp := kmsg.NewPtrProduceResponse()
				resp.Version = 9
				if err := resp.ReadFrom(readResponse(t, c, 1)[1:]); err != nil {
					t.Fatal(err)
				}
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("the first request failed with error code %d", code)
				}
				if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
					t.Fatalf("read %d bytes (%v) after the response; want a close", n, err)
				}
				p.log.waitFor(t, "client="+local)
				if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "inside a frame") {
					t.Fatalf("log line %q does not name the truncation", line)
				}
			})
		}
	}
}

// connectionModeConn is modeConn in connection mode.
func connectionModeConn(t *testing.T) (*testProxy, *metrics.Metrics, net.Conn) {
	t.Helper()
	return modeConn(t, config.OrderingConnection)
}

// modeConn starts a one-broker kfake with topic "big", a proxy in the
// given mode in front of it, and a connection to the proxy with a 20 s
// deadline, closed when the test ends.
func modeConn(t *testing.T, mode config.Ordering) (*testProxy, *metrics.Metrics, net.Conn) {
	t.Helper()
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
	m := metrics.New()
	p := startProxy(t, mode, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return p, m, c
}

// TestUnreadHeadArrivesInPieces sends, on one connection through the proxy
// in none mode, large Produce requests with numbered correlation ids, each
// written in two pieces with a pause between them, cut at four places: at
// the end of the frame (the peek sees the head and the first partition,
// spliced together unread), inside the first topic's name (the head goes
// upstream unread by itself, and the partition is peeked at afterwards),
// and right before that name or inside the head (too little to go on: the
// head is read). Each
// version the proxy scans (v7 fixed-width, v9 and v11 flexible) takes every
// cut; every record lands in its partition in order.
func TestUnreadHeadArrivesInPieces(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "pieces"))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	parts := []int32{0, 1, 2}
	corr := int32(70)
	var labels []string
	send := func(version int16, cut func(frame []byte, version int16) int) {
		t.Helper()
		label := fmt.Sprint(len(labels))
		labels = append(labels, label)
		req := multiProduce(version, "pieces", parts, []string{label, label, label}, 16<<10)
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
		at := cut(frame, version)
		if _, err := c.Write(frame[:at]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := c.Write(frame[at:]); err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		body := readResponse(t, c, corr)
		if version >= 9 {
			body = body[1:] // the flexible header's tags
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("v%d: produce to %s/%d: error %d", version, rt.Topic, rp.Partition, rp.ErrorCode)
				}
			}
		}
		corr++
	}
	name := func(frame []byte) int { return bytes.Index(frame, []byte("pieces")) }
	whole := func(frame []byte, _ int16) int { return len(frame) }
	inName := func(frame []byte, _ int16) int { return name(frame) + 2 }
	atTopics := func(frame []byte, version int16) int {
		if version >= 9 {
			return name(frame) - 1 // a compact string's length
		}
		return name(frame) - 2
	}
	beforeTopics := func(frame []byte, _ int16) int { return name(frame) - 8 }

	send(9, whole) // the connection's first request: its head is read
	for _, version := range []int16{7, 9, 11} {
		send(version, whole)
		send(version, inName)
		send(version, atTopics)
		send(version, beforeTopics)
	}
	scanned, unread := noneStreamed(t, m, float64(len(labels)))
	if scanned != 7 || unread != 6 {
		t.Fatalf("%v requests streamed with their heads read and %v unread, want 7 and 6", scanned, unread)
	}
	ctx := testContext(t, 20*time.Second)
	for _, part := range parts {
		got, err := pipeprobe.ReadPartition(ctx, kc.ListenAddrs()[0], "pieces", part)
		if err != nil {
			t.Fatal(err)
		}
		values := make([]string, len(got))
		for i, r := range got {
			label, value, _ := strings.Cut(r, "|")
			values[i], got[i] = value, label
		}
		if !slices.Equal(got, labels) {
			t.Fatalf("partition %d holds %v, want %v", part, got, labels)
		}
		for i, v := range values {
			if len(v) != 16<<10 {
				t.Fatalf("partition %d: record %d holds %d bytes of value, want %d", part, i, len(v), 16<<10)
			}
		}
	}
}
