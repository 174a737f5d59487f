package single_test

import (
	"fmt"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// costView is a cluster of three brokers and topics t0..t(topics-1) of
// partitions each, partition p led by broker 1+p%3: every request splits
// in three.
func costView(topics, partitions int) *splitmerge.Table {
	m := kmsg.NewPtrMetadataResponse()
	for _, b := range []int32{1, 2, 3} {
		m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b})
	}
	for t := range topics {
		tt := kmsg.NewMetadataResponseTopic()
		tt.Topic = kmsg.StringPtr(fmt.Sprintf("t%d", t))
		for p := range int32(partitions) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, 1+p%3
			tt.Partitions = append(tt.Partitions, mp)
		}
		m.Topics = append(m.Topics, tt)
	}
	tb := new(splitmerge.Table)
	tb.ApplyMetadata(m, true)
	return tb
}

// answerPart answers a Produce or Fetch part as a broker would, every
// partition without error (and a Fetch's without records: they alias the
// answer's frame, which is charged as it is read).
func answerPart(req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = r.Version
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.FetchRequest:
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = r.Version
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}

// allocated returns the bytes fn allocates on the heap. TotalAlloc counts
// the whole process, the runtime's own allocations too: on a loaded
// machine the stop-the-world of ReadMemStats can end by waking a P that no
// idle OS thread is left to run, and the thread the runtime then starts
// (its m, g0, signal goroutine and profiling stacks, about 5.5 KB) lands
// in the window. A window in which the process gained a thread is thrown
// away and fn, which must be repeatable, measured again; nothing else is
// discarded, so what fn allocates is never measured short.
func allocated(t *testing.T, fn func()) uint64 {
	t.Helper()
	threads := pprof.Lookup("threadcreate")
	const attempts = 20
	for range attempts {
		var before, after runtime.MemStats
		runtime.GC()
		n := threads.Count()
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		if threads.Count() == n {
			return after.TotalAlloc - before.TotalAlloc
		}
		t.Logf("the runtime started an OS thread while measuring: measuring again")
	}
	t.Fatalf("the runtime started an OS thread in each of %d windows: nothing measured", attempts)
	return 0
}

// TestSplitCostCoversWhatSplitAllocates checks the estimate the single
// topology reserves before it decodes a request against what decoding it,
// splitting it over three brokers, decoding the parts' answers and
// merging them allocate, for Produce and Fetch requests of one partition
// to 100,000 and of many topics. Other requests are estimated by their
// bytes: what their decode and split allocate must stay within half the
// estimate, the other half being their answers, which mirror them. Without
// the race detector, which allocates on its own.
func TestSplitCostCoversWhatSplitAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	self := splitmerge.Self{NodeID: 0, Host: "proxy", Port: 9092}
	shapes := [][2]int{{1, 1}, {1, 1000}, {1, 100000}, {1000, 1}, {30000, 1}, {100, 1000}}
	for _, sh := range shapes {
		topics, partitions := sh[0], sh[1]
		view := costView(topics, partitions)
		produce := kmsg.NewPtrProduceRequest()
		produce.Version, produce.Acks = 9, 1
		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version = 12
		list := kmsg.NewPtrListOffsetsRequest()
		list.Version = 7
		del := kmsg.NewPtrDeleteRecordsRequest()
		del.Version = 2
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 12
		for ti := range topics {
			name := fmt.Sprintf("t%d", ti)
			pt := kmsg.NewProduceRequestTopic()
			ft := kmsg.NewFetchRequestTopic()
			lt := kmsg.NewListOffsetsRequestTopic()
			dt := kmsg.NewDeleteRecordsRequestTopic()
			pt.Topic, ft.Topic, lt.Topic, dt.Topic = name, name, name, name
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(name)
			for p := range int32(partitions) {
				pt.Partitions = append(pt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p})
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition = p
				ft.Partitions = append(ft.Partitions, fp)
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Partition = p
				lt.Partitions = append(lt.Partitions, lp)
				dp := kmsg.NewDeleteRecordsRequestTopicPartition()
				dp.Partition = p
				dt.Partitions = append(dt.Partitions, dp)
			}
			produce.Topics = append(produce.Topics, pt)
			fetch.Topics = append(fetch.Topics, ft)
			list.Topics = append(list.Topics, lt)
			del.Topics = append(del.Topics, dt)
			meta.Topics = append(meta.Topics, mt)
		}
		for _, req := range []kmsg.Request{produce, fetch, list, del, meta} {
			name := fmt.Sprintf("%s of %d×%d", kmsg.NameForKey(req.Key()), topics, partitions)
			body := req.AppendTo(nil)
			key, version := req.Key(), req.GetVersion()
			var plan *splitmerge.Plan
			cost := allocated(t, func() {
				dec := kmsg.RequestForKey(key)
				dec.SetVersion(version)
				if err := dec.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				var err error
				if plan, err = splitmerge.Split(dec, view); err != nil {
					t.Fatal(err)
				}
			})
			est := uint64(single.SplitCost(key, version, body))
			if answerPart(req) == nil {
				if cost > est/2 {
					t.Errorf("%s (%d bytes): decode and split allocate %d, more than half the estimate %d", name, len(body), cost, est)
				}
				t.Logf("%s (%d bytes): %d allocated by decode and split, %d estimated", name, len(body), cost, est)
				continue
			}
			frames := make([][]byte, len(plan.Parts))
			for i, part := range plan.Parts {
				frames[i] = wire.AppendResponse(nil, 1, wire.Flexible(key, version), answerPart(part.Request).AppendTo)
			}
			cost += allocated(t, func() {
				results := make([]splitmerge.Result, len(plan.Parts))
				for i := range frames {
					resp, err := single.DecodeAnswer(key, version, frames[i])
					if err != nil {
						t.Fatal(err)
					}
					results[i].Response = resp
				}
				if _, err := plan.Merge(results, self); err != nil {
					t.Fatal(err)
				}
			})
			if cost > est {
				t.Errorf("%s (%d bytes): decode, split, answers and merge allocate %d, more than the estimate %d", name, len(body), cost, est)
			}
			t.Logf("%s (%d bytes): %d allocated, %d estimated", name, len(body), cost, est)
		}
	}
}

// TestMergedFetchSizeIsExact: the size a merged Fetch answer's frame is
// reserved and made at is the size it encodes to, at every version, with
// null, empty and non-empty records.
func TestMergedFetchSizeIsExact(t *testing.T) {
	for v := int16(0); v <= 16; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		for ti, sizes := range [][]int{{-1, 0, 5}, {126, 127, 128, 16383, 16384, 1 << 20}} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = fmt.Sprintf("t%d", ti)
			for pi, n := range sizes {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = int32(pi)
				if n >= 0 {
					rp.RecordBatches = make([]byte, n)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		flexible := v >= 12
		want := len(wire.AppendResponse(nil, 7, flexible, resp.AppendTo))
		if got := single.EncodedSize(resp, 7, flexible); got != want {
			t.Errorf("v%d: sized at %d, encodes to %d", v, got, want)
		}
		if again := len(wire.AppendResponse(nil, 7, flexible, resp.AppendTo)); again != want {
			t.Errorf("v%d: %d bytes after sizing, %d before: the records were not put back", v, again, want)
		}
	}
}

// TestFetchShare: a Fetch's parts (each carrying the client's maximum)
// ask together for what the client asked, split evenly, and at most a
// quarter of the budget when the merged answer is encoded whole (held
// beside them, twice their size) or half when the client takes it in
// pieces (its records left in the parts' answers).
func TestFetchShare(t *testing.T) {
	const mib = 1 << 20
	plan := func(asks ...int32) *splitmerge.Plan {
		p := &splitmerge.Plan{Key: 1}
		for i, n := range asks {
			fr := kmsg.NewPtrFetchRequest()
			fr.MaxBytes = n
			p.Parts = append(p.Parts, splitmerge.Part{Node: int32(i + 1), Request: fr})
		}
		return p
	}
	for _, c := range []struct {
		name   string
		budget int64
		lean   bool
		asks   []int32
		want   []int32
	}{
		{"whole", 32 * mib, false, []int32{50 * mib, 50 * mib, 50 * mib}, []int32{8 * mib / 3, 8 * mib / 3, 8 * mib / 3}},
		{"lean", 32 * mib, true, []int32{50 * mib, 50 * mib, 50 * mib}, []int32{16 * mib / 3, 16 * mib / 3, 16 * mib / 3}},
		{"client's own", 1 << 30, true, []int32{50 * mib, 50 * mib}, []int32{25 * mib, 25 * mib}},
		{"client's small ask", 32 * mib, true, []int32{mib, mib}, []int32{mib / 2, mib / 2}},
	} {
		p := plan(c.asks...)
		single.FetchShare(p, budget.New(c.budget), c.lean)
		for i, part := range p.Parts {
			if got := part.Request.(*kmsg.FetchRequest).MaxBytes; got != c.want[i] {
				t.Errorf("%s: part %d asks %d, want %d", c.name, i, got, c.want[i])
			}
		}
	}
}
