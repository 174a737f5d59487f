package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// holdFirst is an upstream in front of kfake that answers each connection
// in order, except that a connection whose first request is not
// ApiVersions has its first answer held until release is closed: every
// answer after it arrives ahead of it.
type holdFirst struct {
	ln      net.Listener
	kafka   string
	release chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func newHoldFirst(t *testing.T, kafka string) *holdFirst {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holdFirst{ln: ln, kafka: kafka, release: make(chan struct{})}
	h.wg.Add(1)
	go h.accept()
	t.Cleanup(func() {
		h.Release()
		ln.Close()
		h.wg.Wait()
	})
	return h
}

func (h *holdFirst) Addr() string { return h.ln.Addr().String() }

// Release sends the answers held back.
func (h *holdFirst) Release() { h.once.Do(func() { close(h.release) }) }

func (h *holdFirst) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.wg.Add(1)
		go h.serve(c)
	}
}

// serve relays one connection to kfake: its requests as they come, its
// answers in kfake's order but the first, when held, last.
func (h *holdFirst) serve(c net.Conn) {
	defer h.wg.Done()
	defer c.Close()
	up, err := net.Dial("tcp", h.kafka)
	if err != nil {
		return
	}
	defer up.Close()
	first, err := readRawFrame(c)
	if err != nil {
		return
	}
	const apiVersionsKey = 18
	hold := binary.BigEndian.Uint16(first[4:]) != apiVersionsKey
	if _, err := up.Write(first); err != nil {
		return
	}
	go func() {
		io.Copy(up, c)
		up.Close()
	}()
	var wmu sync.Mutex
	for i := 0; ; i++ {
		f, err := readRawFrame(up)
		if err != nil {
			return
		}
		if i == 0 && hold {
			go func() {
				<-h.release
				wmu.Lock()
				defer wmu.Unlock()
				c.Write(f)
			}()
			continue
		}
		wmu.Lock()
		_, err = c.Write(f)
		wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// readRawFrame reads one length-prefixed frame, its prefix included.
func readRawFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	f := make([]byte, 4+binary.BigEndian.Uint32(n[:]))
	copy(f, n[:])
	_, err := io.ReadFull(r, f[4:])
	return f, err
}

// TestResponsesAheadLeaveOtherConnectionsServed: a connection's answers
// that arrive ahead of a late one are held until it comes, and may fill
// the memory budget; another connection must still have its request read
// and its answer, which it is owed next, delivered at once, not once the
// first is shed for lack of memory. One pipeline of 200 OffsetCommits,
// whose first answer the upstream holds back, has its 199 others (512
// bytes of buffer each) fill a 64 KiB budget; then an unrelated client's
// ApiVersions must be answered well within the response wait (5 s here).
// Before, the held answers took the whole budget: the ApiVersions request
// could not be read, nor its answer, until the pipeline was closed after
// the response wait, and when both waits began at once, as under load,
// the unrelated connection was closed with it.
func TestResponsesAheadLeaveOtherConnectionsServed(t *testing.T) {
	const wait = 5 * time.Second
	defer proxy.SetResponseWait(wait)()
	kafka := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "t"))
	up := newHoldFirst(t, kafka.ListenAddrs()[0])
	p := startProxy(t, config.OrderingConnection, []string{up.Addr()}, func(c *config.Config) {
		c.MaxMemory = 64 << 10
		c.MaxRequestSize, c.MaxResponseSize = 32<<10, 32<<10
		c.ReadTimeout = 0
	})
	frames := make([][]byte, 200)
	for i := range frames {
		frames[i] = paddedCommit(int32(i%4), 10, int32(i+1))
	}
	outcome := make(chan pipelineOutcome, 1)
	go func() { outcome <- pipelineWrites(p.Addr(), frames) }()
	// The pipeline's upstream reader waits for memory once the answers
	// ahead fill what they may.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if p.Stats().MemoryWaits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answers ahead of the held one never filled the budget (%d of %d bytes used)", p.Stats().MemoryUsed, 64<<10)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if took, err := apiVersions(t, p.Addr(), wait/2); err != nil {
		t.Errorf("an unrelated client's ApiVersions beside answers held ahead: %v after %s", err, took)
	}
	up.Release()
	o := <-outcome
	if o.answered != o.sent {
		p.log.waitFor(t, `msg="connection closed" client=`+o.client)
		t.Logf("the pipeline was closed after %d of %d answers: %s", o.answered, o.sent, logLine(p.log.String(), "client="+o.client))
	}
}
