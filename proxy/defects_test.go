package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// produceFrame encodes a Produce v9 of one record of value to topic/0.
func produceFrame(corr int32, topic string, acks int16, value []byte) []byte {
	prod := kmsg.NewPtrProduceRequest()
	prod.Version = 9
	prod.Acks = acks
	prod.TimeoutMillis = 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = recordBatch(value)
	t.Partitions = append(t.Partitions, part)
	prod.Topics = append(prod.Topics, t)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, prod, corr)
}

// produceErr decodes a Produce v9 response body and returns its first
// partition error.
func produceErr(t *testing.T, body []byte) error {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	// Flexible header: skip its empty tag section.
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatalf("produce response: %v", err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// TestShutdownLetsSplicedFrameFinish: a graceful shutdown that begins while
// a large produce is being spliced (connection mode) lets that frame finish
// within the grace period and delivers its response and every one before
// it, then closes.
func TestShutdownLetsSplicedFrameFinish(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "big"))
	p := startProxy(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	c := dial(t, p.Addr())
	big := produceFrame(2, "big", 1, make([]byte, 200<<10))
	half := len(big) / 2
	if _, err := c.Write(append(append([]byte{}, metadataV1...), big[:half]...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the proxy is inside the splice
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- p.Shutdown(ctx)
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Write(big[half:]); err != nil {
		t.Fatalf("the rest of the frame in progress was refused: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	readResponse(t, c, 7)
	if err := produceErr(t, readResponse(t, c, 2)); err != nil {
		t.Fatalf("the spliced produce failed: %v", err)
	}
	if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
		t.Fatalf("after the last response: %d bytes, %v; want a clean close", n, err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestAcksZeroFailureStopsWhatFollows: in none mode an acks=0 write that
// fails upstream ends the connection, and the requests queued behind it
// (a write to the same partition, a barrier) never reach the upstream, as
// Kafka processes nothing after a failed acks=0 write. An earlier write to
// another partition, slow to be answered, keeps the connection open after
// the failure long enough for anything released to be sent; its response
// still precedes the close.
func TestAcksZeroFailureStopsWhatFollows(t *testing.T) {
	up := newProduceUpstream(t)
	p := startProxy(t, config.OrderingNone, []string{up.addr}, nil)
	c := dial(t, p.Addr())
	var frames []byte
	frames = append(frames, produceFrame(1, "slow", 1, []byte("slow"))...)
	frames = append(frames, produceFrame(2, "t", 0, []byte("fails"))...)
	frames = append(frames, produceFrame(3, "t", 1, []byte("after"))...)
	frames = append(frames, metadataV1...)
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := produceErr(t, readResponse(t, c, 1)); err != nil {
		t.Fatalf("the write before the failure: %v", err)
	}
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("read %d bytes (%v) after the first response; want the connection closed", n, err)
	}
	p.log.waitFor(t, "acks=0 produce failed")
	sent := up.frames()
	if len(sent) != 2 {
		t.Fatalf("the upstream was sent %d requests, want the 2 before and at the failed acks=0 write", len(sent))
	}
	for _, f := range sent {
		if bytes.Contains(f, []byte("after")) || int16(binary.BigEndian.Uint16(f[4:])) != 0 {
			t.Fatalf("a request queued behind the failed acks=0 write reached the upstream")
		}
	}
}

// produceUpstream is a backend that answers Produce v9 requests as they
// come, concurrently: a write holding "slow" after a second, one holding
// "fails" at once with NOT_LEADER_FOR_PARTITION, any other at once. It
// answers nothing else, and records every frame it is sent.
type produceUpstream struct {
	addr string
	mu   sync.Mutex
	got  [][]byte
}

func newProduceUpstream(t *testing.T) *produceUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &produceUpstream{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				u.serve(nc, &wg)
			}()
		}
	}()
	return u
}

func (u *produceUpstream) serve(nc net.Conn, wg *sync.WaitGroup) {
	defer nc.Close()
	var wmu sync.Mutex
	for {
		var lb [4]byte
		if _, err := io.ReadFull(nc, lb[:]); err != nil {
			return
		}
		f := make([]byte, 4+binary.BigEndian.Uint32(lb[:]))
		copy(f, lb[:])
		if _, err := io.ReadFull(nc, f[4:]); err != nil {
			return
		}
		u.mu.Lock()
		u.got = append(u.got, f)
		u.mu.Unlock()
		if int16(binary.BigEndian.Uint16(f[4:])) != 0 {
			continue
		}
		corr := int32(binary.BigEndian.Uint32(f[8:]))
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		rt := kmsg.NewProduceResponseTopic()
		rp := kmsg.NewProduceResponseTopicPartition()
		var delay time.Duration
		switch {
		case bytes.Contains(f, []byte("slow")):
			delay = time.Second
		case bytes.Contains(f, []byte("fails")):
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		out := wire.AppendResponse(nil, corr, true, resp.AppendTo)
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			wmu.Lock()
			defer wmu.Unlock()
			nc.Write(out)
		}()
	}
}

func (u *produceUpstream) frames() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.got...)
}

// rawUpstream answers the first request on the first connection with a
// response of size bytes (the correlation id, then zeros), so that the
// proxy forwards it without parsing it.
func rawUpstream(t *testing.T, size int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, err := ln.Accept()
		if err != nil {
			return
		}
		defer up.Close()
		var lb [4]byte
		if _, err := io.ReadFull(up, lb[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(lb[:]))
		if _, err := io.ReadFull(up, req); err != nil {
			return
		}
		resp := make([]byte, 4+size)
		binary.BigEndian.PutUint32(resp, uint32(size))
		copy(resp[4:8], req[4:8])
		up.Write(resp)
		io.Copy(io.Discard, up)
	}()
	return ln.Addr().String()
}

// TestShutdownWaitsForTheLastWrite: a shutdown that begins while the last
// response is being written to a slow client (the sequencer already idle)
// closes the socket only once the response is written whole.
func TestShutdownWaitsForTheLastWrite(t *testing.T) {
	const size = 16 << 20
	// Without splicing the response is read whole and delivered by the
	// writer under test, not streamed.
	p := startProxy(t, config.OrderingConnection, []string{rawUpstream(t, size)}, nil, proxy.WithoutSplice())
	// 16 MiB is more than the socket buffers of both ends hold, so the
	// proxy's write is still under way while the client does not read.
	c := dial(t, p.Addr())
	// DescribeLogDirs v0, whose answer carries no address: forwarded and
	// answered as read.
	if _, err := c.Write(frame(35, 0, 9, "c", false, []byte{0, 0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the response is being written, the client not reading
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- p.Shutdown(ctx)
	}()
	time.Sleep(300 * time.Millisecond)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) || n != int64(binary.BigEndian.Uint32(lb[:])) {
		t.Fatalf("got %d bytes of a %d-byte response (%v)", n, binary.BigEndian.Uint32(lb[:]), err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestHalfCloseGetsEveryResponse: a client that half-closes right after its
// last request (as a pipelining script does) gets every response whole,
// even one still being written when the sequencer fell idle: the client's
// EOF ends the connection only once that write is done.
func TestHalfCloseGetsEveryResponse(t *testing.T) {
	const size = 16 << 20
	// Read whole and delivered, not streamed, as above; 16 MiB is more
	// than the socket buffers hold while the client does not read.
	p := startProxy(t, config.OrderingConnection, []string{rawUpstream(t, size)}, nil, proxy.WithoutSplice())
	c := dial(t, p.Addr())
	if _, err := c.Write(frame(35, 0, 9, "c", false, []byte{0, 0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	time.Sleep(500 * time.Millisecond) // the response is being written, the client not reading
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	if err != nil || n != int64(binary.BigEndian.Uint32(lb[:])) {
		t.Fatalf("got %d bytes of a %d-byte response (%v)", n, binary.BigEndian.Uint32(lb[:]), err)
	}
}

// TestClientResetMidResponse resets the connection while a large response
// is spliced to it: the proxy logs the client's going, not an upstream
// failure (a splice does not say which socket failed).
func TestClientResetMidResponse(t *testing.T) {
	p := startProxy(t, config.OrderingConnection, []string{rawUpstream(t, 16<<20)}, nil)
	c := dial(t, p.Addr()).(*net.TCPConn)
	local := c.LocalAddr().String()
	if _, err := c.Write(frame(35, 0, 9, "c", false, []byte{0, 0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	c.SetLinger(0)
	c.Close()
	p.log.waitFor(t, "client="+local)
	if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "client") || strings.Contains(line, "upstream") {
		t.Fatalf("log line %q does not name the client's going", line)
	}
}
