package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// connBackend starts a backend that runs serve on every connection it
// accepts, each in a goroutine of its own, and closes the connection when
// serve returns.
func connBackend(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	return loopbackBackend(t, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	})
}

// commitBackend answers every request on every connection it accepts with
// a 4-byte body of zeros (an OffsetCommit response v0-v2 with no topics)
// after delay, in the order the requests came. It reads no body into
// memory and keeps nothing, so that what a test measures is the proxy's.
func commitBackend(t *testing.T, delay time.Duration) string {
	t.Helper()
	return connBackend(t, func(c net.Conn) {
		var head [12]byte
		out := make([]byte, 12)
		binary.BigEndian.PutUint32(out, 8)
		for {
			if _, err := io.ReadFull(c, head[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:]))-8); err != nil {
				return
			}
			copy(out[4:8], head[8:12])
			time.Sleep(delay)
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

// wideCommit returns an OffsetCommit v2 frame committing parts partitions
// of one topic, with correlation id corr.
func wideCommit(parts int, corr int32) []byte {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 2, "group", 1, "member"
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic = "orders"
	topic.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, parts)
	for i := range topic.Partitions {
		topic.Partitions[i] = kmsg.OffsetCommitRequestTopicPartition{Partition: int32(i), Offset: int64(i)}
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{topic}
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
}

// roundTrip writes frame to c and reads one response frame, checking its
// correlation id.
func roundTrip(t *testing.T, c net.Conn, frame []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		t.Fatal(err)
	}
	if got, want := binary.BigEndian.Uint32(head[4:]), binary.BigEndian.Uint32(frame[8:]); got != want {
		t.Fatalf("response correlation id %d, want %d", got, want)
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:]))-4); err != nil {
		t.Fatal(err)
	}
}

// heapInUse returns the live heap once the collector has run twice (buffer
// pools keep what they hold for one collection).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestIdleConnectionKeepsNoCommit: once an OffsetCommit naming a huge
// number of partitions is answered, the connection, idle and open, holds
// nothing of it: no memory of the budget, nothing its decoder and
// sequencer reach, and (without the race detector, which allocates on its
// own) no live heap. In none mode such a commit was decoded with kmsg into
// the connection's own message, which kept its slices and, through
// strings aliasing the frame, the frame, after the budget had been given
// its memory back.
func TestIdleConnectionKeepsNoCommit(t *testing.T) {
	const parts = 200_000
	p := startProxy(t, config.OrderingNone, []string{commitBackend(t, 0)}, nil)
	c := dial(t, p.Addr())
	frame := wideCommit(parts, 1)
	small := wideCommit(3, 2)
	// The connection's one-time state: its upstream, its reader's
	// buffers, its sequencer's ring.
	roundTrip(t, c, small)
	before := heapInUse()
	roundTrip(t, c, frame)
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().MemoryUsed != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if used := p.Stats().MemoryUsed; used != 0 {
		t.Fatalf("an idle connection holds %d bytes of the memory budget", used)
	}
	if n := p.Retained(); n > 4<<10 {
		t.Fatalf("an idle connection keeps %d bytes of the requests it classified (a commit of %d partitions, a %d-byte frame)", n, parts, len(frame))
	}
	if raceEnabled {
		return
	}
	after := heapInUse()
	t.Logf("live heap %d bytes before the commit, %d after", before, after)
	if grew := int64(after) - int64(before); grew > 1<<20 {
		t.Fatalf("the live heap grew by %d bytes after a commit of %d partitions (a %d-byte frame) was answered", grew, parts, len(frame))
	}
	runtime.KeepAlive(frame)
}
