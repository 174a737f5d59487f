package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The streaming walk of a Fetch response is checked against kmsg as the
// scanner is: on real bodies of every version, on every truncation of
// them, through windows of random sizes, and by FuzzScanFetchStream.

// fetchStreamScan runs a FetchStream over body as the proxy does: windows
// whose sizes chunk gives, grown by chunk while Next needs more, passed
// fields skipped unseen; then the tail scanned whole.
func fetchStreamScan(body []byte, version int16, header bool, chunk func() int) (Endpoints, []byte, error) {
	var s FetchStream
	s.Start(version, int64(len(body)), header)
	pos, win := 0, chunk()
	for {
		win = min(win, len(body)-pos)
		step, err := s.Next(body[pos : pos+win])
		switch {
		case errors.Is(err, ErrNeedMore):
			if pos+win >= len(body) {
				return Endpoints{}, nil, fmt.Errorf("need more past the body's end")
			}
			win += chunk()
			continue
		case err != nil:
			return Endpoints{}, nil, err
		case step.Used == 0 && step.Pass == 0 && !step.End:
			return Endpoints{}, nil, fmt.Errorf("a step that moves nothing at %d", pos)
		case step.Used > win:
			return Endpoints{}, nil, fmt.Errorf("used %d of a window of %d", step.Used, win)
		}
		pos += step.Used
		if step.End {
			tail := body[pos:]
			if s.Left() != int64(len(tail)) {
				return Endpoints{}, nil, fmt.Errorf("left %d at the end, the tail is %d", s.Left(), len(tail))
			}
			e, err := ScanFetchTail(version, tail)
			return e, tail, err
		}
		pos += int(step.Pass)
		if pos > len(body) {
			return Endpoints{}, nil, fmt.Errorf("passed beyond the body's end")
		}
		if s.Left() != int64(len(body)-pos) {
			return Endpoints{}, nil, fmt.Errorf("left %d at %d of %d", s.Left(), pos, len(body))
		}
		win = chunk()
	}
}

// kmsgFetchEndpoints lists the endpoints kmsg decodes, as the scanners
// report them.
func kmsgFetchEndpoints(resp *kmsg.FetchResponse) []Endpoint {
	var want []Endpoint
	for _, b := range resp.Brokers {
		w := Endpoint{NodeID: b.NodeID, Host: []byte(b.Host), Port: b.Port}
		if b.Rack != nil {
			w.Rack, w.HasRack = []byte(*b.Rack), true
		}
		want = append(want, w)
	}
	return want
}

// checkFetchStream checks the streaming walk against kmsg: it accepts
// exactly what kmsg accepts and finds the same endpoints, whatever the
// windows.
func checkFetchStream(t *testing.T, body []byte, version int16, seed uint64) {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	kerr := resp.ReadFrom(body)
	rng := rand.New(rand.NewPCG(seed, 11))
	for _, chunk := range []func() int{
		func() int { return 1 + rng.IntN(9) },
		func() int { return 1 + rng.IntN(200) },
		func() int { return len(body) + 1 },
	} {
		e, tail, err := fetchStreamScan(body, version, false, chunk)
		if !sameVerdict(t, fmt.Sprintf("Fetch v%d: stream", version), kerr, err, body) {
			continue
		}
		sameEndpoints(t, fmt.Sprintf("Fetch v%d stream", version), e, tail, kmsgFetchEndpoints(resp))
	}
}

func sameEndpoints(t *testing.T, who string, e Endpoints, body []byte, want []Endpoint) {
	t.Helper()
	if e.Count != len(want) {
		t.Fatalf("%s: found %d endpoints, kmsg %d", who, e.Count, len(want))
	}
	it := e.Iter(body)
	for i := range want {
		got, ok := it.Next()
		if !ok || got.NodeID != want[i].NodeID || !bytes.Equal(got.Host, want[i].Host) || got.Port != want[i].Port ||
			got.HasRack != want[i].HasRack || !bytes.Equal(got.Rack, want[i].Rack) {
			t.Fatalf("%s: endpoint %d: %+v (%v), kmsg %+v", who, i, got, ok, want[i])
		}
	}
}

// bigFetchResponses are Fetch responses at version whose fields outgrow
// small windows: record sets of a few KiB, a long topic name, many aborted
// transactions, a large unknown tag everywhere a tag may be.
func bigFetchResponses(version int16) [][]byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	for ti := range 3 {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(bytes.Repeat([]byte{'a' + byte(ti)}, 200))
		t.TopicID = [16]byte{byte(ti), 1}
		for p := range int32(4) {
			pt := kmsg.NewFetchResponseTopicPartition()
			pt.Partition = p
			pt.RecordBatches = bytes.Repeat([]byte{byte(p)}, int(p)*3000)
			for a := range int(p) * 20 {
				pt.AbortedTransactions = append(pt.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: int64(a), FirstOffset: int64(a)})
			}
			if p == 3 {
				pt.UnknownTags.Set(7, bytes.Repeat([]byte{9}, 700))
				pt.CurrentLeader = kmsg.FetchResponseTopicPartitionCurrentLeader{LeaderID: 3, LeaderEpoch: 1}
				pt.AbortedTransactions[0].UnknownTags.Set(2, bytes.Repeat([]byte{8}, 300))
			}
			t.Partitions = append(t.Partitions, pt)
		}
		t.UnknownTags.Set(5, bytes.Repeat([]byte{6}, 400))
		resp.Topics = append(resp.Topics, t)
	}
	resp.Brokers = brokers(func(id int32, host string, port int32, rack *string) kmsg.FetchResponseBroker {
		return kmsg.FetchResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
	})
	resp.UnknownTags.Set(3, bytes.Repeat([]byte{1}, 500))
	return [][]byte{resp.AppendTo(nil)}
}

func TestFetchStream(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for i, body := range append(fetchResponses(v), bigFetchResponses(v)...) {
			for seed := range uint64(10) {
				checkFetchStream(t, body, v, seed)
			}
			// Every truncation is refused, or read as kmsg reads it;
			// of the large bodies, one cut in 53 and those near
			// their end.
			for n := range len(body) {
				if len(body) < 2000 || n%53 == 0 || n > len(body)-600 {
					checkFetchStream(t, body[:n], v, uint64(i))
				}
			}
		}
	}
}

// TestFetchStreamHeader: from the bytes after a frame's correlation id,
// the walk skips the response header's tag section first.
func TestFetchStreamHeader(t *testing.T) {
	for _, v := range []int16{11, 12, 16} {
		body := fetchResponses(v)[1]
		head := []byte{}
		if Flexible(fetchKey, v) {
			head = []byte{1, 4, 2, 'h', 'i'} // one unknown header tag
		}
		rng := rand.New(rand.NewPCG(1, 2))
		e, tail, err := fetchStreamScan(append(head, body...), v, true, func() int { return 1 + rng.IntN(7) })
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		sameEndpoints(t, fmt.Sprintf("v%d with header", v), e, tail, kmsgFetchEndpoints(resp))
	}
}

// TestFetchStreamPassesRecords: records that do not lie in the window are
// passed to the caller whole, one step each; those that do are scanned
// past.
func TestFetchStreamPassesRecords(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	t0 := kmsg.NewFetchResponseTopic()
	for p, n := range []int{100, 50000, 0, 70000} {
		pt := kmsg.NewFetchResponseTopicPartition()
		pt.Partition = int32(p)
		pt.RecordBatches = make([]byte, n)
		t0.Partitions = append(t0.Partitions, pt)
	}
	resp.Topics = []kmsg.FetchResponseTopic{t0}
	body := resp.AppendTo(nil)
	var s FetchStream
	s.Start(16, int64(len(body)), false)
	var passed []int64
	for pos := 0; ; {
		step, err := s.Next(body[pos:min(len(body), pos+1000)])
		if err != nil {
			t.Fatal(err)
		}
		if step.End {
			break
		}
		passed = append(passed, step.Pass)
		pos += step.Used + int(step.Pass)
	}
	if fmt.Sprint(passed) != "[50000 70000]" {
		t.Fatalf("passed %v, want the two large record sets", passed)
	}
}

func TestFetchStreamAllocatesNothing(t *testing.T) {
	body := bigFetchResponses(16)[0]
	var s FetchStream
	n := testing.AllocsPerRun(50, func() {
		s.Start(16, int64(len(body)), false)
		for pos := 0; ; {
			step, err := s.Next(body[pos:min(len(body), pos+512)])
			if err != nil {
				t.Fatal(err)
			}
			pos += step.Used
			if step.End {
				if e, err := ScanFetchTail(16, body[pos:]); err != nil || e.Count != 2 {
					t.Fatalf("tail: %+v %v", e, err)
				}
				return
			}
			pos += int(step.Pass)
		}
	})
	if n != 0 {
		t.Fatalf("the walk allocates %v times", n)
	}
}

// FuzzScanFetchStream: for every Fetch response body, the streaming walk
// accepts exactly what kmsg accepts and finds the same endpoints, whatever
// the windows.
func FuzzScanFetchStream(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, int16(16), uint64(1))
	f.Fuzz(func(t *testing.T, body []byte, version int16, seed uint64) {
		checkFetchStream(t, body, versionIn(version, kmsg.NewPtrFetchResponse().MaxVersion()), seed)
	})
}

// TestFetchStreamReports: a reporting walk, through windows of random
// sizes, stops at every topic and partition and finds what FetchedScan
// finds reading the body whole: each partition's topic, index, error and
// records, and the response's error; the bytes it passes are the records.
func TestFetchStreamReports(t *testing.T) {
	reported := 0
	defer func() {
		if reported == 0 && !t.Failed() {
			t.Fatal("no partition reported")
		}
	}()
	for v := int16(0); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for i, body := range append(fetchResponses(v), bigFetchResponses(v)...) {
			var whole FetchedScan
			whole.Reset(body, v)
			var want []string
			for p, ok := whole.Next(); ok; p, ok = whole.Next() {
				want = append(want, fmt.Sprintf("%s/%x/%d/%d/%x", p.Topic, p.TopicID, p.Partition, p.ErrorCode, p.Records))
			}
			if whole.Err() != nil {
				t.Fatalf("v%d body %d: %v", v, i, whole.Err())
			}
			for seed := range uint64(5) {
				rng := rand.New(rand.NewPCG(seed, 3))
				var s FetchStream
				s.Start(v, int64(len(body)), false)
				s.Report()
				var got []string
				var topic []byte
				var id [16]byte
				for pos, win := 0, 1+rng.IntN(40); ; {
					step, err := s.Next(body[pos:min(len(body), pos+win)])
					if errors.Is(err, ErrNeedMore) {
						win += 1 + rng.IntN(40)
						continue
					}
					if err != nil {
						t.Fatalf("v%d body %d: %v", v, i, err)
					}
					switch step.Found {
					case FoundTopic:
						topic, id = bytes.Clone(step.Topic), step.TopicID
					case FoundPartition:
						rec := body[pos+step.Used : pos+step.Used+int(step.Pass)]
						got = append(got, fmt.Sprintf("%s/%x/%d/%d/%x", topic, id, step.Partition, step.ErrorCode, rec))
					}
					pos += step.Used
					if step.End {
						break
					}
					pos += int(step.Pass)
					win = 1 + rng.IntN(40)
				}
				reported += len(got)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("v%d body %d seed %d: the walk reports\n%.300v\nthe scan finds\n%.300v", v, i, seed, got, want)
				}
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = v
				if err := resp.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				if s.ErrorCode() != resp.ErrorCode {
					t.Fatalf("v%d: the response's error read as %d, kmsg %d", v, s.ErrorCode(), resp.ErrorCode)
				}
			}
		}
	}
}
