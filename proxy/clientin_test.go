package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
	"github.com/inorder-proxy/inorder/wire"
)

// The client reader's buffer is held only while it holds bytes: pipelined
// frames come in one read, and once they are consumed, or a read would
// wait, the buffer is back in the pool.
func TestClientInHoldsBufferOnlyWithBytes(t *testing.T) {
	a, b := sockiotest.Pair(t)
	var in clientIn
	in.init(b)
	if in.raw == nil {
		t.Skip("no non-blocking socket read on this platform")
	}
	frames := bytes.Repeat([]byte("0123456789"), 30)
	if _, err := a.Write(frames); err != nil {
		t.Fatal(err)
	}
	// Let all of it arrive, so that one read takes it.
	time.Sleep(50 * time.Millisecond)
	var p [4]byte
	if _, err := io.ReadFull(&in, p[:]); err != nil {
		t.Fatal(err)
	}
	if in.buf == nil || in.Buffered() != len(frames)-4 {
		t.Fatalf("after the first read: buffer %v, %d bytes buffered, want %d", in.buf != nil, in.Buffered(), len(frames)-4)
	}
	rest := make([]byte, len(frames)-4)
	if _, err := io.ReadFull(&in, rest); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(p[:], rest...), frames) {
		t.Fatal("bytes read differ from bytes sent")
	}
	if in.buf != nil {
		t.Fatal("buffer held after everything in it was consumed")
	}

	// A read that waits does so without the buffer, and the deadline
	// applies.
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := in.Read(p[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if in.buf != nil {
		t.Fatal("buffer held by a read that timed out")
	}
	b.SetReadDeadline(time.Time{})

	// A read as large as the buffer bypasses it.
	big := make([]byte, clientBufSize)
	rand.Read(big)
	go a.Write(big)
	got := make([]byte, clientBufSize)
	if _, err := io.ReadFull(&in, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) || in.buf != nil {
		t.Fatalf("large read: equal %v, buffer held %v", bytes.Equal(got, big), in.buf != nil)
	}

	a.Close()
	if _, err := in.Read(p[:]); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	if in.buf != nil {
		t.Fatal("buffer held at the end of the stream")
	}
}

// A spliced body whose first bytes the client reader's buffer already holds
// reaches the upstream whole and in order, behind the streaming window's
// bytes, whether the buffer holds part of it or all of it.
func TestSpliceBodyStartsWithBuffered(t *testing.T) {
	for _, size := range []int{100, 64 << 10} {
		client, clientSide := sockiotest.Pair(t)
		up, upstream := sockiotest.Pair(t)
		c := &conn{p: &Proxy{}, client: clientSide, up: up, splice: true, bs: &bodyStream{win: wire.Get(16)}}
		c.bs.win.B = append(c.bs.win.B[:0], "window|"...)
		defer wire.Put(c.bs.win)
		c.in.init(clientSide)
		// A body that never arrives whole ends the test, not hangs it.
		clientSide.SetReadDeadline(time.Now().Add(5 * time.Second))
		body := make([]byte, size)
		rand.Read(body)
		go client.Write(append([]byte("head"), body...))
		var head [4]byte
		if _, err := io.ReadFull(&c.in, head[:]); err != nil {
			t.Fatal(err)
		}
		want := append([]byte("window|"), body...)
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(upstream, int64(len(want))))
			got <- b
		}()
		if err := c.sendScanned(int64(size)); err != nil {
			t.Fatal(err)
		}
		if b := <-got; !bytes.Equal(b, want) {
			t.Fatalf("%d-byte body: upstream got %d bytes, differing", size, len(b))
		}
		if len(c.bs.win.B) != 0 || c.bs.done != 0 {
			t.Fatalf("%d-byte body: window holds %d bytes after it was sent", size, len(c.bs.win.B))
		}
		if c.in.buf != nil {
			t.Fatalf("%d-byte body: buffer held after the body was moved", size)
		}
	}
}

// readCounter counts the reads of the socket that bypass clientIn's buffer.
type readCounter struct {
	net.Conn
	reads int
}

func (r *readCounter) Read(p []byte) (int, error) {
	r.reads++
	return r.Conn.Read(p)
}

// A large request that has arrived whole is read from the socket in one
// call past the first chunk, into a buffer of its size, not a step at a
// time (each a system call and a copy of what came before): the single
// topology reads a Produce whole before it splits it.
func TestClientInReadsArrivedFrameAtOnce(t *testing.T) {
	a, b := sockiotest.Pair(t)
	var in clientIn
	in.init(b)
	if in.raw == nil {
		t.Skip("no non-blocking socket read on this platform")
	}
	if err := b.SetReadBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	counter := &readCounter{Conn: b}
	in.nc = counter
	const size = 200 << 10
	frame := make([]byte, 4+size)
	binary.BigEndian.PutUint32(frame, size)
	rand.Read(frame[4:])
	if _, err := a.Write(frame); err != nil {
		t.Fatal(err)
	}
	// Wait until it has all arrived.
	for i := 0; in.Queued() < len(frame); i++ {
		if i == 200 {
			t.Skipf("only %d of %d bytes arrived: the socket's receive buffer is smaller", in.Queued(), len(frame))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var lb [4]byte
	got, err := wire.ReadFrame(&in, &lb, wire.MinRequestFrame, 1<<20)
	if err != nil || !bytes.Equal(got.B, frame) {
		t.Fatalf("read %v, equal %v", err, err == nil && bytes.Equal(got.B, frame))
	}
	if counter.reads != 1 {
		t.Fatalf("a frame of %d bytes that had arrived took %d reads past the first chunk, want 1", size, counter.reads)
	}
}
