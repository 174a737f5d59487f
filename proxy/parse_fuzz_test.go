package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// FuzzClientStream runs arbitrary client bytes, split at any point, through
// the client side of the forwarding path: framing, header parsing,
// classification (Produce acks and partitions, commits, ApiVersions) and
// sequencing, in both modes, with dispatch and completion interleaved in an
// order drawn from the input. Nothing may panic; every accepted request
// keeps its frame; and the sequencer keeps its contract for what the parser
// made of the bytes: two writes sharing a partition are never in flight
// together and a barrier is never in flight with anything (none mode),
// responses leave in request order, each exactly once, and nothing is left
// behind once everything completed.
func FuzzClientStream(f *testing.F) {
	id := "fuzz"
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
	add := func(req kmsg.Request) {
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(fmtr.AppendRequest(nil, req, 1), uint(7), false)
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 0
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{1, 2, 3}
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	add(produce)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	add(commit)
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.Group = "g"
	add(txn)
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClusterID = kmsg.StringPtr("c")
	av.NodeID = 3
	add(av)
	// Pipelined mixes: writes to shared and disjoint partitions, commits,
	// an acks=0 write and barriers, so that the order checks have overlaps
	// to judge.
	pipelined := func(version int16, parts ...int32) []byte {
		var out []byte
		for i, part := range parts {
			p := kmsg.NewPtrProduceRequest()
			p.Version = version
			p.Acks = 1
			if i%4 == 3 {
				p.Acks = 0
			}
			t := kmsg.NewProduceRequestTopic()
			t.Topic = "t"
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = part
			pp.Records = []byte{1}
			t.Partitions = append(t.Partitions, pp)
			p.Topics = append(p.Topics, t)
			// AppendRequest writes the length at the start of dst:
			// each frame is encoded on its own.
			out = append(out, fmtr.AppendRequest(nil, p, int32(i))...)
			if i%5 == 4 {
				commit.SetVersion(min(version, commit.MaxVersion()))
				out = append(out, fmtr.AppendRequest(nil, commit, int32(100+i))...)
			}
			if i == 6 {
				av.SetVersion(3)
				out = append(out, fmtr.AppendRequest(nil, av, int32(200+i))...)
			}
		}
		return out
	}
	for _, v := range []int16{3, 9, 11} {
		for split := range uint(4) {
			f.Add(pipelined(v, 0, 1, 0, 2, 0, 1, 1, 0, 3, 0, 2, 2), split*977, false)
			f.Add(pipelined(v, 0, 0, 0, 1, 1, 0), split*131, true)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint, connectionMode bool) {
		cfg := config.Default()
		p := &Proxy{cfg: cfg}
		c := &conn{p: p, cfg: &cfg, node: -1}
		if connectionMode {
			c.mode = ordering.Connection
		}
		c.seq = ordering.New[*request](c.mode, 64, 1<<20)
		at := int(split % uint(len(data)+1))
		r := io.MultiReader(bytes.NewReader(data[:at]), bytes.NewReader(data[at:]))
		rng := rand.New(rand.NewPCG(uint64(split), uint64(len(data))))
		sim := newSeqCheck(t, c)
		var lb [4]byte
		for {
			buf, err := wire.ReadFrame(r, &lb, wire.MinRequestFrame, 1<<16)
			if err != nil {
				break
			}
			req, err := c.parseRequest(buf)
			if err != nil {
				wire.Put(buf)
				break
			}
			if req.local == nil && (req.frame == nil || len(req.frame.B) < wire.MinRequestFrame+4) {
				t.Fatalf("accepted request lost its frame")
			}
			if req.noResp && c.mode == ordering.Connection {
				putRequest(req)
				continue
			}
			if c.seq.Full() {
				sim.completeOne(rng)
			}
			sim.push(req)
			for rng.IntN(3) == 0 && sim.completeOne(rng) {
			}
		}
		for sim.completeOne(rng) {
		}
		sim.finish()
	})
}

// seqCheck drives a connection's sequencer as the proxy does and checks
// its contract on every event.
type seqCheck struct {
	t        *testing.T
	c        *conn
	keys     map[uint64][]ordering.Key // writes' keys as pushed (none mode, within the limit)
	barriers map[uint64]bool
	noResp   map[uint64]bool
	lastFwd  map[ordering.Key]uint64 // the last write forwarded per key
	inflight []*request
	pushed   uint64
	next     uint64 // the next sequence number Ready may yield
	batch    []*request
}

func newSeqCheck(t *testing.T, c *conn) *seqCheck {
	return &seqCheck{t: t, c: c, keys: map[uint64][]ordering.Key{}, barriers: map[uint64]bool{},
		noResp: map[uint64]bool{}, lastFwd: map[ordering.Key]uint64{}}
}

func (s *seqCheck) push(r *request) {
	r.seq = s.c.seq.Push(r.ord, r)
	if r.seq != s.pushed {
		s.t.Fatalf("push %d got sequence number %d", s.pushed, r.seq)
	}
	s.pushed++
	s.noResp[r.seq] = r.noResp
	if s.c.mode == ordering.None {
		if r.ord.Kind == ordering.Write && len(r.ord.Keys) <= ordering.MaxWriteKeys {
			s.keys[r.seq] = slices.Clone(r.ord.Keys)
		} else {
			s.barriers[r.seq] = true
		}
	}
	s.dispatch()
}

// dispatch forwards what the sequencer releases and checks that none of it
// may not be in flight with what already is.
func (s *seqCheck) dispatch() {
	s.batch = s.c.seq.Dispatch(s.batch[:0])
	for _, r := range s.batch {
		if s.c.mode == ordering.None {
			for _, f := range s.inflight {
				switch {
				case s.barriers[r.seq] || s.barriers[f.seq]:
					s.t.Fatalf("request %d forwarded while %d is in flight, one of them a barrier", r.seq, f.seq)
				case sharesKey(s.keys[r.seq], s.keys[f.seq]):
					s.t.Fatalf("writes %d and %d share a partition and are in flight together", r.seq, f.seq)
				}
			}
			for _, k := range s.keys[r.seq] {
				if last, ok := s.lastFwd[k]; ok && last > r.seq {
					s.t.Fatalf("write %d forwarded after the later write %d to the same partition", r.seq, last)
				}
				s.lastFwd[k] = r.seq
			}
		}
		s.inflight = append(s.inflight, r)
	}
}

// completeOne completes a random in-flight request, releases what is ready
// and dispatches what that frees; it reports false when nothing is in
// flight.
func (s *seqCheck) completeOne(rng *rand.Rand) bool {
	if len(s.inflight) == 0 {
		s.dispatch()
		if len(s.inflight) == 0 {
			if !s.c.seq.Idle() {
				s.t.Fatalf("%d requests live and nothing in flight or dispatchable", s.c.seq.Len())
			}
			return false
		}
	}
	i := rng.IntN(len(s.inflight))
	r := s.inflight[i]
	s.inflight = slices.Delete(s.inflight, i, i+1)
	if err := s.c.seq.Complete(r.seq); err != nil {
		s.t.Fatalf("complete %d: %v", r.seq, err)
	}
	delete(s.keys, r.seq)
	delete(s.barriers, r.seq)
	s.batch = s.c.seq.Ready(s.batch[:0])
	for _, out := range s.batch {
		if out.seq < s.next {
			s.t.Fatalf("response %d released twice or after %d", out.seq, s.next)
		}
		for skipped := s.next; skipped < out.seq; skipped++ {
			if !s.noResp[skipped] {
				s.t.Fatalf("response %d released before %d", out.seq, skipped)
			}
		}
		if out.noResp {
			s.t.Fatalf("request %d expects no response but one was released", out.seq)
		}
		s.next = out.seq + 1
		putRequest(out)
	}
	s.dispatch()
	return true
}

// finish checks that everything pushed was released and nothing is left.
func (s *seqCheck) finish() {
	if !s.c.seq.Idle() || len(s.inflight) > 0 {
		s.t.Fatalf("%d requests live, %d in flight after every completion", s.c.seq.Len(), len(s.inflight))
	}
	if err := s.c.seq.Leaks(); err != nil {
		s.t.Fatal(err)
	}
}

func sharesKey(a, b []ordering.Key) bool {
	for _, k := range a {
		if slices.Contains(b, k) {
			return true
		}
	}
	return false
}
