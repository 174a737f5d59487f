package single_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// randomFetchResponse is a Fetch answer at version v with every field the
// version has drawn at random: repeated and empty topics, aborted
// transactions null, empty and not, null, empty, small and large record
// sets (around the uvarint widths and the pass threshold), the tagged
// fields at and off their defaults, unknown tags at every level, and the
// proxy's endpoints.
func randomFetchResponse(rng *rand.Rand, v int16) *kmsg.FetchResponse {
	tags := func() kmsg.Tags {
		var t kmsg.Tags
		for range rng.IntN(3) * rng.IntN(2) {
			t.Set(uint32(10+rng.IntN(5)), bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(4)))
		}
		return t
	}
	sizes := []int{-1, 0, 1, 5, 126, 127, 200, 1023, 1024, 1025, 16383, 16384, 70000}
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = v
	fr.ThrottleMillis = rng.Int32N(1000)
	fr.ErrorCode = int16(rng.IntN(3))
	fr.SessionID = rng.Int32N(5)
	for ti := range rng.IntN(4) {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = string(rune('a'+rng.IntN(3))) + "topic"
		rt.TopicID[0], rt.TopicID[15] = byte(ti), byte(rng.IntN(256))
		rt.UnknownTags = tags()
		for range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rng.Int32N(10)
			p.ErrorCode = int16(rng.IntN(2)) * 6
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64N(1<<40), rng.Int64N(9)
			switch rng.IntN(3) {
			case 1:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			case 2:
				for range 1 + rng.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
					a.UnknownTags = tags()
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			p.PreferredReadReplica = rng.Int32N(3) - 1
			if n := sizes[rng.IntN(len(sizes))]; n >= 0 {
				p.RecordBatches = make([]byte, n)
				for k := range p.RecordBatches {
					p.RecordBatches[k] = byte(k*7 + n)
				}
			}
			if rng.IntN(2) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32N(4)-1, rng.Int64N(4)-1
			}
			if rng.IntN(2) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32N(4)-1, rng.Int32N(4)-1
				p.CurrentLeader.UnknownTags = tags()
			}
			if rng.IntN(3) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rng.Int64N(4)-1, rng.Int32N(4)-1
			}
			p.UnknownTags = tags()
			rt.Partitions = append(rt.Partitions, p)
		}
		fr.Topics = append(fr.Topics, rt)
	}
	if rng.IntN(2) == 0 {
		rack := "r1"
		fr.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "proxy.example", Port: 9092}, {NodeID: 2, Host: "h", Port: 1, Rack: &rack}}
		fr.Brokers[1].UnknownTags = tags()
	}
	fr.UnknownTags = tags()
	return fr
}

// checkVector checks that fr's vector is byte for byte its frame as kmsg
// encodes it, that the record sets passed through are the answer's own
// bytes, not copies, and that the head holds nothing else.
func checkVector(t *testing.T, fr *kmsg.FetchResponse, corr int32, flexible bool, from int) {
	t.Helper()
	want := wire.AppendResponse(nil, corr, flexible, fr.AppendTo)
	head, pieces := single.AppendFetchVector(nil, nil, fr, corr, flexible, from)
	got := bytes.Join(pieces, nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("v%d from %d: the vector (%d bytes) is not the frame kmsg encodes (%d bytes)", fr.Version, from, len(got), len(want))
	}
	passed := single.FetchPassed(fr, from)
	if len(head)+passed != len(want) {
		t.Fatalf("v%d: head %d + passed %d, frame %d", fr.Version, len(head), passed, len(want))
	}
	recs := map[*byte]bool{}
	for i := range fr.Topics {
		for _, p := range fr.Topics[i].Partitions {
			if len(p.RecordBatches) >= from && len(p.RecordBatches) > 0 {
				recs[&p.RecordBatches[0]] = true
			}
		}
	}
	for i, pc := range pieces {
		if i%2 == 1 && !recs[&pc[0]] {
			t.Fatalf("v%d: piece %d is not a record set of the answer", fr.Version, i)
		}
	}
}

// TestFetchVectorIsKmsg: at every version kmsg knows, with and without a
// flexible header, for random answers, the vector is the frame kmsg
// encodes, with record sets passed through from every size up.
func TestFetchVectorIsKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(0); v <= (*kmsg.FetchResponse)(nil).MaxVersion(); v++ {
		for range 200 {
			fr := randomFetchResponse(rng, v)
			for _, from := range []int{0, 1, 1024, 1 << 30} {
				checkVector(t, fr, rng.Int32(), v >= 12, from)
			}
		}
	}
}

// FuzzFetchVector: every Fetch body kmsg reads, at any version, has a
// vector that is the frame kmsg encodes of it.
func FuzzFetchVector(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for v := int16(4); v <= 18; v++ {
		f.Add(uint8(v), randomFetchResponse(rng, v).AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version uint8, body []byte) {
		fr := kmsg.NewPtrFetchResponse()
		fr.Version = int16(version % 19)
		if fr.ReadFrom(body) != nil {
			return
		}
		checkVector(t, fr, 9, fr.Version >= 12, 3)
	})
}

// BenchmarkMergedFetch: what the proxy spends on a merged Fetch answer of
// 8 MiB from three parts, from the parts' frames read to the answer
// written (to io.Discard): each part decoded (its records alias its
// frame), merged, then encoded into a frame of its own ("encode", the
// path below fetchVecFrom) or made a vector ("vector").
func BenchmarkMergedFetch(b *testing.B) {
	const v = 12
	view := costView(1, 3)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionEpoch = v, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t0"
	for p := range int32(3) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	plan, err := splitmerge.Split(req, view)
	if err != nil || len(plan.Parts) != 3 {
		b.Fatalf("split in %d parts: %v", len(plan.Parts), err)
	}
	frames := make([][]byte, 3)
	for i, part := range plan.Parts {
		resp := answerPart(part.Request).(*kmsg.FetchResponse)
		resp.Topics[0].Partitions[0].RecordBatches = bytes.Repeat([]byte{byte(i)}, 8<<20/3)
		frames[i] = wire.AppendResponse(nil, int32(i), true, resp.AppendTo)
	}
	self := splitmerge.Self{NodeID: 0, Host: "proxy", Port: 9092}
	merged := func(b *testing.B) *kmsg.FetchResponse {
		results := make([]splitmerge.Result, 3)
		for i, f := range frames {
			resp, err := single.DecodeAnswer(1, v, f)
			if err != nil {
				b.Fatal(err)
			}
			results[i].Response = resp
		}
		resp, err := plan.Merge(results, self)
		if err != nil {
			b.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	size := single.EncodedSize(merged(b), 1, true)
	encode := func(w io.Writer) func(*testing.B) {
		return func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				fr := merged(b)
				n := single.EncodedSize(fr, 1, true)
				out := wire.AppendResponse(make([]byte, 0, n), 1, true, fr.AppendTo)
				if _, err := w.Write(out); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	vector := func(w io.Writer) func(*testing.B) {
		return func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				fr := merged(b)
				n := single.EncodedSize(fr, 1, true) - single.FetchPassed(fr, 1<<10)
				head, pieces := single.AppendFetchVector(make([]byte, 0, n), nil, fr, 1, true, 1<<10)
				if len(head) != n {
					b.Fatalf("head of %d bytes, sized %d", len(head), n)
				}
				bufs := net.Buffers(pieces)
				if _, err := bufs.WriteTo(w); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("encode", encode(io.Discard))
	b.Run("vector", vector(io.Discard))
	// The same, written to a loopback socket whose reader drops what it
	// reads: the kernel's copy counted too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("encode/tcp", encode(c))
	b.Run("vector/tcp", vector(c))
}

// TestFetchVectorOfMerge: at every version from 4, a Fetch of two topics
// of six partitions each, split over three brokers, whose parts answer
// at random (every field drawn as in randomFetchResponse, a partition
// left out now and then, a part failed), merged as the proxy merges:
// the merged answer's vector is the frame kmsg encodes of it.
func TestFetchVectorOfMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := kmsg.NewPtrMetadataResponse()
	for _, b := range []int32{1, 2, 3} {
		m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b})
	}
	for ti := range 2 {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr("t"+string(rune('0'+ti))), [16]byte{byte(ti + 1)}
		for p := range int32(6) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, 1+p%3
			mt.Partitions = append(mt.Partitions, mp)
		}
		m.Topics = append(m.Topics, mt)
	}
	view := new(splitmerge.Table)
	view.ApplyMetadata(m, true)
	self := splitmerge.Self{NodeID: 0, Host: "proxy", Port: 9092}
	merges := 0
	for v := int16(4); v <= (*kmsg.FetchResponse)(nil).MaxVersion(); v++ {
		for range 50 {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.SessionEpoch = v, -1
			for _, mt := range m.Topics {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = *mt.Topic, mt.TopicID
				for p := range int32(6) {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			plan, err := splitmerge.Split(req, view)
			if err != nil {
				t.Fatal(err)
			}
			results := make([]splitmerge.Result, len(plan.Parts))
			for i, part := range plan.Parts {
				if rng.IntN(10) == 0 {
					results[i].Err = errors.New("broker down")
					continue
				}
				pr := part.Request.(*kmsg.FetchRequest)
				resp := randomFetchResponse(rng, v)
				resp.Topics = resp.Topics[:0]
				for _, qt := range pr.Topics {
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic, rt.TopicID = qt.Topic, qt.TopicID
					for _, qp := range qt.Partitions {
						if rng.IntN(8) == 0 {
							continue
						}
						shape := randomFetchResponse(rng, v)
						for len(shape.Topics) == 0 || len(shape.Topics[0].Partitions) == 0 {
							shape = randomFetchResponse(rng, v)
						}
						rp := shape.Topics[0].Partitions[0]
						rp.Partition = qp.Partition
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
				// As the proxy reads it: decoded from its frame.
				frame := wire.AppendResponse(nil, 1, v >= 12, resp.AppendTo)
				if results[i].Response, err = single.DecodeAnswer(1, v, frame); err != nil {
					t.Fatal(err)
				}
			}
			merged, err := plan.Merge(results, self)
			if err != nil {
				t.Fatal(err)
			}
			checkVector(t, merged.(*kmsg.FetchResponse), rng.Int32(), v >= 12, 1<<10)
			merges++
		}
	}
	t.Logf("%d merged answers checked", merges)
}
