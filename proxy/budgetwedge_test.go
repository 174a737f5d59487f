package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// paddedCommit returns an OffsetCommit v2 frame committing one partition
// of group "g", its metadata pad bytes long, with correlation id corr.
func paddedCommit(partition int32, pad int, corr int32) []byte {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = 2, "g"
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic = "t"
	meta := strings.Repeat("m", pad)
	topic.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: int64(corr), Metadata: &meta}}
	req.Topics = []kmsg.OffsetCommitRequestTopic{topic}
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
}

// readAnswers reads n response frames from c, checking that their
// correlation ids are want's, in order, and returns how many arrived
// before the deadline.
func readAnswers(c net.Conn, want []int32, deadline time.Time) (int, error) {
	c.SetReadDeadline(deadline)
	var head [8]byte
	for i, corr := range want {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return i, err
		}
		if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
			return i, fmt.Errorf("response %d where %d was owed", got, corr)
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:]))-4); err != nil {
			return i, err
		}
	}
	return len(want), nil
}

// apiVersions asks for the upstream's versions on a connection of its
// own and reports how long the answer took.
func apiVersions(t *testing.T, addr string, within time.Duration) (time.Duration, error) {
	t.Helper()
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	start := time.Now()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return 0, err
	}
	_, err := readAnswers(c, []int32{1}, start.Add(within))
	return time.Since(start), err
}

// TestPendingCommitsCannotWedgeTheBudget: requests that wait for an earlier
// write to the same partition hold their frames; they must never keep the
// upstream reader from reading the response that releases them. One
// connection pipelines 80 OffsetCommits of about 4 KB to one group
// partition, under a 256 KiB budget with 64 KiB frame caps and no read
// timeout, in front of an upstream that answers each after 50 ms: every
// commit is answered, in order, and an unrelated client's ApiVersions is
// answered meanwhile. Before, the pending frames filled the budget, the
// first response could not be read, none of the 80 was answered, and the
// whole process stopped serving.
func TestPendingCommitsCannotWedgeTheBudget(t *testing.T) {
	up := newReorderer(t, 50*time.Millisecond, 50*time.Millisecond, "t", 1)
	p := startProxy(t, config.OrderingNone, []string{up.Addr()}, func(c *config.Config) {
		c.MaxMemory = 256 << 10
		c.MaxRequestSize, c.MaxResponseSize = 64<<10, 64<<10
		c.ReadTimeout = 0
	})
	const n = 80
	var pipeline []byte
	want := make([]int32, n)
	for i := range n {
		want[i] = int32(i + 1)
		pipeline = append(pipeline, paddedCommit(0, 4000, want[i])...)
	}
	c := dial(t, p.Addr())
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(pipeline)
		wrote <- err
	}()
	got := make(chan error, 1)
	answered := 0
	go func() {
		var err error
		answered, err = readAnswers(c, want, time.Now().Add(30*time.Second))
		got <- err
	}()
	// While the pipeline waits on its partition, another client is
	// served.
	time.Sleep(500 * time.Millisecond)
	took, err := apiVersions(t, p.Addr(), 10*time.Second)
	t.Logf("an unrelated client's ApiVersions took %s", took)
	if err != nil {
		t.Errorf("an unrelated client's ApiVersions: %v after %s", err, took)
	}
	if err := <-got; err != nil {
		t.Fatalf("%d of %d commits answered: %v", answered, n, err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestHeldResponsesThatCannotFitCloseTheirConnection: an upstream that
// answers every commit but the first, with responses that together exceed
// the budget, before the first: the proxy must hold them until the first
// arrives, and the first is behind them on the socket. The connection is
// closed with the memory budget as its reason once a response has waited
// the response wait, its memory goes back, and other clients are served.
func TestHeldResponsesThatCannotFitCloseTheirConnection(t *testing.T) {
	defer proxy.SetResponseWait(300 * time.Millisecond)()
	const n = 10
	// Every answer but the first, 40 KiB each, then the first. Another
	// client's connection is accepted by the kernel and never read.
	backend := heartbeatBackend(t, n, func(c net.Conn, corrs [][4]byte) {
		for _, i := range append([]int{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0) {
			resp := binary.BigEndian.AppendUint32(nil, 4+40<<10)
			resp = append(resp, corrs[i][:]...)
			if _, err := c.Write(append(resp, make([]byte, 40<<10)...)); err != nil {
				return
			}
		}
	})
	p := startProxy(t, config.OrderingNone, []string{backend}, func(c *config.Config) {
		c.MaxMemory = 256 << 10
		c.MaxRequestSize, c.MaxResponseSize = 64<<10, 64<<10
		c.ReadTimeout = 0
	})
	c := dial(t, p.Addr())
	var pipeline []byte
	for i := range n {
		// Disjoint partitions: all ten are in flight at once.
		pipeline = append(pipeline, paddedCommit(int32(i), 10, int32(i+1))...)
	}
	if _, err := c.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	answered, err := readAnswers(c, []int32{1}, time.Now().Add(10*time.Second))
	if answered != 0 || err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("%d answered, then %v; want the connection closed", answered, err)
	}
	p.log.waitFor(t, "memory budget: a response found no memory")
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().MemoryUsed != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if used := p.Stats().MemoryUsed; used != 0 {
		t.Fatalf("%d bytes of the budget still held after the connection closed", used)
	}
	// Another client is served: an ApiVersions above what the proxy
	// parses, which it answers itself.
	other := dial(t, p.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 9)
	binary.BigEndian.PutUint16(frame[6:], 100)
	if _, err := other.Write(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := readAnswers(other, []int32{9}, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("another client after the close: %v", err)
	}
}
