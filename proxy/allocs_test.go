package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// cannedProduce is a Produce v9 response body: no topics, and an unknown
// tagged field of pad bytes.
func cannedProduce(pad int) []byte {
	body := kmsg.NewPtrProduceResponse()
	body.Version = 9
	if pad > 0 {
		body.UnknownTags.Set(99, make([]byte, pad))
	}
	return body.AppendTo(nil)
}

// cannedBackend answers every request on every connection it accepts with
// one response of a flexible version whose body is body, the request's
// correlation id copied in. It reads each request into one buffer and
// writes from another, so it allocates nothing per request: what a test
// counts is the proxy's.
func cannedBackend(t testing.TB, body []byte) string {
	t.Helper()
	resp := binary.BigEndian.AppendUint32(nil, 0)
	resp = append(resp, 0, 0, 0, 0, 0) // correlation id, no header tags
	resp = append(resp, body...)
	binary.BigEndian.PutUint32(resp, uint32(len(resp)-4))

	return connBackend(t, func(c net.Conn) {
		out := append([]byte(nil), resp...)
		in := make([]byte, 1<<20)
		for {
			if _, err := io.ReadFull(c, in[:12]); err != nil {
				return
			}
			copy(out[4:8], in[8:12])
			n := int(binary.BigEndian.Uint32(in[:4])) - 8
			if n < 0 || n > len(in) {
				return
			}
			if _, err := io.ReadFull(c, in[:n]); err != nil {
				return
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

// TestLargeFramesAllocateNothing sends Produce requests large enough to
// stream, through the proxy to cannedBackend, and counts the proxy's
// allocations per round trip: none per request, and in None mode, where
// every partition's records are spliced on their own, none per partition
// (3 and 12 partitions of 16 KiB each). In Connection mode the request body
// is spliced whole and the response, 40 KiB, streamed back unread. In
// either mode, when the client numbers its requests one by one, the head
// goes with the body unread, and when it does not, the head is read as
// before. The
// race detector allocates on its own (sync.Pool drops items at random
// under it), so the test runs without it; CI runs it so.
func TestLargeFramesAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	const runs = 200
	for _, tc := range []struct {
		name  string
		mode  config.Ordering
		pad   int
		kind  metrics.Streamed
		parts []int
		// numbered: each request's correlation id is the one before
		// plus one, as most clients number a connection's requests;
		// otherwise every request has the same.
		numbered bool
		// first requests on the connection whose head is read; kind
		// counts the rest.
		first int
	}{
		{"none", config.OrderingNone, 0, metrics.StreamedRequestScanned, []int{3, 12}, false, 0},
		{"none numbered", config.OrderingNone, 0, metrics.StreamedRequestUnread, []int{3, 12}, true, 1},
		{"connection", config.OrderingConnection, 40 << 10, metrics.StreamedRequestSpliced, []int{3}, false, 0},
		{"connection numbered", config.OrderingConnection, 40 << 10, metrics.StreamedRequestUnread, []int{3}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			p := startProxy(t, tc.mode, []string{cannedBackend(t, cannedProduce(tc.pad))}, nil, proxy.WithMetrics(m))
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			resp := make([]byte, 64<<10)
			corr := uint32(7)
			roundTrip := func(frame []byte) {
				if tc.numbered {
					binary.BigEndian.PutUint32(frame[8:], corr)
					corr++
				}
				exchange(t, c, frame, resp)
			}
			allocs := make([]float64, len(tc.parts))
			for i, parts := range tc.parts {
				ps := make([]int32, parts)
				labels := make([]string, parts)
				for j := range ps {
					ps[j], labels[j] = int32(j), "p"
				}
				frame := kmsg.NewRequestFormatter().AppendRequest(nil, multiProduce(9, "allocs", ps, labels, 16<<10), 5)
				roundTrip(frame) // the connection's one-time state
				allocs[i] = testing.AllocsPerRun(runs, func() { roundTrip(frame) })
				t.Logf("%d partitions: %.2f allocations per request", parts, allocs[i])
			}
			// Every request streamed (AllocsPerRun adds a warm-up run),
			// and every response.
			want := float64(len(tc.parts)*(runs+2) - tc.first)
			if n := streamedCounter(t, m, tc.kind, want); n != want {
				t.Fatalf("%v frames streamed as %s, want %v", n, tc.kind, want)
			}
			if tc.mode == config.OrderingConnection {
				want := float64(len(tc.parts) * (runs + 2))
				if n := streamedCounter(t, m, metrics.StreamedResponse, want); n != want {
					t.Fatalf("%v responses streamed, want %v", n, want)
				}
			}
			for i, n := range allocs {
				if n >= 0.5 {
					t.Errorf("%d partitions: %.2f allocations per request, want none", tc.parts[i], n)
				}
			}
		})
	}
}

// exchange writes the request frame to c and reads its response into
// resp, whose correlation id must be the request's. It allocates nothing.
func exchange(t *testing.T, c net.Conn, frame, resp []byte) {
	if err := roundTripFrame(c, frame, resp); err != nil {
		t.Fatal(err)
	}
}

// TestFetchWalkAllocatesNothing fetches, through the proxy in both modes,
// Fetch v16 responses of 12 partitions, each 40 KiB of records, which
// stream through a walk of their body, records spliced, and counts the
// proxy's allocations per round trip: none. Like
// TestLargeFramesAllocateNothing it runs without the race detector.
func TestFetchWalkAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	const runs = 200
	body := kmsg.NewPtrFetchResponse()
	body.Version = 16
	for p := range int32(12) {
		tp := kmsg.NewFetchResponseTopicPartition()
		tp.Partition = p
		tp.RecordBatches = make([]byte, 40<<10)
		body.Topics = append(body.Topics, kmsg.FetchResponseTopic{Partitions: []kmsg.FetchResponseTopicPartition{tp}})
	}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		t.Run(string(mode), func(t *testing.T) {
			m := metrics.New()
			p := startProxy(t, mode, []string{cannedBackend(t, body.AppendTo(nil))}, nil, proxy.WithMetrics(m))
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			req := kmsg.NewPtrFetchRequest()
			req.Version = 16
			frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 5)
			resp := make([]byte, 1<<20)
			roundTrip := func() { exchange(t, c, frame, resp) }
			roundTrip() // the connection's one-time state
			n := testing.AllocsPerRun(runs, roundTrip)
			t.Logf("%.2f allocations per response", n)
			want := float64(runs + 2)
			if got := streamedCounter(t, m, metrics.StreamedResponseScanned, want); got != want {
				t.Fatalf("%v responses streamed through a walk, want %v", got, want)
			}
			if n >= 0.5 {
				t.Errorf("%.2f allocations per response, want none", n)
			}
		})
	}
}
