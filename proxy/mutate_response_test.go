package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// TestMutatedResponses runs pipelines of Produce, OffsetCommit and Fetch
// requests (every version the proxy treats differently: Fetch below v16
// streamed unread, v16 and later streamed through a walk of the body when
// large, scanned for broker addresses when small) through the proxy
// to a backend that answers in order but damages one response of each
// connection: bytes of its head or body flipped, its length overwritten,
// its id made one no request has, sent twice, or cut short by a close. In
// both modes:
//   - every response the client gets answers the request it is delivered
//     to (same id, same partitions, the same tag the request carried), in
//     order, the damaged one alone excepted;
//   - every request before the damaged one is answered;
//   - every connection ends, the memory budget is whole again, and the
//     proxy serves a new client.
func TestMutatedResponses(t *testing.T) {
	mutateResponses(t, answerTagged, func(b *damagingBackend) (responsePipeline, func(*testing.T)) {
		return responsePipeline{backend: b, request: randomTagged, check: checkTaggedUnlessDamaged}, nil
	})
}

// mutateResponses runs a response mutation test through each proxy of
// mutationCases: a backend answering with answer and damaging one response
// of each connection, the connections of the pipeline newPipe makes for
// it, then one connection the backend spares. The check newPipe returns
// with it, if any, runs last, while the proxy still serves.
func mutateResponses(t *testing.T, answer func([]byte, net.Addr, *rand.Rand) ([]byte, int64, bool), newPipe func(*damagingBackend) (responsePipeline, func(*testing.T))) {
	for _, tc := range mutationCases {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			backend := startDamagingBackend(t, answer)
			p, dial := tc.start(t, backend.addr, nil)
			pipe, last := newPipe(backend)
			runConns(t, p, mode, func(rng *rand.Rand) (string, error) { return pipe.run(dial, rng) })
			if hurt := backend.count(); hurt < 80 {
				t.Fatalf("the backend damaged %d responses in 160 connections; the test needs more", hurt)
			}
			backend.spare.Store(true)
			if _, err := pipe.run(dial, rand.New(rand.NewPCG(1, 1))); err != nil {
				t.Fatalf("a client after the damaged ones: %v", err)
			}
			if last != nil {
				last(t)
			}
		})
	}
}

// tagged is a request whose answer names its tag: unique in the test, it
// tells the backend which request it damaged and the client which answer
// is whose.
type tagged struct {
	corr    int32
	key     int16
	version int16
	tag     int64
	parts   []string // "topic/partition" pairs
	frame   []byte
}

var nextTag atomic.Int64

// responsePipeline is one kind of connection of a response mutation test:
// the requests it sends and what it checks of each response.
type responsePipeline struct {
	backend *damagingBackend
	request func(rng *rand.Rand, corr int32) tagged
	// check checks a response (id first) delivered to s; damaged says
	// whether the backend damaged the response to s.
	check func(s tagged, resp []byte, damaged bool) error
}

// run writes one connection's pipeline and checks what comes back. It
// returns the connection's local address.
func (pp responsePipeline) run(dial func() (net.Conn, error), rng *rand.Rand) (local string, err error) {
	b := pp.backend
	n := 4 + rng.IntN(8)
	corr := rng.Int32N(1 << 20)
	sent := make([]tagged, n)
	var stream []byte
	for i := range sent {
		sent[i] = pp.request(rng, corr+int32(i))
		stream = append(stream, sent[i].frame...)
	}
	c, wrote, err := sendInPieces(dial, stream, rng, false)
	if err != nil {
		return "", err
	}
	defer c.Close()
	local = c.LocalAddr().String()
	got := 0
	var endErr error
	for {
		resp, err := readFrame(c)
		if err != nil {
			endErr = err
			if connEnded(err) {
				break
			}
			if got < n && b.damaged(sent[got].tag) {
				// A damaged response streamed as it came: cut, or
				// of a length that was not its own.
				break
			}
			return local, fmt.Errorf("reading: %w", err)
		}
		if got == n {
			return local, fmt.Errorf("a response after all %d requests were answered", n)
		}
		s := sent[got]
		if id := int32(binary.BigEndian.Uint32(resp)); id != s.corr {
			return local, fmt.Errorf("response %d has id %d, want %d", got, id, s.corr)
		}
		if err := pp.check(s, resp, b.damaged(s.tag)); err != nil {
			return local, fmt.Errorf("response %d (key %d v%d): %w", got, s.key, s.version, err)
		}
		got++
	}
	<-wrote
	for j := range got {
		if b.damaged(sent[j].tag) {
			return local, nil
		}
	}
	for j := got; j < n; j++ {
		if b.damaged(sent[j].tag) {
			return local, nil
		}
		return local, fmt.Errorf("request %d of %d (key %d v%d), before the one whose response was damaged, if any, was never answered (the connection ended with %v)",
			j, n, sent[j].key, sent[j].version, endErr)
	}
	return local, nil
}

// randomTagged is a Produce (v3 to v11, one or two partitions, small or
// large), an OffsetCommit (v2, v6, v8) or a Fetch (v4 to v18).
func randomTagged(rng *rand.Rand, corr int32) tagged {
	tag := nextTag.Add(1)
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("mutate"))
	var req kmsg.Request
	var parts []string
	switch rng.IntN(3) {
	case 0:
		r := kmsg.NewPtrProduceRequest()
		r.Version = []int16{3, 7, 9, 10, 11}[rng.IntN(5)]
		r.Acks, r.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = fmt.Sprintf("p%d", tag)
		for _, part := range rng.Perm(4)[:1+rng.IntN(2)] {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(part)
			rp.Records = largeBatch(50 + rng.IntN(40<<10))
			rt.Partitions = append(rt.Partitions, rp)
			parts = append(parts, fmt.Sprintf("%s/%d", rt.Topic, part))
		}
		r.Topics = append(r.Topics, rt)
		req = r
	case 1:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version = []int16{2, 6, 8}[rng.IntN(3)]
		r.Group = "g"
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = fmt.Sprintf("c%d", tag)
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = int32(rng.IntN(4))
		rt.Partitions = append(rt.Partitions, rp)
		parts = append(parts, fmt.Sprintf("%s/%d", rt.Topic, rp.Partition))
		r.Topics = append(r.Topics, rt)
		req = r
	default:
		r := kmsg.NewPtrFetchRequest()
		// Half from v16 on, where a large response streams through a
		// walk of its body.
		r.Version = int16(4 + rng.IntN(12))
		if rng.IntN(2) == 0 {
			r.Version = int16(16 + rng.IntN(3))
		}
		r.MaxBytes, r.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = fmt.Sprintf("f%d", tag)
		binary.BigEndian.PutUint64(rt.TopicID[:], uint64(tag))
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(rng.IntN(4))
		rp.FetchOffset = tag
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		parts = append(parts, fmt.Sprintf("fetch/%d", rp.Partition))
		r.Topics = append(r.Topics, rt)
		req = r
	}
	return tagged{corr: corr, key: req.Key(), version: req.GetVersion(), tag: tag, parts: parts,
		frame: fmtr.AppendRequest(nil, req, corr)}
}

// checkTaggedUnlessDamaged is checkTagged for a response the backend did
// not damage.
func checkTaggedUnlessDamaged(s tagged, resp []byte, damaged bool) error {
	if damaged {
		return nil
	}
	return checkTagged(s, resp)
}

// checkTagged checks that resp (id first) answers s: the same partitions,
// and the tag s carried.
func checkTagged(s tagged, resp []byte) error {
	body := resp[4:]
	if wire.Flexible(s.key, s.version) {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	var got []string
	wrongTag := false // a partition answered with another request's tag
	switch s.key {
	case 0:
		r := kmsg.NewPtrProduceResponse()
		r.Version = s.version
		if err := r.ReadFrom(body); err != nil {
			return fmt.Errorf("does not parse: %w", err)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				got = append(got, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
				wrongTag = wrongTag || p.BaseOffset != s.tag
			}
		}
	case 8:
		r := kmsg.NewPtrOffsetCommitResponse()
		r.Version = s.version
		if err := r.ReadFrom(body); err != nil {
			return fmt.Errorf("does not parse: %w", err)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				got = append(got, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
			}
		}
		// The topic is named after the tag.
	default:
		r := kmsg.NewPtrFetchResponse()
		r.Version = s.version
		if err := r.ReadFrom(body); err != nil {
			return fmt.Errorf("does not parse: %w", err)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				got = append(got, fmt.Sprintf("fetch/%d", p.Partition))
				wrongTag = wrongTag || p.HighWatermark != s.tag || len(p.RecordBatches) == 0
			}
		}
	}
	if !slices.Equal(got, s.parts) || wrongTag {
		return fmt.Errorf("answers %v, not the request's %v (tag %d)", got, s.parts, s.tag)
	}
	return nil
}

// damagingBackend answers every request in order, after a random delay,
// and damages one response of each connection.
type damagingBackend struct {
	addr string
	// answer makes the response to one request frame (prefix included)
	// that arrived at the backend's address self, and names the
	// request's tag; false for a request it does not serve.
	answer func(frame []byte, self net.Addr, rng *rand.Rand) (resp []byte, tag int64, ok bool)
	mu     sync.Mutex
	hurt   map[int64]bool // tags of the requests whose response was damaged
	// spare: damage nothing from now on.
	spare atomic.Bool
}

func (b *damagingBackend) damaged(tag int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hurt[tag]
}

func (b *damagingBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hurt)
}

func startDamagingBackend(t *testing.T, answer func([]byte, net.Addr, *rand.Rand) ([]byte, int64, bool)) *damagingBackend {
	t.Helper()
	b := &damagingBackend{answer: answer, hurt: map[int64]bool{}}
	b.addr = startBackend(t, func(c net.Conn, seed uint64) {
		b.serve(c, rand.New(rand.NewPCG(seed, 0x6462)))
	})
	return b
}

func (b *damagingBackend) serve(c net.Conn, rng *rand.Rand) {
	victim := rng.IntN(8)
	var lb [4]byte
	for i := 0; ; i++ {
		frame, err := wire.ReadFrame(c, &lb, wire.MinRequestFrame, 4<<20)
		if err != nil {
			return
		}
		resp, tag, ok := b.answer(frame.B, c.LocalAddr(), rng)
		wire.Put(frame)
		if !ok {
			return
		}
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
		if i != victim || b.spare.Load() {
			if _, err := c.Write(resp); err != nil {
				return
			}
			continue
		}
		b.mu.Lock()
		b.hurt[tag] = true
		b.mu.Unlock()
		kind := rng.IntN(6)
		switch kind {
		case 0: // bytes of the head flipped, the id's excepted
			for range 1 + rng.IntN(3) {
				at := rng.IntN(min(64, len(resp)))
				if at >= 4 && at < 8 {
					at = 8 + rng.IntN(len(resp)-8)
				}
				resp[at] ^= byte(1 + rng.IntN(255))
			}
		case 1: // a byte anywhere past the id flipped
			resp[8+rng.IntN(len(resp)-8)] ^= byte(1 + rng.IntN(255))
		case 2: // the length overwritten
			binary.BigEndian.PutUint32(resp, []uint32{0, 3, 0x7fffffff, 0xffffffff, rng.Uint32()}[rng.IntN(5)])
		case 3: // an id no request has
			binary.BigEndian.PutUint32(resp[4:], binary.BigEndian.Uint32(resp[4:])^1<<30)
		case 4: // sent twice
			resp = append(resp, resp...)
		case 5: // cut short, and the connection closed
			c.Write(resp[:rng.IntN(len(resp))])
			return
		}
		if _, err := c.Write(resp); err != nil || kind != 1 {
			// Only a flipped body leaves the stream in step; after
			// any other damage the backend hangs up, as one that
			// lost track would, rather than leave the proxy waiting
			// for bytes that never come.
			return
		}
	}
}

// answerTagged answers one request frame (prefix included) with its tag;
// false for a request it does not serve.
func answerTagged(frame []byte, _ net.Addr, rng *rand.Rand) ([]byte, int64, bool) {
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, 0, false
	}
	var resp kmsg.Response
	var tag int64
	switch h.Key {
	case 0:
		r := kmsg.NewPtrProduceRequest()
		r.Version = h.Version
		if err := r.ReadFrom(frame[h.Body:]); err != nil || len(r.Topics) == 0 {
			return nil, 0, false
		}
		fmt.Sscanf(r.Topics[0].Topic, "p%d", &tag)
		pr := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				pp := kmsg.NewProduceResponseTopicPartition()
				pp.Partition, pp.BaseOffset = rp.Partition, tag
				tp.Partitions = append(tp.Partitions, pp)
			}
			pr.Topics = append(pr.Topics, tp)
		}
		resp = pr
	case 8:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version = h.Version
		if err := r.ReadFrom(frame[h.Body:]); err != nil || len(r.Topics) == 0 {
			return nil, 0, false
		}
		fmt.Sscanf(r.Topics[0].Topic, "c%d", &tag)
		out, ok := answer(frame)
		return out, tag, ok
	case 1:
		r := kmsg.NewPtrFetchRequest()
		r.Version = h.Version
		if err := r.ReadFrom(frame[h.Body:]); err != nil {
			return nil, 0, false
		}
		fr := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic, tp.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				pp := kmsg.NewFetchResponseTopicPartition()
				pp.Partition, pp.HighWatermark = rp.Partition, rp.FetchOffset
				tag = rp.FetchOffset
				pp.RecordBatches = largeBatch(50 + rng.IntN(80<<10))
				tp.Partitions = append(tp.Partitions, pp)
			}
			fr.Topics = append(fr.Topics, tp)
		}
		resp = fr
	default:
		out, ok := answer(frame)
		return out, 0, ok && out != nil
	}
	return encodeResponse(h, resp), tag, true
}
