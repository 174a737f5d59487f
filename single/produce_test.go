package single

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"runtime"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// hashView leads each partition from one of three brokers by a hash of
// its topic and number; partition 9 has no leader and 11 is unknown, so
// that some entries are answered by the proxy and go to no part.
type hashView struct{}

func (hashView) Leader(topic string, id [16]byte, partition int32) int32 {
	switch partition {
	case 9:
		return splitmerge.NoLeader
	case 11:
		return splitmerge.UnknownPartition
	}
	h := int32(len(topic)) + int32(id[0]) + partition*7
	return 1 + h%3
}
func (hashView) Coordinator(int8, string) int32 { return 1 }
func (hashView) Brokers() []int32               { return []int32{1, 2, 3} }

// produceFrame encodes req behind a request header, as a client sends
// it; flexible headers carry tags when tags is set.
func produceFrame(req *kmsg.ProduceRequest, tags bool) []byte {
	b := make([]byte, 4, 256)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Version))
	b = binary.BigEndian.AppendUint32(b, 77)
	b = binary.BigEndian.AppendUint16(b, 6)
	b = append(b, "client"...)
	if wire.Flexible(0, req.Version) {
		if tags {
			b = append(b, 1, 3, 2, 'h', 't')
		} else {
			b = append(b, 0)
		}
	}
	b = req.AppendTo(b)
	wire.SetLength(b)
	return b
}

// randomProduce makes a Produce request at version with several topics
// (a name or id repeated now and then), partitions led by every broker
// (a number repeated now and then), null, empty and sized records, and,
// when flexible and tags is set, unknown tags at every level.
func randomProduce(rng *rand.Rand, version int16, tags bool) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	if rng.Intn(2) == 0 {
		id := fmt.Sprintf("txn-%d", rng.Intn(100))
		req.TransactionID = &id
	}
	req.Acks = []int16{-1, 0, 1}[rng.Intn(3)]
	req.TimeoutMillis = rng.Int31n(60000)
	flexible := wire.Flexible(0, version)
	tag := func(t *kmsg.Tags) {
		if flexible && tags && rng.Intn(2) == 0 {
			t.Set(uint32(rng.Intn(3)), []byte{byte(rng.Intn(256))})
			t.Set(uint32(10+rng.Intn(3)), bytes.Repeat([]byte{'t'}, rng.Intn(4)))
		}
	}
	for range 1 + rng.Intn(5) {
		t := kmsg.NewProduceRequestTopic()
		n := rng.Intn(4)
		if version >= 13 {
			t.TopicID[0], t.TopicID[15] = byte(n), byte(rng.Intn(256))
		} else {
			t.Topic = fmt.Sprintf("topic-%d", n)
		}
		for range rng.Intn(7) {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition = rng.Int31n(12)
			switch rng.Intn(5) {
			case 0:
			case 1:
				p.Records = []byte{}
			default:
				p.Records = make([]byte, 1+rng.Intn(300))
				rng.Read(p.Records)
			}
			tag(&p.UnknownTags)
			t.Partitions = append(t.Partitions, p)
		}
		tag(&t.UnknownTags)
		req.Topics = append(req.Topics, t)
	}
	tag(&req.UnknownTags)
	return req
}

// testRequest is a client's request as the proxy holds it, its header
// and frame alone.
type testRequest struct {
	hdr   wire.RequestHeader
	frame *wire.Buf
}

func (r *testRequest) Header() *wire.RequestHeader                     { return &r.hdr }
func (r *testRequest) Frame() *wire.Buf                                { return r.frame }
func (r *testRequest) FixResponse(kmsg.Response)                       {}
func (r *testRequest) Unread() Unread                                  { return nil }
func (r *testRequest) ForcedAck() bool                                 { return false }
func (r *testRequest) SetFailed(error)                                 {}
func (r *testRequest) Pieces() bool                                    { return false }
func (r *testRequest) SetPieces([][]byte, []*sockio.Pipe, int, func()) {}
func (r *testRequest) Merging()                                        {}

// splitForTest parses and decodes frame as the single topology does
// and splits it over hashView.
func splitForTest(t testing.TB, frame []byte) (*testRequest, kmsg.Request, *splitmerge.Plan) {
	t.Helper()
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRequest{hdr: h, frame: &wire.Buf{B: frame}}
	req := kmsg.RequestForKey(0)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(frame[h.Body:]); err != nil {
		t.Fatal(err)
	}
	plan, err := splitmerge.Split(req, hashView{})
	if err != nil {
		t.Fatal(err)
	}
	return r, req, plan
}

// TestSingleProduceVectors: for random Produce requests of every version
// from 3, flexible or not, with tags or without, each part's vector
// joined is byte for byte the part kmsg encodes, and its records are the
// client's frame's own bytes, not a copy.
func TestSingleProduceVectors(t *testing.T) {
	maxV, _ := wire.MaxVersion(0)
	rng := rand.New(rand.NewSource(1))
	s := &Conn{}
	checked := 0
	for v := int16(3); v <= maxV; v++ {
		for i := range 300 {
			req := randomProduce(rng, v, i%2 == 0)
			frame := produceFrame(req, i%3 == 0)
			r, dec, plan := splitForTest(t, frame)
			vecs := s.vecFrametors(r, dec, plan.Parts)
			if len(plan.Parts) == 0 {
				if vecs != nil {
					t.Fatalf("v%d: vectors for no part", v)
				}
				continue
			}
			if vecs == nil {
				t.Fatalf("v%d: request %d does not lay out", v, i)
			}
			for k := range plan.Parts {
				want := encodePart(r, plan.Parts[k].Request).B
				got := bytes.Join(vecs[k].vec, nil)
				if !bytes.Equal(got, want) {
					t.Fatalf("v%d request %d part %d:\n got %x\nwant %x", v, i, k, got, want)
				}
				if copied, head := splitBytes(vecs[k].vec, frame), s.layout.HeadSize(r.hdr.Body, len(frame)-r.hdr.Body); copied > head {
					t.Fatalf("v%d request %d part %d: %d bytes outside the client's frame, more than its head's %d", v, i, k, copied, head)
				}
				vecs[k].put()
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d parts checked", checked)
	}
}

// splitBytes returns how many of vec's bytes are not frame's own.
func splitBytes(vec [][]byte, frame []byte) (copied int) {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	hi := lo + uintptr(len(frame))
	for _, b := range vec {
		at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if len(b) > 0 && (at < lo || at+uintptr(len(b)) > hi) {
			copied += len(b)
		}
	}
	return copied
}

// TestSingleProduceVectorsFallBack: a part list that does not match the
// request (a part that carries an entry the client never sent) is not
// laid out; the caller encodes the parts instead.
func TestSingleProduceVectorsFallBack(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, -1
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "a"
	tp.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte("x")}}
	req.Topics = []kmsg.ProduceRequestTopic{tp}
	r, dec, plan := splitForTest(t, produceFrame(req, false))
	if len(plan.Parts) != 1 {
		t.Fatalf("%d parts", len(plan.Parts))
	}
	s := &Conn{}
	part := *plan.Parts[0].Request.(*kmsg.ProduceRequest)
	stranger := kmsg.NewProduceRequestTopic()
	stranger.Topic = "a"
	stranger.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte("x")}}
	part.Topics = []kmsg.ProduceRequestTopic{stranger}
	if vecs := s.vecFrametors(r, dec, []splitmerge.Part{{Node: 1, Request: &part}}); vecs != nil {
		t.Fatal("laid out a part whose records are not the client's")
	}
	if vecs := s.vecFrametors(r, dec, plan.Parts); vecs == nil {
		t.Fatal("the split's own part does not lay out")
	}
}

// TestSingleProduceVectorBytes: laying out a Produce of 12 partitions of
// 64 KiB over three brokers allocates a few hundred bytes, nothing near
// the records' 768 KiB, where encoding each part copies all of them.
func TestSingleProduceVectorBytes(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	for ti := range 3 {
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = fmt.Sprintf("topic-%d", ti)
		for p := range int32(4) {
			tp.Partitions = append(tp.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: make([]byte, 64<<10)})
		}
		req.Topics = append(req.Topics, tp)
	}
	frame := produceFrame(req, false)
	r, dec, plan := splitForTest(t, frame)
	if len(plan.Parts) != 3 {
		t.Fatalf("%d parts, want 3", len(plan.Parts))
	}
	s := &Conn{}
	run := func() {
		for _, v := range s.vecFrametors(r, dec, plan.Parts) {
			v.put()
		}
	}
	run()
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		run()
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per request of %d bytes", per, len(frame))
	if per > 4<<10 {
		t.Fatalf("%d bytes allocated per request of %d bytes", per, len(frame))
	}
	var copied int
	for _, v := range s.vecFrametors(r, dec, plan.Parts) {
		copied += splitBytes(v.vec, frame)
		v.put()
	}
	if copied > 1<<10 {
		t.Fatalf("%d bytes of the parts are not the client's frame", copied)
	}
}

// countingConn records each Write, as a TLS connection makes a record
// of each.
type countingConn struct {
	net.Conn
	writes [][]byte
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), b...))
	return len(b), nil
}

// TestSingleProduceVectorNotTCP: on a socket that takes no vector (TLS),
// a part's pieces go in one write, joined; frames that are whole go one
// write each, as they did.
func TestSingleProduceVectorNotTCP(t *testing.T) {
	c := &countingConn{}
	if err := writeVector(c, net.Buffers{[]byte("head"), []byte("records"), []byte("tags")}, true); err != nil {
		t.Fatal(err)
	}
	if len(c.writes) != 1 || string(c.writes[0]) != "headrecordstags" {
		t.Fatalf("writes %q, want one of the pieces joined", c.writes)
	}
	c.writes = nil
	if err := writeVector(c, net.Buffers{[]byte("one"), []byte("two")}, false); err != nil {
		t.Fatal(err)
	}
	if len(c.writes) != 2 {
		t.Fatalf("writes %q, want one a frame", c.writes)
	}
}
