package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchRequests are Fetch request bodies at version: two topics, three
// partitions in all, with forgotten topics and a rack after them.
func fetchRequests(version int16) [][]byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.SessionID, req.SessionEpoch = 5, 2
	for ti, name := range []string{"orders", "payments"} {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = name
		t.TopicID = [16]byte{byte(ti + 1), 9}
		for p := range int32(2 - ti) {
			pt := kmsg.NewFetchRequestTopicPartition()
			pt.Partition = p + int32(ti)*4
			pt.FetchOffset = 100*int64(ti) + int64(p) + 7
			pt.PartitionMaxBytes = 1 << 20
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
	whole := req.AppendTo(nil)
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "old", TopicID: [16]byte{3}, Partitions: []int32{1, 2}}}
	req.Rack = "rack-a"
	return [][]byte{whole, req.AppendTo(nil)}
}

// checkFetchScan compares FetchScan with kmsg on a Fetch request body:
// what kmsg reads the scanner reads, with the same partitions and fetch
// offsets. The scanner stops at the end of the topics, so it may read a
// body whose later fields kmsg refuses.
func checkFetchScan(t *testing.T, body []byte, version int16) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	kerr := req.ReadFrom(body)

	var s FetchScan
	var got []Fetching
	s.Reset(body, version)
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		got = append(got, p)
	}
	if kerr != nil {
		return
	}
	if s.Err() != nil {
		t.Fatalf("Fetch v%d request: FetchScan says %v where kmsg reads it (body %x)", version, s.Err(), body)
	}
	if version >= 7 && s.Session() != req.SessionID {
		t.Fatalf("Fetch v%d request: scanner reads session %d, kmsg %d", version, s.Session(), req.SessionID)
	}
	replica := req.ReplicaID
	if version >= 15 {
		replica = req.ReplicaState.ID
	}
	if id, ok := s.Replica(); ok && id != replica {
		t.Fatalf("Fetch v%d request: scanner reads replica %d, kmsg %d (body %x)", version, id, replica, body)
	} else if !ok && version < 15 {
		t.Fatalf("Fetch v%d request: scanner cannot tell the replica kmsg reads (body %x)", version, body)
	}
	var want []Fetching
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			w := Fetching{TopicID: tp.TopicID, Partition: p.Partition, FetchOffset: p.FetchOffset}
			if version < topicIDFrom {
				w.Topic, w.TopicID = []byte(tp.Topic), [16]byte{}
			}
			want = append(want, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("Fetch v%d request: scanner found %d partitions, kmsg %d", version, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Topic, w.Topic) || g.TopicID != w.TopicID || g.Partition != w.Partition || g.FetchOffset != w.FetchOffset {
			t.Fatalf("Fetch v%d request: partition %d: scanner %+v, kmsg %+v", version, i, g, w)
		}
	}
}

// checkFetchedScan compares FetchedScan with kmsg on a Fetch response
// body: the same verdict and, when both read it, the same partitions with
// their errors, high watermarks and records.
func checkFetchedScan(t *testing.T, body []byte, version int16) {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	kerr := resp.ReadFrom(body)

	var s FetchedScan
	var got []Fetched
	s.Reset(body, version)
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		got = append(got, p)
	}
	if !sameVerdict(t, fmt.Sprintf("Fetch v%d response: FetchedScan", version), kerr, s.Err(), body) {
		return
	}
	var want []Fetched
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			w := Fetched{TopicID: tp.TopicID, Partition: p.Partition, ErrorCode: p.ErrorCode, HighWatermark: p.HighWatermark, Records: p.RecordBatches}
			if version < topicIDFrom {
				w.Topic, w.TopicID = []byte(tp.Topic), [16]byte{}
			}
			want = append(want, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("Fetch v%d response: scanner found %d partitions, kmsg %d", version, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Topic, w.Topic) || g.TopicID != w.TopicID || g.Partition != w.Partition || g.ErrorCode != w.ErrorCode ||
			g.HighWatermark != w.HighWatermark || !bytes.Equal(g.Records, w.Records) || (g.Records == nil) != (w.Records == nil) {
			t.Fatalf("Fetch v%d response: partition %d: scanner %+v, kmsg %+v", version, i, g, w)
		}
	}
}

func TestFetchScanMatchesKmsg(t *testing.T) {
	for v := range kmsg.NewPtrFetchRequest().MaxVersion() + 1 {
		for _, body := range fetchRequests(v) {
			for cut := range len(body) + 1 {
				checkFetchScan(t, body[:cut], v)
			}
		}
		var s FetchScan
		s.Reset(fetchRequests(v)[1], v)
		n := 0
		for _, ok := s.Next(); ok; _, ok = s.Next() {
			n++
		}
		if s.Err() != nil || n != 3 {
			t.Fatalf("Fetch v%d request: found %d partitions, err %v", v, n, s.Err())
		}
		if id, ok := s.Replica(); !ok || id != -1 {
			t.Fatalf("Fetch v%d request: a consumer's fetch read as replica %d (%v), want -1", v, id, ok)
		}
	}
}

// TestFetchScanReplica: a follower's fetch is told from a consumer's at
// every version, its id read where the body carries it, the tagged
// field that carries it from v15 reported as unread, and the cluster id's
// tag passed over.
func TestFetchScanReplica(t *testing.T) {
	for v := range kmsg.NewPtrFetchRequest().MaxVersion() + 1 {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = 2, 2, 5
		cluster := "cluster-a"
		req.ClusterID = &cluster
		req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "old", TopicID: [16]byte{3}, Partitions: []int32{1, 2}}}
		body := req.AppendTo(nil)
		checkFetchScan(t, body, v)
		var s FetchScan
		s.Reset(body, v)
		for _, ok := s.Next(); ok; _, ok = s.Next() {
		}
		id, ok := s.Replica()
		if v < 15 && (!ok || id != 2) || v >= 15 && ok {
			t.Fatalf("Fetch v%d request of replica 2: scanner says %d, %v", v, id, ok)
		}
	}
}

func TestFetchedScanMatchesKmsg(t *testing.T) {
	for v := range kmsg.NewPtrFetchResponse().MaxVersion() + 1 {
		for _, body := range fetchResponses(v) {
			for cut := range len(body) + 1 {
				checkFetchedScan(t, body[:cut], v)
			}
			checkFetchedScan(t, append(bytes.Clone(body), 0), v)
		}
	}
}

func TestFetchScansAllocateNothing(t *testing.T) {
	req, resp := fetchRequests(13)[1], fetchResponses(13)[1]
	var s FetchScan
	var d FetchedScan
	n := testing.AllocsPerRun(100, func() {
		s.Reset(req, 13)
		d.Reset(resp, 13)
		found := 0
		for _, ok := s.Next(); ok; _, ok = s.Next() {
			found++
		}
		for _, ok := d.Next(); ok; _, ok = d.Next() {
			found++
		}
		if s.Err() != nil || d.Err() != nil || found != 9 {
			t.Fatalf("found %d partitions, errs %v %v", found, s.Err(), d.Err())
		}
	})
	if n != 0 {
		t.Fatalf("scanning a Fetch request and response allocates %v times", n)
	}
}

// FuzzScanFetchRequest: for every Fetch request body kmsg reads,
// FetchScan finds the same partitions and fetch offsets.
func FuzzScanFetchRequest(f *testing.F) {
	for _, v := range []int16{4, 11, 13, 17} {
		for _, body := range fetchRequests(v) {
			f.Add(body, v)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, version int16) {
		checkFetchScan(t, body, versionIn(version, kmsg.NewPtrFetchRequest().MaxVersion()))
	})
}

// FuzzScanFetched: for every Fetch response body, FetchedScan accepts
// exactly what kmsg accepts and finds the same partitions and records.
func FuzzScanFetched(f *testing.F) {
	for _, v := range []int16{4, 11, 13, 16} {
		for _, body := range fetchResponses(v) {
			f.Add(body, v)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, version int16) {
		checkFetchedScan(t, body, versionIn(version, kmsg.NewPtrFetchResponse().MaxVersion()))
	})
}
