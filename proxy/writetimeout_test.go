package proxy_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// fetchBackend answers every Fetch with one partition holding a batch of
// size bytes, and every other request as answer does.
func fetchBackend(t *testing.T, size int) string {
	batch := largeBatch(size)
	return startBackend(t, func(c net.Conn, _ uint64) {
		var lb [4]byte
		for {
			frame, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
			if err != nil {
				return
			}
			h, err := wire.ParseRequestHeader(frame.B)
			if err != nil || h.Key != 1 {
				wire.Put(frame)
				return
			}
			fr := kmsg.NewPtrFetchResponse()
			fr.Version = h.Version
			tp := kmsg.NewFetchResponseTopic()
			pp := kmsg.NewFetchResponseTopicPartition()
			pp.RecordBatches = batch
			tp.Partitions = append(tp.Partitions, pp)
			fr.Topics = append(fr.Topics, tp)
			out := encodeResponse(h, fr)
			wire.Put(frame)
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

func fetchFrame(version int16, corr int32) []byte {
	r := kmsg.NewPtrFetchRequest()
	r.Version = version
	r.MaxBytes = 8 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
	r.Topics = append(r.Topics, rt)
	return kmsg.NewRequestFormatter().AppendRequest(nil, r, corr)
}

// TestWriteTimeoutShedsStalledClients: clients that pipeline Fetch
// requests and never read hold their responses' memory, enough of them to
// take the whole share of the budget that large responses may use, so
// that a client that reads gets nothing. The write timeout closes each
// of them once it has accepted no byte for that long; memory comes back,
// and the reading client is served. Fetch v16 responses are read whole
// (they may carry addresses), Fetch v12 ones streamed to the client, over
// a splice or, without it, through a buffer.
func TestWriteTimeoutShedsStalledClients(t *testing.T) {
	const write = 400 * time.Millisecond
	for _, tc := range []struct {
		name    string
		version int16
		opts    []proxy.Option
	}{
		{"read-whole", 16, nil},
		{"spliced", 12, nil},
		{"buffered", 12, []proxy.Option{proxy.WithoutSplice()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := fetchBackend(t, 4<<20)
			p := startProxy(t, config.OrderingConnection, []string{backend}, func(c *config.Config) {
				c.MaxMemory = 64 << 20
				c.MaxRequestSize, c.MaxResponseSize = 1<<20, 16<<20
				c.WriteTimeout = write
			}, tc.opts...)
			for i := range 12 {
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.(*net.TCPConn).SetReadBuffer(4 << 10)
				for j := range 8 {
					if _, err := c.Write(fetchFrame(tc.version, int32(100*i+j))); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Until the twelve are closed: the proxy may not have
			// accepted any of them yet, and then holds nothing either.
			deadline := time.Now().Add(10 * time.Second)
			closed := func() int { return strings.Count(p.log.String(), "write timeout") }
			for s := p.Stats(); closed() < 12 || s.Conns > 0 || s.MemoryUsed > 0; s = p.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections that never read still open, %d closed for the write timeout, %d bytes of memory held, %v after they stopped reading", s.Conns, closed(), s.MemoryUsed, 10*time.Second)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := closed(); n != 12 {
				t.Fatalf("%d connections closed for the write timeout, want 12; log:\n%s", n, p.log)
			}
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for j := range 3 {
				c.Write(fetchFrame(tc.version, int32(j)))
				if _, err := readRaw(c); err != nil {
					t.Fatalf("a reading client after the stalled ones, fetch %d: %v", j, err)
				}
			}
		})
	}
}

// TestWriteTimeoutSparesSlowReaders: the write timeout bounds a write that
// moves no byte, not a whole response. A client that reads 4 MiB
// responses slowly, so that each takes several write timeouts to arrive,
// gets every one of them.
func TestWriteTimeoutSparesSlowReaders(t *testing.T) {
	const write = 500 * time.Millisecond
	for _, version := range []int16{16, 12} {
		t.Run(fmt.Sprintf("fetch-v%d", version), func(t *testing.T) {
			backend := fetchBackend(t, 4<<20)
			p := startProxy(t, config.OrderingConnection, []string{backend}, func(c *config.Config) {
				c.WriteTimeout = write
			})
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Above loopback's 64 KiB segment, so that the window
			// opens as the client reads.
			c.(*net.TCPConn).SetReadBuffer(256 << 10)
			c.SetDeadline(time.Now().Add(30 * time.Second))
			for j := range 2 {
				c.Write(fetchFrame(version, int32(j)))
			}
			start := time.Now()
			// Two of loopback's 64 KiB segments at a time, so that
			// each pause ends with a window update.
			slow := &slowReader{r: c, every: 256 << 10, pause: write / 5}
			for j := range 2 {
				if _, err := readRaw(slow); err != nil {
					t.Fatalf("response %d to a slow reader: %v after %v; log:\n%s", j, err, time.Since(start), p.log)
				}
			}
			if took := time.Since(start); took < 4*write {
				t.Fatalf("the responses took %v, not the several write timeouts the test needs", took)
			}
		})
	}
}

// slowReader pauses for pause after every every bytes read.
type slowReader struct {
	r     io.Reader
	every int
	pause time.Duration
	since int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.since >= s.every {
		time.Sleep(s.pause)
		s.since = 0
	}
	n, err := s.r.Read(p[:min(len(p), s.every-s.since)])
	s.since += n
	return n, err
}
