package audit

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inorder-proxy/inorder/internal/budget"
)

// longestAPIName is the longest name APIName gives any key.
func longestAPIName(t testing.TB) int16 {
	t.Helper()
	var key int16
	for k := int16(0); k < 200; k++ {
		if len(APIName(k)) > len(APIName(key)) {
			key = k
		}
	}
	return key
}

// widest returns an event whose every field takes the most room its
// encoding gives it (strings aside, which are s), with resources of parts
// partitions each.
func widest(key int16, s string, resources, parts int) *Event {
	e := &Event{
		Kind: KindSummary, Time: time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -1)),
		Since:    time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Listener: s, Principal: s, ClientAddress: s, ClientID: s, Connection: math.MaxUint64,
		APIKey: key, APIVersion: math.MinInt16, Decision: Allow, ErrorCode: math.MinInt16,
		Mechanism: s, TLSSubject: s, Reason: s, ClaimedPrincipal: s,
		PartitionsOmitted: math.MinInt64, ResourcesOmitted: math.MinInt64,
	}
	for range resources {
		r := Resource{Type: s, Name: s, Operation: s, ErrorCode: math.MinInt16, APIKey: key, Requests: math.MinInt64}
		for range parts {
			r.Partitions = append(r.Partitions, Partition{
				Partition: math.MinInt32, ErrorCode: math.MinInt16, FirstOffset: math.MinInt64,
				LastOffset: math.MinInt64, Committed: math.MinInt64, FetchOffset: math.MinInt64,
				Records: math.MinInt64, Bytes: math.MinInt64,
			})
		}
		e.Resources = append(e.Resources, r)
	}
	return e
}

// TestEventBound: eventBound is at least the length of the encoding,
// for events whose every number is as long as it can be and whose
// strings are empty, plain, or all escapes and replacements.
func TestEventBound(t *testing.T) {
	key := longestAPIName(t)
	src := NewSource(strings.Repeat("\x01", 40))
	src.seq.Store(math.MaxUint64 - 1000)
	for _, s := range []string{"", "x", strings.Repeat("topic.name-", 30), strings.Repeat("\x00", 50),
		strings.Repeat("\xff", 50), strings.Repeat("\u2028", 50), strings.Repeat(`"\`, 50), "é\x01\u2029\"\xc3"} {
		for _, shape := range [][2]int{{0, 0}, {1, 0}, {1, 1}, {3, 4}, {20, 50}} {
			for _, kind := range []Kind{KindRequest, KindAuthentication, KindSummary} {
				e := widest(key, s, shape[0], shape[1])
				e.Kind = kind
				bound := eventBound(src, e)
				if n := len(AppendEvent(nil, src, e)); n > bound {
					t.Errorf("%q, %d resources of %d partitions, %v: encoded in %d bytes, bound %d", s, shape[0], shape[1], kind, n, bound)
				}
			}
		}
	}
}

// FuzzEventBound: the bound holds whatever the strings hold.
func FuzzEventBound(f *testing.F) {
	f.Add("orders", "User:alice", "kgo", 2, 3)
	f.Add("\x00\"\\\u2028\xff", "", "\t", 1, 1)
	key := longestAPIName(f)
	f.Fuzz(func(t *testing.T, name, principal, clientID string, resources, parts int) {
		resources, parts = min(max(resources, 0), 8), min(max(parts, 0), 8)
		src := NewSource(clientID)
		e := widest(key, name, resources, parts)
		e.Principal, e.ClientID = principal, clientID
		if n, bound := len(AppendEvent(nil, src, e)), eventBound(src, e); n > bound {
			t.Fatalf("encoded in %d bytes, bound %d", n, bound)
		}
	})
}

// TestTrailEncodesInTheQueue: the events a trail records are encoded by
// the queue, once for all its sinks, in the order they were recorded and
// as they were when recorded, though the caller reuses its slices at
// once; each is charged its bound until it is encoded and its size after,
// and every byte is given back to the queue and the budget once written.
func TestTrailEncodesInTheQueue(t *testing.T) {
	b := budget.New(64 << 20)
	a, c := &memSink{name: SinkFile}, &memSink{name: SinkStdout}
	q := NewQueue(QueueOptions{Budget: b, Linger: time.Hour, Batch: 1000, Metrics: NewMetrics(prometheus.NewRegistry())}, a, c)
	tr := New(Options{DataPath: DataPathRequest, Source: NewSource("t")}, q)
	conn := tr.Open(ConnInfo{ID: 1, Listener: "node", ClientAddress: "127.0.0.1:1"})
	ctx := context.Background()
	r := &Request{APIKey: 1, APIVersion: 13, ClientID: "kgo"}
	var want []string
	var bounds int64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		// One slice reused for every request, as the proxy does.
		r.Resources = r.Resources[:0]
		for j := range 1 + i%3 {
			res := Resource{Type: "Topic", Name: "t" + strings.Repeat("x", j), Operation: "Read"}
			for k := range i % 4 {
				res.Partitions = append(res.Partitions, Partition{Partition: int32(k), FirstOffset: rng.Int64N(1e9), LastOffset: NoOffset, Committed: NoOffset, FetchOffset: int64(i), Records: int64(k + 1)})
			}
			r.Resources = append(r.Resources, res)
		}
		r.Time = time.Unix(int64(i), 0)
		e := Event{Kind: KindRequest, Time: r.Time, Listener: "node", Principal: "User:ANONYMOUS", ClientAddress: "127.0.0.1:1",
			ClientID: "kgo", Connection: 1, APIKey: 1, APIVersion: 13, Resources: r.Resources}
		want = append(want, string(appendEvent(nil, "t", uint64(i+1), &e)))
		bounds += recordSize(eventBound(tr.src, &e), e.Principal)
		if err := tr.Request(ctx, conn, r); err != nil {
			t.Fatal(err)
		}
		for j := range r.Resources { // the caller's slices, reused
			for k := range r.Resources[j].Partitions {
				r.Resources[j].Partitions[k] = Partition{Partition: -9}
			}
		}
	}
	// Lingering an hour, neither sink has taken a record: each waits
	// unencoded, charged its bound.
	if n, bytes := q.Len(); n != 200 || bytes != bounds || b.Used() != bounds {
		t.Fatalf("queued %d events in %d bytes, budget %d; want 200 in %d", n, bytes, b.Used(), bounds)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*memSink{a, c} {
		got := s.values()
		if len(got) != len(want) {
			t.Fatalf("%s wrote %d events, want %d", s.name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s event %d:\n%s\nwant\n%s", s.name, i, got[i], want[i])
			}
		}
	}
	if n, bytes := q.Len(); n != 0 || bytes != 0 || b.Used() != 0 {
		t.Fatalf("after the close: %d events, %d bytes, budget %d", n, bytes, b.Used())
	}
	if q.lazyEncoded != 200 {
		t.Fatalf("%d encodings of 200 events for two sinks", q.lazyEncoded)
	}
}

// TestQueueEncodedChargeReleased: once encoded, a record is charged its
// size rather than its bound, and the difference is room for an Enqueue
// waiting on a full queue.
func TestQueueEncodedChargeReleased(t *testing.T) {
	sink := &memSink{name: SinkFile, gate: make(chan struct{})}
	src := NewSource("q")
	e := &Event{Kind: KindRequest, Principal: "User:a", APIKey: 0, Resources: []Resource{{Type: "Topic", Name: "orders", Operation: "Write"}}}
	charge := recordSize(eventBound(src, e), "User:a")
	// Lingering an hour, the sink takes records only once an Enqueue
	// waits for room: then both at once.
	q := NewQueue(QueueOptions{MaxBytes: 2 * charge, Linger: time.Hour}, sink)
	ctx := context.Background()
	for range 2 {
		if err := q.Enqueue(ctx, Record{Key: "User:a", lazy: ownEvent(src, e, eventBound(src, e))}); err != nil {
			t.Fatal(err)
		}
	}
	// The third waits for room, which hurries the sink: it takes both,
	// encodes them and waits on its gate, and they are charged their
	// size, which leaves room for the third.
	third := make(chan error, 1)
	go func() { third <- q.Enqueue(ctx, Record{Key: "User:a", lazy: ownEvent(src, e, eventBound(src, e))}) }()
	select {
	case err := <-third:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the encoded records kept their bound's charge")
	}
	close(sink.gate)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.values(); len(got) != 3 || got[0] == got[1] || !strings.HasPrefix(got[2], `{"specversion"`) {
		t.Fatalf("wrote %q", got)
	}
}
