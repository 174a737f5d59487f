package capture_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/wire"
)

// sessionFetch is a Fetch at version listing the first listed of parts
// (topic, partition) pairs, as an incremental fetch session's request
// lists only what changed, and its answer naming all of parts in a random
// order, each with a batch of one record.
func sessionFetch(version int16, parts [][2]int, listed int, rng *rand.Rand) (frame, respFrame []byte) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.SessionID, req.SessionEpoch = 7, 3
	for _, tp := range parts[:listed] {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = fmt.Sprintf("topic-%d", tp[0])
		t.TopicID = [16]byte{byte(tp[0]), byte(tp[0] >> 8), 1}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = int32(tp[1])
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	resp.SessionID = 7
	order := rng.Perm(len(parts))
	for _, i := range order {
		tp := parts[i]
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d", tp[0])
		t.TopicID = [16]byte{byte(tp[0]), byte(tp[0] >> 8), 1}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(tp[1])
		p.RecordBatches = capturetest.Batch(1, 70)
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
	}
	return capturetest.Frames(req, resp, "client-1")
}

// manyProduce is a Produce v9 of a batch of 3 records to each of n
// partitions (spread) and its answer, every partition written at offset
// 100, naming them in a random order (rng; nil: the request's).
func manyProduce(n int, rng *rand.Rand) (frame, respFrame []byte) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	parts := spread(n)
	for _, tp := range parts {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = fmt.Sprintf("topic-%d", tp[0])
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(tp[1]), capturetest.Batch(3, 70)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if rng != nil {
		order = rng.Perm(n)
	}
	for _, i := range order {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = fmt.Sprintf("topic-%d", parts[i][0])
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.Partition, sp.BaseOffset = int32(parts[i][1]), 100
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
	}
	return capturetest.Frames(req, resp, "client-1")
}

// spread is n (topic, partition) pairs over n/4 topics.
func spread(n int) [][2]int {
	out := make([][2]int, n)
	for i := range out {
		out[i] = [2]int{i / 4, i % 4}
	}
	return out
}

// TestAnswerCostLinear: placing an answer's partitions in the event, and
// grouping them by topic, looks at a bounded number of entries per
// partition, whatever the order of the answer and however few of its
// partitions the request listed (an incremental fetch session's): the
// work of 8,000 partitions is about twice that of 4,000, not four times,
// read whole and streamed, for Fetch and for Produce.
func TestAnswerCostLinear(t *testing.T) {
	fetchWork := func(n int, streamed bool) int {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		frame, respFrame := sessionFetch(16, spread(n), n/10, rng)
		var c capture.Conn
		h, err := wire.ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		ar := c.Read(h, frame, []byte("client-1"), true, true, nil, false)
		if streamed {
			if err := streamFetched(&c, ar, 16, respFrame, rng); err != nil {
				t.Fatal(err)
			}
			respFrame = nil
		}
		c.Answered(ar, h, respFrame, time.Unix(1, 0))
		got := 0
		for _, r := range ar.Request().Resources {
			for _, p := range r.Partitions {
				if p.Records != 1 {
					t.Fatalf("%d partitions: %s/%d recorded as %+v", n, r.Name, p.Partition, p)
				}
				got++
			}
		}
		if got != n || len(ar.Request().Resources) != n/4 {
			t.Fatalf("%d partitions over %d topics recorded as %d over %d", n, n/4, got, len(ar.Request().Resources))
		}
		defer capture.Put(ar)
		return ar.Work()
	}
	produceWork := func(n int) int {
		frame, respFrame := manyProduce(n, rand.New(rand.NewPCG(uint64(n), 2)))
		var c capture.Conn
		ar := exchange(t, &c, frame, respFrame, false)
		defer capture.Put(ar)
		for _, r := range ar.Request().Resources {
			for _, p := range r.Partitions {
				if p.FirstOffset != 100 || p.LastOffset != 102 {
					t.Fatalf("%d partitions: %s/%d recorded as %+v", n, r.Name, p.Partition, p)
				}
			}
		}
		return ar.Work()
	}
	for _, tc := range []struct {
		name string
		work func(int) int
	}{
		{"fetch/whole", func(n int) int { return fetchWork(n, false) }},
		{"fetch/streamed", func(n int) int { return fetchWork(n, true) }},
		{"produce", produceWork},
	} {
		small, large := tc.work(4000), tc.work(8000)
		t.Logf("%s: %d entries looked at for 4,000 partitions, %d for 8,000", tc.name, small, large)
		if large > 5*8000 || float64(large) > 2.3*float64(small) {
			t.Errorf("%s: %d entries looked at for 4,000 partitions, %d for 8,000: not linear", tc.name, small, large)
		}
	}
}

// TestAnswerPartitionsBounded: an answer naming more partitions than its
// request listed adds them to the event up to the bound and counts the
// rest omitted, read whole and streamed; so does a Produce streamed
// upstream, whose answer names them again without counting them twice.
func TestAnswerPartitionsBounded(t *testing.T) {
	const extra = 300
	n := capture.MaxEventParts + 4 + extra
	rng := rand.New(rand.NewPCG(3, 3))
	frame, respFrame := sessionFetch(12, spread(n), 4, rng)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	for _, streamed := range []bool{false, true} {
		var c capture.Conn
		ar := c.Read(h, frame, []byte("client-1"), true, true, nil, false)
		q := answerFetch(t, &c, ar, h, respFrame, streamed, rng)
		held := 0
		for _, r := range q.Resources {
			held += len(r.Partitions)
		}
		if held != capture.MaxEventParts+4 || q.PartitionsOmitted != extra {
			t.Fatalf("streamed %v: %d partitions held and %d omitted, want %d and %d", streamed, held, q.PartitionsOmitted, capture.MaxEventParts+4, extra)
		}
		capture.Put(ar)
	}

	// A Produce streamed upstream past the bound.
	var steps []wire.StreamStep
	pframe, prespFrame := manyProduce(capture.MaxEventParts+extra, nil)
	ph, err := wire.ParseRequestHeader(pframe)
	if err != nil {
		t.Fatal(err)
	}
	var s wire.ProduceScan
	if err := s.Reset(pframe[ph.Body:], ph.Version); err != nil {
		t.Fatal(err)
	}
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		steps = append(steps, wire.StreamStep{Found: true, Partition: p, Records: int64(len(p.Records))})
	}
	var c capture.Conn
	var st capture.Stream
	ar := c.Read(ph, pframe[:ph.Body], []byte("client-1"), false, true, nil, true)
	st.Begin(ar)
	for _, step := range steps {
		c.Count(&st, step, step.Partition.Records)
	}
	c.Streamed(&st)
	c.Answered(ar, ph, prespFrame, time.Unix(1, 0))
	q := ar.Request()
	held := 0
	for _, r := range q.Resources {
		for _, p := range r.Partitions {
			if p.Records != 3 || p.FirstOffset != 100 {
				t.Fatalf("streamed produce: %s/%d recorded as %+v", r.Name, p.Partition, p)
			}
			held++
		}
	}
	if held != capture.MaxEventParts || q.PartitionsOmitted != extra {
		t.Fatalf("streamed produce: %d partitions held and %d omitted, want %d and %d", held, q.PartitionsOmitted, capture.MaxEventParts, extra)
	}
	capture.Put(ar)
}

// TestGroupOrder: however many partitions an event holds, its resources
// are its topics in the order they first appear, each with its
// partitions in the order they came: topics found through the map (more
// than a few of them, from the one past the search on) as by the search
// (a few).
func TestGroupOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for round := range 200 {
		topics := 1 + rng.IntN(40)
		n := 1 + rng.IntN(min(150, topics*20))
		var parts [][2]int
		seen := map[[2]int]bool{}
		for len(parts) < n {
			tp := [2]int{rng.IntN(topics), rng.IntN(20)}
			if !seen[tp] {
				seen[tp] = true
				parts = append(parts, tp)
			}
		}
		frame, respFrame := sessionFetch(12, parts, 0, rng)
		var c capture.Conn
		ar := exchange(t, &c, frame, respFrame, false)
		// The answer's order, which the event's must follow.
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(12)
		if err := resp.ReadFrom(respFrame[9:]); err != nil {
			t.Fatal(err)
		}
		var want []audit.Resource
		at := map[string]int{}
		for _, rt := range resp.Topics {
			i, ok := at[rt.Topic]
			if !ok {
				i = len(want)
				at[rt.Topic] = i
				want = append(want, audit.Resource{Type: "Topic", Name: rt.Topic, Operation: "Read"})
			}
			for _, rp := range rt.Partitions {
				want[i].Partitions = append(want[i].Partitions, audit.Partition{Partition: rp.Partition, Records: 1, Bytes: 70,
					FirstOffset: 0, LastOffset: 0, Committed: audit.NoOffset, FetchOffset: audit.NoOffset})
			}
		}
		if got := ar.Request().Resources; !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, %d partitions of %d topics: grouped as\n%+v\nwant\n%+v", round, n, topics, got, want)
		}
		capture.Put(ar)
	}
}

// TestRequestPartitionsBounded: a request read whole that names more than
// the event holds keeps the first MaxEventParts partitions, completed by
// the answer, and counts the rest in partitions_omitted once, the answer
// naming them again adding none.
func TestRequestPartitionsBounded(t *testing.T) {
	const extra = 300
	n := capture.MaxEventParts + extra
	rng := rand.New(rand.NewPCG(5, 5))
	frame, respFrame := sessionFetch(12, spread(n), n, rng)
	pframe, prespFrame := manyProduce(n, rng)
	for _, tc := range []struct {
		name            string
		frame, resp     []byte
		streamed, fetch bool
	}{
		{"fetch", frame, respFrame, false, true},
		{"fetch streamed", frame, respFrame, true, true},
		{"produce", pframe, prespFrame, false, false},
	} {
		h, err := wire.ParseRequestHeader(tc.frame)
		if err != nil {
			t.Fatal(err)
		}
		var c capture.Conn
		ar := c.Read(h, tc.frame, []byte("client-1"), true, true, nil, false)
		q := answerFetch(t, &c, ar, h, tc.resp, tc.streamed, rng)
		held := 0
		for _, r := range q.Resources {
			for _, p := range r.Partitions {
				want := fmt.Sprintf("topic-%d/%d", held/4, held%4)
				if got := fmt.Sprintf("%s/%d", r.Name, p.Partition); got != want {
					t.Fatalf("%s: partition %d of the event is %s, want %s, the request's", tc.name, held, got, want)
				}
				if tc.fetch && p.Records != 1 || !tc.fetch && (p.Records != 3 || p.FirstOffset != 100) {
					t.Fatalf("%s: %s/%d recorded as %+v, not completed by its answer", tc.name, r.Name, p.Partition, p)
				}
				held++
			}
		}
		if held != capture.MaxEventParts || q.PartitionsOmitted != extra {
			t.Fatalf("%s: %d partitions held and %d omitted, want %d and %d", tc.name, held, q.PartitionsOmitted, capture.MaxEventParts, extra)
		}
		capture.Put(ar)
	}
}

// answerFetch completes ar with its answer respFrame, read whole or, when
// streamed, counted as the proxy counts an answer it streams, and returns
// its event.
func answerFetch(t *testing.T, c *capture.Conn, ar *capture.Req, h wire.RequestHeader, respFrame []byte, streamed bool, rng *rand.Rand) *audit.Request {
	t.Helper()
	resp := respFrame
	if streamed {
		if err := streamFetched(c, ar, h.Version, respFrame, rng); err != nil {
			t.Fatal(err)
		}
		resp = nil
	}
	c.Answered(ar, h, resp, time.Unix(1, 0))
	return ar.Request()
}
