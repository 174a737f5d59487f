package proxy_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// TestMutatedProduceStreams sends, on many connections at once, pipelines
// of Produce requests (large ones that stream, peeked-at and spliced heads,
// small ones, acks=0 ones; v3 to v11), OffsetCommits, and Metadata and
// ApiVersions requests (barriers in none mode) with one request damaged: bytes of its head or body flipped, a length or count
// overwritten, or the stream cut inside it. The backend answers in a
// shuffled order, each Produce response naming, per partition, a hash of
// the records it got, and closes the connection, after answering
// everything before it, at a request it cannot parse, as a broker does. Whatever the damage, through the proxy in both
// modes:
//   - every response answers the request it is delivered to (same
//     correlation id, same partitions, same records), in the order sent;
//   - every request before the damaged one that expects an answer gets it;
//   - an undamaged pipeline is answered whole;
//   - every connection ends once the client has stopped sending;
//   - the memory budget is whole again and the proxy serves a new client.
func TestMutatedProduceStreams(t *testing.T) {
	for _, tc := range mutationCases {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			backend := startShufflingBackend(t)
			p, dial := tc.start(t, backend, func(c *config.Config) { c.MaxRequestSize = 1 << 20 })
			runConns(t, p, mode, func(rng *rand.Rand) (string, error) { return mutatedPipeline(dial, rng) })
			if _, err := mutatedPipeline(dial, rand.New(rand.NewPCG(1, 1)), noDamage); err != nil {
				t.Fatalf("a client after the damaged ones: %v", err)
			}
		})
	}
}

// mutationCase is a proxy the mutation tests run through.
type mutationCase struct {
	name string
	mode config.Ordering
	opts []proxy.Option
	tls  bool // clients connect over TLS
}

// mutationCases are the proxies the mutation tests run through: both
// modes; both again without splicing, where bodies are read and written
// instead; and both with clients over TLS, where nothing is spliced or
// peeked at and a half-close is TLS's close_notify.
var mutationCases = []mutationCase{
	{"connection", config.OrderingConnection, nil, false},
	{"none", config.OrderingNone, nil, false},
	{"connection/copied", config.OrderingConnection, []proxy.Option{proxy.WithoutSplice()}, false},
	{"none/copied", config.OrderingNone, []proxy.Option{proxy.WithoutSplice()}, false},
	{"connection/tls", config.OrderingConnection, nil, true},
	{"none/tls", config.OrderingNone, nil, true},
}

// start starts the case's proxy in front of backend, with mut applied to
// its configuration, and returns it with the dialer of its clients.
func (tc mutationCase) start(t *testing.T, backend string, mut func(*config.Config)) (*testProxy, func() (net.Conn, error)) {
	t.Helper()
	if !tc.tls {
		p := startProxy(t, tc.mode, []string{backend}, mut, tc.opts...)
		return p, func() (net.Conn, error) { return net.Dial("tcp", p.Addr()) }
	}
	k := newPKI(t)
	cert, key := k.files(t, "proxy", "127.0.0.1")
	p := startProxy(t, tc.mode, []string{backend}, func(c *config.Config) {
		c.TLSCert, c.TLSKey = cert, key
		if mut != nil {
			mut(c)
		}
	}, tc.opts...)
	cfg := k.tlsConfig(t, "")
	cfg.ServerName = "127.0.0.1"
	return p, func() (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.Addr(), cfg)
	}
}

// runConns runs 160 connections through p, six at a time, each driven by
// conn with a random source of its own, then waits until every connection
// has ended and the memory budget is whole again.
func runConns(t *testing.T, p *testProxy, mode config.Ordering, conn func(*rand.Rand) (local string, err error)) {
	t.Helper()
	const conns, parallel = 160, 6
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			seed := uint64(i)<<8 | uint64(len(mode))
			if local, err := conn(rand.New(rand.NewPCG(seed, 0x6d75))); err != nil {
				t.Errorf("connection %d (seed %d): %v; the proxy logged %q", i, seed, err, closeLine(p, local))
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for s := p.Stats(); s.Conns > 0 || s.MemoryUsed > 0; s = p.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, %d bytes of the memory budget reserved, after every client ended", s.Conns, s.MemoryUsed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type damage int

const (
	noDamage      damage = iota
	flipHead             // one to three bytes of the first 160 flipped
	overwriteWord        // four bytes of the first 160 set to an extreme
	flipAnywhere         // one byte past the correlation id flipped
	cutInside            // the stream ends inside the request
	resetInside          // the client resets the connection inside the request
	damages
)

func (d damage) String() string {
	return [...]string{"none", "flip-head", "overwrite-word", "flip-anywhere", "cut", "reset"}[d]
}

// sentRequest is one request as the client wrote it.
type sentRequest struct {
	corr     int32
	key      int16 // Produce or OffsetCommit
	version  int16
	answered bool // acks is not 0
	// parts are the "topic/partition" pairs it writes, each with the hash
	// of its records (0 for a commit, whose topic names it alone).
	parts map[string]uint64
	frame []byte
}

// mutatedPipeline writes one connection's pipeline, damaging one request
// (unless forced is given), and checks what comes back. It returns the
// connection's local address, by which the proxy logs it.
func mutatedPipeline(dial func() (net.Conn, error), rng *rand.Rand, forced ...damage) (local string, err error) {
	n := 4 + rng.IntN(6)
	numbered := rng.IntN(3) > 0
	corr := rng.Int32N(1 << 20)
	sent := make([]sentRequest, n)
	for i := range sent {
		sent[i] = randomRequest(rng, corr)
		if numbered {
			corr++
		} else {
			corr += 1 + rng.Int32N(5)
		}
	}
	d := damage(1 + rng.IntN(int(damages)-1))
	if len(forced) > 0 {
		d = forced[0]
	}
	bad := rng.IntN(n)
	var stream []byte
	for i := range sent {
		f := sent[i].frame
		if i != bad || d == noDamage {
			stream = append(stream, f...)
			continue
		}
		f = slices.Clone(f)
		switch d {
		case flipHead:
			for range 1 + rng.IntN(3) {
				at := headByte(rng, len(f))
				f[at] ^= byte(1 + rng.IntN(255))
			}
		case overwriteWord:
			at := 12 + rng.IntN(min(160, len(f)-4)-12)
			words := []uint32{0xffffffff, 0x7fffffff, 0, 0x10000, rng.Uint32()}
			binary.BigEndian.PutUint32(f[at:], words[rng.IntN(len(words))])
		case flipAnywhere:
			at := 12 + rng.IntN(len(f)-12)
			f[at] ^= byte(1 + rng.IntN(255))
		case cutInside, resetInside:
			f = f[:rng.IntN(len(f))]
		}
		if len(f) >= 12 {
			// The id the damaged request carries, if the damage reached it.
			sent[i].corr = int32(binary.BigEndian.Uint32(f[8:]))
		}
		stream = append(stream, f...)
		if d == cutInside || d == resetInside {
			break
		}
	}
	mutatedAt := bad
	if d == noDamage {
		mutatedAt = n
	}

	c, wrote, err := sendInPieces(dial, stream, rng, d == resetInside)
	if err != nil {
		return "", err
	}
	defer c.Close()
	local = c.LocalAddr().String()

	// Responses, matched in order to the requests sent.
	next := 0
	var endErr error
	for {
		resp, err := readFrame(c)
		if err != nil {
			endErr = err
			if connEnded(err) {
				break
			}
			return local, fmt.Errorf("damage %v at request %d of %d: reading: %w", d, bad, n, err)
		}
		got := int32(binary.BigEndian.Uint32(resp))
		j := next
		for j < n && (sent[j].corr != got || (!sent[j].answered && j != mutatedAt)) {
			if sent[j].answered && j < mutatedAt {
				return local, fmt.Errorf("damage %v at request %d of %d: response %d arrived before request %d (id %d) was answered", d, bad, n, got, j, sent[j].corr)
			}
			j++
		}
		if j == n {
			return local, fmt.Errorf("damage %v at request %d of %d: response with id %d answers no request sent after request %d", d, bad, n, got, next)
		}
		if j != mutatedAt {
			if err := checkResponse(sent[j], resp); err != nil {
				return local, fmt.Errorf("damage %v at request %d of %d: request %d: %w", d, bad, n, j, err)
			}
		}
		next = j + 1
	}
	if err := <-wrote; err != nil && d == noDamage {
		return local, fmt.Errorf("writing: %w", err)
	}
	if d == resetInside {
		// What the client is owed is lost with its socket.
		return local, nil
	}
	for j := next; j < min(mutatedAt, n); j++ {
		if sent[j].answered {
			return local, fmt.Errorf("damage %v at request %d of %d: request %d (id %d), sent whole before it, was never answered (the connection ended with %v)", d, bad, n, j, sent[j].corr, endErr)
		}
	}
	return local, nil
}

// closeLine is the line the proxy logs when the connection from local
// closes, waiting a moment for it (the proxy lingers before it closes).
func closeLine(p *testProxy, local string) string {
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		line := logLine(p.log.String(), "client="+local)
		if line != "" || time.Now().After(deadline) {
			return line
		}
	}
}

// headByte is a byte of the first 160 of a frame of n bytes, outside the
// key and version: a key the backend does not serve is not this test's
// subject.
func headByte(rng *rand.Rand, n int) int {
	for {
		if at := rng.IntN(min(160, n)); at < 4 || at >= 8 {
			return at
		}
	}
}

// randomRequest is, six times in ten, a Produce request to topic "m" of
// one to three partitions, large enough to stream more often than not;
// otherwise an OffsetCommit of a topic named after its id, or a request
// that is a barrier in none mode: a Metadata request for a topic named
// after its id, or an ApiVersions request.
func randomRequest(rng *rand.Rand, corr int32) sentRequest {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("mutate"))
	parts := map[string]uint64{}
	switch kind := rng.IntN(10); {
	case kind == 0:
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = int16(rng.IntN(4))
		req.ClientSoftwareName, req.ClientSoftwareVersion = "mutate", "1"
		return sentRequest{corr: corr, key: req.Key(), version: req.Version, answered: true, parts: parts,
			frame: fmtr.AppendRequest(nil, req, corr)}
	case kind == 1:
		req := kmsg.NewPtrMetadataRequest()
		req.Version = []int16{1, 4, 9, 12}[rng.IntN(4)]
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("b%d", corr))
		req.Topics = append(req.Topics, rt)
		parts[*rt.Topic+"/-1"] = 0
		return sentRequest{corr: corr, key: req.Key(), version: req.Version, answered: true, parts: parts,
			frame: fmtr.AppendRequest(nil, req, corr)}
	case kind < 4:
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = []int16{2, 6, 8}[rng.IntN(3)]
		req.Group = "g"
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = fmt.Sprintf("c%d", corr)
		for _, part := range rng.Perm(6)[:1+rng.IntN(3)] {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(part), rng.Int64N(1<<40)
			rt.Partitions = append(rt.Partitions, rp)
			parts[fmt.Sprintf("%s/%d", rt.Topic, part)] = 0
		}
		req.Topics = append(req.Topics, rt)
		return sentRequest{corr: corr, key: req.Key(), version: req.Version, answered: true, parts: parts,
			frame: fmtr.AppendRequest(nil, req, corr)}
	}
	version := []int16{3, 7, 9, 11}[rng.IntN(4)]
	acks := []int16{-1, -1, 1, 0}[rng.IntN(4)]
	var req *kmsg.ProduceRequest
	for _, part := range rng.Perm(6)[:1+rng.IntN(3)] {
		size := 50 + rng.IntN(450)
		if rng.IntN(10) < 7 {
			size = 20<<10 + rng.IntN(40<<10)
		}
		value := make([]byte, size)
		for i := range value {
			value[i] = byte(rng.Uint32())
		}
		one := pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: "m", Partition: int32(part), Value: value, Timestamp: 1,
			Version: version, Acks: acks, Timeout: 5 * time.Second,
		})
		pp := one.Topics[0].Partitions[0]
		parts[fmt.Sprintf("m/%d", part)] = recordsHash(pp.Records)
		if req == nil {
			req = one
			continue
		}
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, pp)
	}
	return sentRequest{corr: corr, key: req.Key(), version: version, answered: acks != 0, parts: parts,
		frame: fmtr.AppendRequest(nil, req, corr)}
}

func recordsHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64() >> 1
}

// checkResponse checks that resp (correlation id first) answers s: the
// same partitions, each of a Produce with the hash of the records s sent
// to it.
func checkResponse(s sentRequest, resp []byte) error {
	body := resp[4:]
	if s.key != 18 && wire.Flexible(s.key, s.version) {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	got := map[string]uint64{}
	switch s.key {
	case 18:
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = s.version
		if err := av.ReadFrom(body); err != nil {
			return fmt.Errorf("response does not parse as ApiVersions v%d: %w", s.version, err)
		}
		if av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
			return fmt.Errorf("ApiVersions answered with error %d and %d keys", av.ErrorCode, len(av.ApiKeys))
		}
	case 3:
		mr := kmsg.NewPtrMetadataResponse()
		mr.Version = s.version
		if err := mr.ReadFrom(body); err != nil {
			return fmt.Errorf("response does not parse as Metadata v%d: %w", s.version, err)
		}
		for _, tp := range mr.Topics {
			if tp.Topic != nil {
				got[*tp.Topic+"/-1"] = 0
			}
		}
	case 0:
		pr := kmsg.NewPtrProduceResponse()
		pr.Version = s.version
		if err := pr.ReadFrom(body); err != nil {
			return fmt.Errorf("response does not parse as Produce v%d: %w", s.version, err)
		}
		for _, tp := range pr.Topics {
			for _, pp := range tp.Partitions {
				got[fmt.Sprintf("%s/%d", tp.Topic, pp.Partition)] = uint64(pp.BaseOffset)
			}
		}
	default:
		cr := kmsg.NewPtrOffsetCommitResponse()
		cr.Version = s.version
		if err := cr.ReadFrom(body); err != nil {
			return fmt.Errorf("response does not parse as OffsetCommit v%d: %w", s.version, err)
		}
		for _, tp := range cr.Topics {
			for _, pp := range tp.Partitions {
				got[fmt.Sprintf("%s/%d", tp.Topic, pp.Partition)] = 0
			}
		}
	}
	if len(got) != len(s.parts) {
		return fmt.Errorf("response names %d partitions, request wrote %d", len(got), len(s.parts))
	}
	for k, h := range s.parts {
		if g, ok := got[k]; !ok || g != h {
			return fmt.Errorf("response for %s is for another request (%x, sent %x)", k, g, h)
		}
	}
	return nil
}

// sendInPieces dials and writes stream in the background, in pieces
// (writeInPieces), then half-closes (over TLS, after close_notify), or with
// reset resets the TCP connection; the channel gets the write's error. The
// connection has a deadline of 20 s.
func sendInPieces(dial func() (net.Conn, error), stream []byte, rng *rand.Rand, reset bool) (net.Conn, <-chan error, error) {
	c, err := dial()
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	wrote := make(chan error, 1)
	pieces := rand.New(rand.NewPCG(rng.Uint64(), 0))
	go func() {
		err := writeInPieces(c, stream, pieces)
		if reset {
			tc := c
			if t, ok := c.(*tls.Conn); ok {
				tc = t.NetConn()
			}
			tc.(*net.TCPConn).SetLinger(0)
			tc.Close()
		} else if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		wrote <- err
	}()
	return c, wrote, nil
}

// writeInPieces writes b in pieces of random sizes, now and then pausing,
// so that heads arrive split at every place.
func writeInPieces(c net.Conn, b []byte, rng *rand.Rand) error {
	for len(b) > 0 {
		k := min(len(b), 1+rng.IntN(96<<10))
		if rng.IntN(4) == 0 {
			k = min(len(b), 1+rng.IntN(200))
		}
		if _, err := c.Write(b[:k]); err != nil {
			return err
		}
		b = b[k:]
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
	return nil
}

func readFrame(c net.Conn) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("response length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, fmt.Errorf("inside a response: %w", err)
	}
	return b, nil
}

// connEnded reports whether a read failed because the connection ended:
// closed, or reset.
func connEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// startShufflingBackend starts a backend that parses every request as a
// broker would and answers Produce requests, acks=0 ones excepted, and
// OffsetCommits with the partitions they wrote, each Produce partition
// given the hash of its records as its base offset. It answers out of order (the proxy's to repair), holding up
// to three responses back and sending one of them at random; at a request
// it cannot parse it sends what it holds, in the same shuffled way, and
// closes the connection.
func startShufflingBackend(t *testing.T) string {
	t.Helper()
	return startBackend(t, func(c net.Conn, seed uint64) {
		shuffleAnswers(c, rand.New(rand.NewPCG(seed, 0x7368)))
	})
}

// startBackend listens on loopback and serves every connection with
// serve, given a seed of its own, then hangs up; it stops and waits for
// every connection when the test ends.
func startBackend(t *testing.T, serve func(c net.Conn, seed uint64)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seed := uint64(1); ; seed++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				serve(c, seed)
				hangUp(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// hangUp ends a backend connection so that what was written arrives:
// closing with requests unread would reset it, and a reset discards what
// the socket has not sent yet.
func hangUp(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.Copy(io.Discard, c)
	}
	c.Close()
}

func shuffleAnswers(c net.Conn, rng *rand.Rand) {
	resps := make(chan []byte, 64)
	go func() {
		defer close(resps)
		var lb [4]byte
		for {
			frame, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 1<<20)
			if err != nil {
				return
			}
			resp, ok := answer(frame.B)
			wire.Put(frame)
			if !ok {
				return
			}
			if resp != nil {
				resps <- resp
			}
		}
	}()
	// A response is held while others may join it, at most a millisecond,
	// then one of those held goes out at random.
	var held [][]byte
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	for {
		select {
		case resp, ok := <-resps:
			if !ok {
				for len(held) > 0 {
					i := rng.IntN(len(held))
					c.Write(held[i])
					held = slices.Delete(held, i, i+1)
				}
				return
			}
			held = append(held, resp)
			if len(held) < 4 {
				tick.Reset(time.Duration(rng.IntN(1000)) * time.Microsecond)
				continue
			}
		case <-tick.C:
		}
		if len(held) == 0 {
			continue
		}
		i := rng.IntN(len(held))
		if _, err := c.Write(held[i]); err != nil {
			c.Close() // ends the reader, which may be waiting to hand over
			for range resps {
			}
			return
		}
		held = slices.Delete(held, i, i+1)
		if len(held) > 0 {
			tick.Reset(time.Duration(rng.IntN(1000)) * time.Microsecond)
		}
	}
}

// answer is the response to one request frame (prefix included): nil for
// an acks=0 Produce, false for a request a broker would close the
// connection at.
func answer(frame []byte) ([]byte, bool) {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, false
	}
	var resp kmsg.Response
	switch h.Key {
	case 0:
		req := kmsg.NewPtrProduceRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, false
		}
		if req.Acks == 0 {
			return nil, true
		}
		pr := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				pp := kmsg.NewProduceResponseTopicPartition()
				pp.Partition = rp.Partition
				pp.BaseOffset = int64(recordsHash(rp.Records))
				tp.Partitions = append(tp.Partitions, pp)
			}
			pr.Topics = append(pr.Topics, tp)
		}
		resp = pr
	case 8:
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, false
		}
		cr := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			tp := kmsg.NewOffsetCommitResponseTopic()
			tp.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				pp := kmsg.NewOffsetCommitResponseTopicPartition()
				pp.Partition = rp.Partition
				tp.Partitions = append(tp.Partitions, pp)
			}
			cr.Topics = append(cr.Topics, tp)
		}
		resp = cr
	case 3:
		req := kmsg.NewPtrMetadataRequest()
		req.Version = h.Version
		if err := req.ReadFrom(frame[h.Body:]); err != nil {
			return nil, false
		}
		mr := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, rt := range req.Topics {
			tp := kmsg.NewMetadataResponseTopic()
			tp.Topic = rt.Topic
			mr.Topics = append(mr.Topics, tp)
		}
		resp = mr
	case 18:
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = min(h.Version, 3)
		for _, k := range []struct{ key, max int16 }{{0, 11}, {8, 8}, {18, 3}} {
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MaxVersion = k.key, k.max
			av.ApiKeys = append(av.ApiKeys, v)
		}
		resp = av
	default:
		return nil, false
	}
	return encodeResponse(h, resp), true
}

// encodeResponse frames resp, the answer to the request with header h.
func encodeResponse(h wire.RequestHeader, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(h.Correlation))
	if h.ResponseFlexible() {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}
