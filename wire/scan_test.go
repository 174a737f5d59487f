package wire

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The scanner is checked against kmsg, the reference: on real frames of
// every version kmsg knows, on every truncation of them, and by the fuzz
// targets below on whatever the fuzzer makes of them.

var updateScanCorpus = flag.Bool("update-scan-corpus", false, "rewrite testdata/fuzz seeds of the scanner's fuzz targets from kmsg")

func strp(s string) *string { return &s }

// produceRequests returns Produce request bodies at version, in shapes that
// exercise every field the scanner skips.
func produceRequests(version int16) [][]byte {
	var out [][]byte
	empty := kmsg.NewPtrProduceRequest()
	empty.Version = version
	out = append(out, empty.AppendTo(nil))

	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.TransactionID = strp("txn-1")
	req.Acks = -1
	for ti, name := range []string{"orders", "payments-eu"} {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		t.TopicID = [16]byte{byte(ti + 1), 2, 3}
		for p := range int32(3) {
			pt := kmsg.NewProduceRequestTopicPartition()
			pt.Partition = p*7 + int32(ti)
			if p != 1 {
				pt.Records = bytes.Repeat([]byte{byte(p)}, 4+int(p)*20)
			}
			if p == 2 {
				pt.UnknownTags.Set(9, []byte("partition-tag"))
			}
			t.Partitions = append(t.Partitions, pt)
		}
		t.UnknownTags.Set(3, []byte{1, 2})
		req.Topics = append(req.Topics, t)
	}
	req.UnknownTags.Set(1, []byte("top"))
	out = append(out, req.AppendTo(nil))

	acks0 := kmsg.NewPtrProduceRequest()
	acks0.Version = version
	acks0.Acks = 0
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	t.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 30)}}
	acks0.Topics = []kmsg.ProduceRequestTopic{t}
	out = append(out, acks0.AppendTo(nil))
	return out
}

func brokers[B any](mk func(id int32, host string, port int32, rack *string) B) []B {
	return []B{mk(1, "broker-1.internal", 9092, strp("rack-a")), mk(2, "b2", 19092, nil)}
}

// produceResponses returns Produce response bodies at version, with and
// without endpoints.
func produceResponses(version int16) [][]byte {
	var out [][]byte
	for _, withBrokers := range []bool{false, true} {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		resp.ThrottleMillis = 5
		for ti, name := range []string{"orders", "x"} {
			t := kmsg.NewProduceResponseTopic()
			t.Topic = name
			t.TopicID = [16]byte{byte(ti + 9)}
			for p := range int32(2) {
				pt := kmsg.NewProduceResponseTopicPartition()
				pt.Partition = p
				pt.BaseOffset = 1000 + int64(p)
				if p == 1 {
					pt.ErrorCode = 6
					pt.ErrorMessage = strp("not leader")
					pt.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 3, ErrorMessage: strp("bad")}, {RelativeOffset: 4}}
					pt.CurrentLeader = kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 2, LeaderEpoch: 7}
					pt.UnknownTags.Set(5, []byte{9})
				}
				t.Partitions = append(t.Partitions, pt)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if withBrokers {
			resp.Brokers = brokers(func(id int32, host string, port int32, rack *string) kmsg.ProduceResponseBroker {
				return kmsg.ProduceResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
			})
			resp.UnknownTags.Set(4, []byte("after"))
		}
		out = append(out, resp.AppendTo(nil))
	}
	return out
}

// fetchResponses returns Fetch response bodies at version, with and without
// endpoints.
func fetchResponses(version int16) [][]byte {
	var out [][]byte
	for _, withBrokers := range []bool{false, true} {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		resp.SessionID = 77
		for ti, name := range []string{"orders", "payments"} {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = name
			t.TopicID = [16]byte{byte(ti + 1), 8}
			for p := range int32(3) {
				pt := kmsg.NewFetchResponseTopicPartition()
				pt.Partition = p
				pt.HighWatermark = 500
				pt.RecordBatches = bytes.Repeat([]byte{0xab}, 10*int(p))
				switch p {
				case 1:
					pt.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 4, FirstOffset: 10}}
					pt.DivergingEpoch = kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: 3, EndOffset: 99}
					pt.CurrentLeader = kmsg.FetchResponseTopicPartitionCurrentLeader{LeaderID: 1, LeaderEpoch: 4}
				case 2:
					pt.SnapshotID = kmsg.FetchResponseTopicPartitionSnapshotID{EndOffset: 5, Epoch: 1}
					pt.UnknownTags.Set(11, []byte("x"))
				}
				t.Partitions = append(t.Partitions, pt)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if withBrokers {
			resp.Brokers = brokers(func(id int32, host string, port int32, rack *string) kmsg.FetchResponseBroker {
				return kmsg.FetchResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
			})
		}
		out = append(out, resp.AppendTo(nil))
	}
	return out
}

// checkProduceScan compares the scanner with kmsg on a Produce request body.
func checkProduceScan(t *testing.T, body []byte, version int16) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	kerr := req.UnsafeReadFrom(body)

	var s ProduceScan
	var got []Partition
	err := s.Reset(body, version)
	if err == nil {
		for p, ok := s.Next(); ok; p, ok = s.Next() {
			got = append(got, p)
		}
		err = s.Err()
	}
	if !sameVerdict(t, fmt.Sprintf("Produce v%d: scanner", version), kerr, err, body) {
		return
	}
	if s.Acks != req.Acks || int16(body[s.AcksAt])<<8|int16(body[s.AcksAt+1]) != req.Acks {
		t.Fatalf("Produce v%d: acks %d at %d, kmsg %d", version, s.Acks, s.AcksAt, req.Acks)
	}
	samePartitions(t, "scanner", version, got, kmsgPartitions(req))
}

// sameVerdict fails t unless who, a scanner, accepted body exactly when
// kmsg did (kerr) and refused it, if it did, with ErrCannotScan; it
// reports whether both accepted it.
func sameVerdict(t *testing.T, who string, kerr, err error, body []byte) bool {
	t.Helper()
	if (kerr == nil) != (err == nil) {
		t.Fatalf("%s says %v, kmsg %v (body %x)", who, err, kerr, body)
	}
	if err != nil && !errors.Is(err, ErrCannotScan) {
		t.Fatalf("%s error %v is not ErrCannotScan", who, err)
	}
	return err == nil
}

// kmsgPartitions lists the partitions of a Produce request kmsg decoded, as
// the scanners report them.
func kmsgPartitions(req *kmsg.ProduceRequest) []Partition {
	var want []Partition
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			w := Partition{TopicID: tp.TopicID, Partition: p.Partition}
			if req.Version < topicIDFrom {
				w.Topic, w.TopicID = []byte(tp.Topic), [16]byte{}
			}
			want = append(want, w)
		}
	}
	return want
}

func samePartitions(t *testing.T, who string, version int16, got, want []Partition) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Produce v%d: %s found %d partitions, kmsg %d", version, who, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Topic, want[i].Topic) || got[i].TopicID != want[i].TopicID || got[i].Partition != want[i].Partition {
			t.Fatalf("Produce v%d: partition %d: %s %+v, kmsg %+v", version, i, who, got[i], want[i])
		}
	}
}

// checkEndpointScan compares the scanner with kmsg on a Produce or Fetch
// response body; it returns how many endpoints both found.
func checkEndpointScan(t *testing.T, key, version int16, body []byte) int {
	t.Helper()
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	kerr := resp.ReadFrom(body)
	e, err := ScanEndpoints(key, version, body)
	if !sameVerdict(t, fmt.Sprintf("%s v%d response: scanner", kmsg.NameForKey(key), version), kerr, err, body) {
		return 0
	}
	var want []Endpoint
	add := func(id int32, host string, port int32, rack *string) {
		w := Endpoint{NodeID: id, Host: []byte(host), Port: port}
		if rack != nil {
			w.Rack, w.HasRack = []byte(*rack), true
		}
		want = append(want, w)
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, b.Rack)
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			add(b.NodeID, b.Host, b.Port, b.Rack)
		}
	}
	if e.Count != len(want) {
		t.Fatalf("%s v%d response: scanner found %d endpoints, kmsg %d", kmsg.NameForKey(key), version, e.Count, len(want))
	}
	it := e.Iter(body)
	for i := range want {
		got, ok := it.Next()
		if !ok || got.NodeID != want[i].NodeID || !bytes.Equal(got.Host, want[i].Host) || got.Port != want[i].Port ||
			got.HasRack != want[i].HasRack || !bytes.Equal(got.Rack, want[i].Rack) {
			t.Fatalf("%s v%d response: endpoint %d: scanner %+v (%v), kmsg %+v", kmsg.NameForKey(key), version, i, got, ok, want[i])
		}
	}
	if _, ok := it.Next(); ok {
		t.Fatalf("%s v%d response: scanner iterates past %d endpoints", kmsg.NameForKey(key), version, len(want))
	}
	return e.Count
}

func TestScanProduceRequestMatchesKmsg(t *testing.T) {
	for v := range kmsg.NewPtrProduceRequest().MaxVersion() + 1 {
		for _, body := range produceRequests(v) {
			for cut := range len(body) + 1 {
				checkProduceScan(t, body[:cut], v)
			}
		}
	}
}

func TestScanEndpointsMatchesKmsg(t *testing.T) {
	for _, c := range []struct {
		key    int16
		max    int16
		bodies func(int16) [][]byte
	}{
		{produceKey, kmsg.NewPtrProduceResponse().MaxVersion(), produceResponses},
		{fetchKey, kmsg.NewPtrFetchResponse().MaxVersion(), fetchResponses},
	} {
		for v := range c.max + 1 {
			found := 0
			for _, body := range c.bodies(v) {
				for cut := range len(body) + 1 {
					checkEndpointScan(t, c.key, v, body[:cut])
				}
				found += checkEndpointScan(t, c.key, v, body)
			}
			if Flexible(c.key, v) != (found > 0) {
				t.Fatalf("%s v%d: found %d endpoints in the whole bodies", kmsg.NameForKey(c.key), v, found)
			}
		}
	}
}

func TestScanEndpointsRepeatedTagKeepsLast(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	body := resp.AppendTo(nil)
	// Replace the empty top-level tag section with two tag-0 values: one
	// endpoint, then none. kmsg keeps the last, and so must the scanner.
	body = body[:len(body)-1]
	one := []byte{0, 16, 2, 0, 0, 0, 1, 5, 'h', 'o', 's', 't', 0, 0, 0x23, 0x84, 0, 0}
	if n := checkEndpointScan(t, fetchKey, 16, append(append(bytes.Clone(body), 1), one...)); n != 1 {
		t.Fatalf("found %d endpoints in a list of one", n)
	}
	body = append(append(append(body, 2), one...), 0, 1, 1)
	if n := checkEndpointScan(t, fetchKey, 16, body); n != 0 {
		t.Fatalf("found %d endpoints, want the last (empty) list", n)
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	prod := produceRequests(13)[1]
	fetch := fetchResponses(16)[1]
	var s ProduceScan
	n := testing.AllocsPerRun(100, func() {
		if s.Reset(prod, 13) != nil {
			t.Fatal("reset")
		}
		for _, ok := s.Next(); ok; _, ok = s.Next() {
		}
		e, err := ScanEndpoints(fetchKey, 16, fetch)
		if err != nil || e.Count != 2 {
			t.Fatalf("endpoints %+v %v", e, err)
		}
		it := e.Iter(fetch)
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
	})
	if n != 0 {
		t.Fatalf("scanning allocates %v times", n)
	}
}

// versionIn maps any fuzzed version onto [0, max].
func versionIn(v, max int16) int16 {
	v %= max + 1
	if v < 0 {
		v = -v
	}
	return v
}

// FuzzScanProduceRequest: for every body, the scanner accepts exactly what
// kmsg accepts and finds the same partitions.
func FuzzScanProduceRequest(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int16(2))
	f.Fuzz(func(t *testing.T, body []byte, version int16) {
		checkProduceScan(t, body, versionIn(version, kmsg.NewPtrProduceRequest().MaxVersion()))
	})
}

// FuzzScanEndpoints: for every Produce or Fetch response body, the scanner
// accepts exactly what kmsg accepts and finds the same endpoints; a Fetch
// response's tag section that names endpoints, padded, keeps its tags in
// increasing order.
func FuzzScanEndpoints(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, false, int16(16))
	// Endpoints and an unknown tag above the two-byte filler.
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "b1", Port: 9092}}
	resp.UnknownTags.Set(20000, []byte("newer"))
	f.Add(resp.AppendTo(nil), true, int16(16))
	f.Fuzz(func(t *testing.T, body []byte, fetch bool, version int16) {
		key, max := int16(produceKey), kmsg.NewPtrProduceResponse().MaxVersion()
		if fetch {
			key, max = fetchKey, kmsg.NewPtrFetchResponse().MaxVersion()
		}
		version = versionIn(version, max)
		if checkEndpointScan(t, key, version, body) > 0 && fetch {
			checkPadded(t, version, body)
		}
	})
}

// checkPadded pads the tag section of a Fetch response body that kmsg
// reads and that names endpoints, as the proxy pads a rewritten one, to a
// few lengths: each padded section holds its tags in increasing order and
// reads with kmsg as the same endpoints and unknown tags, plus a filler.
func checkPadded(t *testing.T, version int16, body []byte) {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	full := resp.AppendTo(nil)
	bare := withTags(t, resp, []byte{0})
	section := full[len(bare)-1:]
	for _, room := range []int{3, 4, 5, 6, 130, 16386, 16387} {
		out, ok := PadTags(section, len(section)+room)
		if !ok {
			continue
		}
		if tags := tagNumbers(t, out); !increasing(tags) {
			t.Fatalf("Fetch v%d: padded by %d bytes, tags %v", version, room, tags)
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = version
		if err := got.ReadFrom(withTags(t, resp, out)); err != nil {
			t.Fatalf("Fetch v%d: padded by %d bytes: kmsg: %v", version, room, err)
		}
		if !reflect.DeepEqual(got.Brokers, resp.Brokers) || got.UnknownTags.Len() != resp.UnknownTags.Len()+1 {
			t.Fatalf("Fetch v%d: padded by %d bytes: %d brokers, %d unknown tags; was %d, %d",
				version, room, len(got.Brokers), got.UnknownTags.Len(), len(resp.Brokers), resp.UnknownTags.Len())
		}
	}
}

// TestWriteScanCorpus writes the kmsg-made frames of every version as seeds
// of the fuzz targets (go test ./wire -run TestWriteScanCorpus
// -update-scan-corpus).
func TestWriteScanCorpus(t *testing.T) {
	if !*updateScanCorpus {
		t.Skip("rewrites testdata only with -update-scan-corpus")
	}
	write := func(target, name string, vals ...string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		text := "go test fuzz v1\n"
		for _, v := range vals {
			text += v + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for v := range kmsg.NewPtrProduceRequest().MaxVersion() + 1 {
		for i, body := range produceRequests(v) {
			write("FuzzScanProduceRequest", fmt.Sprintf("kmsg-v%02d-%d", v, i), fmt.Sprintf("[]byte(%q)", body), fmt.Sprintf("int16(%d)", v))
		}
		for i, body := range append(produceRequests(v), onePartitionProduce(v, -1, 64)) {
			write("FuzzScanProduceStream", fmt.Sprintf("kmsg-v%02d-%d", v, i), fmt.Sprintf("[]byte(%q)", body), fmt.Sprintf("int16(%d)", v), "uint16(40)", fmt.Sprintf("uint64(%d)", i))
		}
	}
	for _, c := range []struct {
		name string
		key  int16
		txn  bool
	}{{"offsetcommit", offsetCommitKey, false}, {"txnoffsetcommit", txnOffsetCommitKey, true}} {
		for v := range commitMax(c.key) + 1 {
			for i, body := range commitRequests(c.key, v) {
				write("FuzzScanCommitRequest", fmt.Sprintf("%s-v%02d-%d", c.name, v, i), fmt.Sprintf("[]byte(%q)", body), fmt.Sprintf("bool(%v)", c.txn), fmt.Sprintf("int16(%d)", v))
			}
		}
	}
	for v := range kmsg.NewPtrProduceResponse().MaxVersion() + 1 {
		for i, body := range produceResponses(v) {
			write("FuzzScanEndpoints", fmt.Sprintf("produce-v%02d-%d", v, i), fmt.Sprintf("[]byte(%q)", body), "bool(false)", fmt.Sprintf("int16(%d)", v))
		}
	}
	for v := range kmsg.NewPtrFetchResponse().MaxVersion() + 1 {
		for i, body := range fetchResponses(v) {
			write("FuzzScanEndpoints", fmt.Sprintf("fetch-v%02d-%d", v, i), fmt.Sprintf("[]byte(%q)", body), "bool(true)", fmt.Sprintf("int16(%d)", v))
			write("FuzzScanFetchStream", fmt.Sprintf("kmsg-v%02d-%d", v, i), fmt.Sprintf("[]byte(%q)", body), fmt.Sprintf("int16(%d)", v), fmt.Sprintf("uint64(%d)", i))
		}
	}
}

// onePartitionProduce returns a Produce request body at version writing
// records to one partition.
func onePartitionProduce(version int16, acks int16, records int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.TransactionID = strp("txn")
	req.Acks = acks
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	t.TopicID = [16]byte{7, 7}
	pt := kmsg.NewProduceRequestTopicPartition()
	pt.Partition = 5
	pt.Records = bytes.Repeat([]byte{0xcd}, records)
	t.Partitions = []kmsg.ProduceRequestTopicPartition{pt}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	return req.AppendTo(nil)
}

// streamScan runs a ProduceStream over body as the proxy does: Start on a
// head of at most headLen bytes, then windows that grow by the sizes chunk
// gives until Next can step, records skipped unseen.
func streamScan(body []byte, version int16, headLen int, chunk func() int) ([]Partition, error) {
	var s ProduceStream
	used, err := s.Start(body[:min(len(body), headLen)], version, len(body))
	if err != nil {
		return nil, err
	}
	var got []Partition
	pos, win := used, 0
	last := false
	for {
		win = min(win, len(body)-pos)
		step, err := s.Next(body[pos : pos+win])
		switch {
		case errors.Is(err, ErrNeedMore):
			if pos+win >= len(body) {
				return nil, fmt.Errorf("need more past the body's end")
			}
			win += chunk()
			continue
		case err != nil:
			return nil, err
		case step.End:
			return got, nil
		case last:
			return nil, fmt.Errorf("a partition after the one Last reported")
		}
		last = s.Last()
		p := step.Partition
		p.Topic = bytes.Clone(p.Topic)
		got = append(got, p)
		pos += step.Used + int(step.Records)
		win = 0
		if pos > len(body) {
			return nil, fmt.Errorf("records past the body's end")
		}
	}
}

// checkProduceStream checks the streaming scanner against kmsg: from a
// head holding the whole body, it accepts exactly what kmsg accepts and
// finds the same partitions, whatever the windows; from a shorter head it
// may refuse at Start, and otherwise agrees.
func checkProduceStream(t *testing.T, body []byte, version int16, headLen int, seed uint64) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	kerr := req.UnsafeReadFrom(body)
	want := kmsgPartitions(req)
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, head := range []int{len(body), headLen} {
		got, err := streamScan(body, version, head, func() int { return 1 + rng.IntN(9) })
		if head < len(body) && err != nil && kerr == nil {
			continue // a short head may refuse a valid body at Start
		}
		if !sameVerdict(t, fmt.Sprintf("Produce v%d head %d: stream", version, head), kerr, err, body) {
			continue
		}
		samePartitions(t, fmt.Sprintf("stream (head %d)", head), version, got, want)
	}
}

func TestProduceStream(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		for i, body := range append(produceRequests(v), onePartitionProduce(v, 1, 3000)) {
			for seed := range uint64(20) {
				checkProduceStream(t, body, v, 8+int(seed)*5, seed)
			}
			// Every truncation is refused, or read as kmsg reads it.
			for n := range len(body) {
				checkProduceStream(t, body[:n], v, len(body), uint64(i))
			}
		}
	}
}

// TestProduceStreamLast: Last is reported at a request's last partition,
// and at no other (streamScan fails a scan that finds one after it).
func TestProduceStreamLast(t *testing.T) {
	for _, parts := range []int{1, 2, 12} {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		for topic := range 2 {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = fmt.Sprintf("t%d", topic)
			for p := range parts {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(p)
				rp.Records = []byte("records")
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		var s ProduceStream
		var lasts []bool
		streamWhole(t, &s, req.AppendTo(nil), 9, func() { lasts = append(lasts, s.Last()) })
		want := make([]bool, 2*parts)
		want[len(want)-1] = true
		if !slices.Equal(lasts, want) {
			t.Fatalf("%d partitions per topic: Last after each partition %v, want %v", parts, lasts, want)
		}
	}
}

func TestProduceStreamAllocatesNothing(t *testing.T) {
	body := produceRequests(9)[1]
	var s ProduceStream
	s.topic = make([]byte, 0, 64)
	n := testing.AllocsPerRun(100, func() { streamWhole(t, &s, body, 9, func() {}) })
	if n != 0 {
		t.Fatalf("streaming allocates %v times", n)
	}
}

// streamWhole runs s over body, shown whole, calling found after each
// partition.
func streamWhole(t *testing.T, s *ProduceStream, body []byte, version int16, found func()) {
	t.Helper()
	pos, err := s.Start(body, version, len(body))
	if err != nil {
		t.Fatal(err)
	}
	for {
		step, err := s.Next(body[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if step.End {
			return
		}
		found()
		pos += step.Used + int(step.Records)
	}
}

// FuzzScanProduceStream: for every body, the streaming scanner accepts
// exactly what kmsg accepts and finds the same partitions, whatever the
// head and the windows.
func FuzzScanProduceStream(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int16(2), uint16(8), uint64(1))
	f.Fuzz(func(t *testing.T, body []byte, version int16, head uint16, seed uint64) {
		checkProduceStream(t, body, versionIn(version, kmsg.NewPtrProduceRequest().MaxVersion()), int(head), seed)
	})
}
