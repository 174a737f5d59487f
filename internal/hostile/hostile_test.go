package hostile_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/hostile"
)

// rawConn is the smallest Kafka client that can pipeline and observe what
// a backend does to the wire.
type rawConn struct {
	t *testing.T
	c net.Conn
	f *kmsg.RequestFormatter
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile-test"))}
}

func (rc *rawConn) send(req kmsg.Request, corr int32) {
	rc.t.Helper()
	if _, err := rc.c.Write(rc.f.AppendRequest(nil, req, corr)); err != nil {
		rc.t.Fatal(err)
	}
}

// recv reads one response frame and returns its correlation id and the
// bytes after the response header, which is never flexible for
// ApiVersions.
func (rc *rawConn) recv(key int16, flexible bool) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		return 0, nil, err
	}
	r := kbin.Reader{Src: body}
	corr := r.Int32()
	if flexible && key != 18 {
		kmsg.SkipTags(&r)
	}
	return corr, r.Src, r.Complete()
}

func (rc *rawConn) roundTrip(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	rc.send(req, corr)
	got, body, err := rc.recv(req.Key(), req.IsFlexible())
	if err != nil {
		rc.t.Fatalf("reading response to key %d: %v", req.Key(), err)
	}
	if got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("parsing response to key %d: %v", req.Key(), err)
	}
	return resp
}

func apiVersions() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "hostile-test"
	req.ClientSoftwareVersion = "1"
	return req
}

func newReorderer(t *testing.T, cfg hostile.ReordererConfig) *hostile.Reorderer {
	t.Helper()
	r, err := hostile.NewReorderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestReordererAdvertisesItself(t *testing.T) {
	r := newReorderer(t, hostile.ReordererConfig{})
	if r.KfakeAddr() == r.Addr() {
		t.Fatalf("kfake and Reorderer share address %s", r.Addr())
	}
	host, portStr, _ := net.SplitHostPort(r.Addr())
	port, _ := strconv.Atoi(portStr)
	rc := dialRaw(t, r.Addr())

	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	mresp := rc.roundTrip(meta, 1).(*kmsg.MetadataResponse)
	if len(mresp.Brokers) != 1 {
		t.Fatalf("metadata lists %d brokers, want 1", len(mresp.Brokers))
	}
	if b := mresp.Brokers[0]; b.Host != host || b.Port != int32(port) {
		t.Fatalf("metadata advertises %s:%d, want %s", b.Host, b.Port, r.Addr())
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	fresp := rc.roundTrip(fc, 2).(*kmsg.FindCoordinatorResponse)
	if len(fresp.Coordinators) != 1 {
		t.Fatalf("find coordinator returned %d coordinators, want 1", len(fresp.Coordinators))
	}
	if co := fresp.Coordinators[0]; co.Host != host || co.Port != int32(port) {
		t.Fatalf("find coordinator advertises %s:%d, want %s", co.Host, co.Port, r.Addr())
	}

	// The honest broker must advertise the Reorderer too, or a client
	// that bootstrapped there would never meet it.
	direct := dialRaw(t, r.KfakeAddr())
	dresp := direct.roundTrip(meta, 3).(*kmsg.MetadataResponse)
	if b := dresp.Brokers[0]; b.Host != host || b.Port != int32(port) {
		t.Fatalf("kfake advertises %s:%d, want %s", b.Host, b.Port, r.Addr())
	}
}

func TestReordererReorders(t *testing.T) {
	const n, attempts = 200, 5
	r := newReorderer(t, hostile.ReordererConfig{MaxDelay: 2 * time.Millisecond})
	for attempt := 1; attempt <= attempts; attempt++ {
		rc := dialRaw(t, r.Addr())
		sent := make(map[int32]bool, n)
		go func() {
			for i := range n {
				rc.send(apiVersions(), int32(1000+i))
			}
		}()
		reordered := false
		for i := range n {
			corr, body, err := rc.recv(18, true)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			if corr < 1000 || corr >= 1000+n || sent[corr] {
				t.Fatalf("response %d has unexpected or repeated correlation id %d", i, corr)
			}
			sent[corr] = true
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = 3
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
				t.Fatalf("response %d: parse error %v, code %d", i, err, resp.ErrorCode)
			}
			if corr != int32(1000+i) {
				reordered = true
			}
		}
		rc.c.Close()
		if reordered {
			if r.Reordered() == 0 {
				t.Fatal("responses came back reordered but Reordered() is 0")
			}
			return
		}
	}
	t.Fatalf("%d attempts of %d pipelined requests all came back in order (seed %d)", attempts, n, r.Seed())
}

func TestReordererRejectsWhatKfakeCannotTake(t *testing.T) {
	r := newReorderer(t, hostile.ReordererConfig{})
	for _, frame := range [][]byte{
		{0x7f, 0, 0, 0}, // length beyond 100 MiB
		{0, 0, 0, 8, 0x7f, 0x00, 0, 0, 0, 0, 0, 1}, // unknown api key 32512
	} {
		rc := dialRaw(t, r.Addr())
		if _, err := rc.c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rc.recv(0, false); err == nil {
			t.Fatalf("frame %x was answered", frame)
		}
	}
	// The cluster survived: an unknown key reaching kfake panics it.
	rc := dialRaw(t, r.Addr())
	rc.roundTrip(apiVersions(), 7)
}

func TestReordererCloseEndsConnections(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{MinDelay: time.Second, MaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, r.Addr())
	rc.send(apiVersions(), 1)
	for r.Requests() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	r.Close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Close waited %v for a delayed request", d)
	}
	if _, _, err := rc.recv(18, true); err == nil {
		t.Fatal("connection still answered after Close")
	}
	if c, err := net.DialTimeout("tcp", r.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("listener still accepts after Close")
	}
	r.Close()
}

func TestFaults(t *testing.T) {
	const n = 2
	for _, tc := range []struct {
		kind  hostile.FaultKind
		check func(t *testing.T, corr int32, err error)
	}{
		{hostile.FaultClose, func(t *testing.T, _ int32, err error) {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("got %v, want a clean EOF", err)
			}
		}},
		{hostile.FaultReset, func(t *testing.T, _ int32, err error) {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("got %v, want ECONNRESET", err)
			}
		}},
		{hostile.FaultTruncate, func(t *testing.T, _ int32, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("got %v, want a truncated frame", err)
			}
		}},
		{hostile.FaultWrongCorrelation, func(t *testing.T, corr int32, err error) {
			if err != nil || corr != ^int32(100+n) {
				t.Fatalf("got id %d and error %v, want id %d", corr, err, ^int32(100+n))
			}
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			f, err := hostile.NewFault(tc.kind, n)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for conn := 1; conn <= 2; conn++ {
				rc := dialRaw(t, f.Addr())
				for i := range n {
					rc.roundTrip(apiVersions(), int32(100+i))
				}
				rc.send(apiVersions(), 100+n)
				corr, _, err := rc.recv(18, true)
				tc.check(t, corr, err)
				rc.c.Close()
			}
			want := hostile.FaultStats{Conns: 2, Requests: 2 * (n + 1), Responses: 2 * n, Faults: 2}
			if tc.kind == hostile.FaultWrongCorrelation {
				want.Responses += 2
			}
			// The second connection's last count lands after the
			// client has read, so give the server a moment.
			deadline := time.Now().Add(2 * time.Second)
			for f.Stats() != want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := f.Stats(); got != want {
				t.Fatalf("stats %+v, want %+v", got, want)
			}
		})
	}
}

func TestFaultCloseIsCleanUnderPipelining(t *testing.T) {
	f, err := hostile.CloseAfter(3)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc := dialRaw(t, f.Addr())
	for i := range 20 {
		rc.send(apiVersions(), int32(i))
	}
	for i := range 3 {
		if corr, _, err := rc.recv(18, true); err != nil || corr != int32(i) {
			t.Fatalf("response %d: id %d, error %v", i, corr, err)
		}
	}
	if _, _, err := rc.recv(18, true); !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want a clean EOF though requests were still unread", err)
	}
}

func TestRefusedAddr(t *testing.T) {
	addr, err := hostile.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}

// TestCloseLeavesNoGoroutines closes backends mid-traffic, with client
// connections still open, and expects every goroutine they started, kfake's
// included, to end.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	r, err := hostile.NewReorderer(hostile.ReordererConfig{MaxDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f, err := hostile.CloseAfter(1000)
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	var clients []net.Conn
	for _, addr := range []string{r.Addr(), r.Addr(), f.Addr()} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		f := kmsg.NewRequestFormatter()
		for i := range 50 {
			if _, err := c.Write(f.AppendRequest(nil, apiVersions(), int32(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r.Requests() < 100 || f.Stats().Requests == 0 {
		time.Sleep(time.Millisecond)
	}
	r.Close()
	f.Close()
	for _, c := range clients {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestClientFollowsAdvertisement bootstraps a real client from the honest
// kfake address: it must learn the backend's address from Metadata and
// send its produce there.
func TestClientFollowsAdvertisement(t *testing.T) {
	f, err := hostile.CloseAfter(1<<30, kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.KfakeAddr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if f.Stats().Requests == 0 {
		t.Fatal("the client never reached the backend")
	}
}

// TestSwapperSwapsAdjacentResponses pipelines requests through a Swapper
// that holds back every response it can: each swap must show on the wire
// as one response overtaking exactly the request before it, and the
// backend's count must match what the client saw.
func TestSwapperSwapsAdjacentResponses(t *testing.T) {
	const n = 100
	s, err := hostile.NewSwapper(hostile.SwapperConfig{Every: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := dialRaw(t, s.Addr())
	defer rc.c.Close()
	for i := range n {
		rc.send(apiVersions(), int32(i))
	}
	var got []int32
	for range n {
		corr, _, err := rc.recv(18, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, corr)
	}
	swaps := 0
	for i := 0; i < n; i++ {
		switch {
		case got[i] == int32(i):
		case i+1 < n && got[i] == int32(i+1) && got[i+1] == int32(i):
			swaps++
			i++
		default:
			t.Fatalf("position %d holds response %d: not an adjacent swap (%v)", i, got[i], got)
		}
	}
	if swaps == 0 || int64(swaps) != s.Swapped() || s.SwappedFor("hostile-test") != s.Swapped() {
		t.Fatalf("%d swaps seen, backend counted %d (%d for the client id)", swaps, s.Swapped(), s.SwappedFor("hostile-test"))
	}
}
