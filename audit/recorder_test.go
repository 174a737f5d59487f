package audit

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type decoded struct {
	Type              string  `json:"type"`
	Time              string  `json:"time"`
	Since             string  `json:"since"`
	Principal         string  `json:"principal"`
	APIKey            string  `json:"api_key"`
	ClientID          string  `json:"client_id"`
	Decision          string  `json:"decision"`
	ErrorCode         int     `json:"error_code"`
	ResourceName      string  `json:"resource_name"`
	Mechanism         string  `json:"mechanism"`
	Reason            string  `json:"reason"`
	TLSSubject        string  `json:"tls_subject"`
	Claimed           *string `json:"claimed_principal"`
	PartitionsOmitted int64   `json:"partitions_omitted"`
	Resources         []struct {
		Type       string `json:"resource_type"`
		Name       string `json:"resource_name"`
		Operation  string `json:"operation"`
		APIKey     string `json:"api_key"`
		Requests   int64  `json:"requests"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			First     *int64 `json:"first_offset"`
			Last      *int64 `json:"last_offset"`
			Committed *int64 `json:"committed_offset"`
			Records   int64  `json:"records"`
			Bytes     int64  `json:"bytes"`
		} `json:"partitions"`
	} `json:"resources"`
}

func decodeAll(t *testing.T, s *memSink) []decoded {
	t.Helper()
	var out []decoded
	for _, v := range s.values() {
		var d decoded
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			t.Fatalf("%v: %s", err, v)
		}
		out = append(out, d)
	}
	return out
}

func newTestTrail(o Options) (*Trail, *memSink, *fakeClock) {
	clock := &fakeClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	o.Now = clock.Now
	sink := &memSink{name: SinkFile}
	return New(o, NewQueue(QueueOptions{}, sink)), sink, clock
}

func produce(topic string, part int32, first, n int64) *Request {
	return &Request{APIKey: int16(kmsg.Produce), APIVersion: 9, ClientID: "app", Resources: []Resource{{
		Type: "Topic", Name: topic, Operation: "Write",
		Partitions: []Partition{{Partition: part, FirstOffset: first, LastOffset: first + n - 1, Committed: NoOffset, FetchOffset: NoOffset, Records: n, Bytes: 100 * n}},
	}}}
}

func TestWants(t *testing.T) {
	for _, tc := range []struct {
		mode DataPath
		key  kmsg.Key
		d    Decision
		want bool
	}{
		{DataPathOff, kmsg.Produce, Allow, false},
		{DataPathOff, kmsg.Produce, Deny, true},
		{DataPathSummary, kmsg.Fetch, Allow, true},
		{DataPathRequest, kmsg.EndTxn, Allow, true},
		{DataPathOff, kmsg.CreateTopics, Allow, true},
		{DataPathOff, kmsg.DescribeACLs, Allow, true},
		{DataPathOff, kmsg.Metadata, Allow, false},
		{DataPathOff, kmsg.Metadata, Deny, true},
	} {
		tr, _, _ := newTestTrail(Options{DataPath: tc.mode})
		if got := tr.Wants(int16(tc.key), tc.d); got != tc.want {
			t.Errorf("%s: Wants(%s, %s) = %v", tc.mode, kmsg.NameForKey(int16(tc.key)), tc.d, got)
		}
		tr.Shutdown(context.Background())
	}
}

// TestSummary checks the per-connection summary: one event per interval,
// records and bytes summed per partition, the lowest first and highest
// last offset, commits' last offset, and denied requests still recorded
// one by one.
func TestSummary(t *testing.T) {
	tr, sink, clock := newTestTrail(Options{Interval: time.Minute})
	ctx := context.Background()
	c := tr.Open(ConnInfo{ID: 3, Listener: "node", ClientAddress: "10.1.1.1:4000"})
	if err := tr.Authentication(ctx, c, &Authentication{Mechanism: "SCRAM-SHA-256", APIKey: 36, APIVersion: 2, Principal: "User:bob"}); err != nil {
		t.Fatal(err)
	}
	tr.Request(ctx, c, produce("orders", 0, 10, 5))
	clock.add(10 * time.Second)
	tr.Request(ctx, c, produce("orders", 0, 15, 5))
	tr.Request(ctx, c, produce("orders", 1, 0, 1))
	tr.Request(ctx, c, &Request{APIKey: int16(kmsg.OffsetCommit), Resources: []Resource{
		{Type: "Group", Name: "g", Operation: "Read"},
		{Type: "Topic", Name: "orders", Operation: "Read", Partitions: []Partition{{Partition: 0, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: 12, FetchOffset: NoOffset}}},
	}})
	tr.Request(ctx, c, &Request{APIKey: int16(kmsg.Produce), Decision: Deny, ErrorCode: 29, Resources: []Resource{{Type: "Topic", Name: "secret", Operation: "Write", Decision: Deny, ErrorCode: 29}}})
	clock.add(50 * time.Second)
	// Due now: the next request records the summary, itself included.
	tr.Request(ctx, c, produce("orders", 0, 20, 1))
	clock.add(5 * time.Second)
	tr.Request(ctx, c, produce("orders", 0, 21, 1))
	tr.Close(ctx, c)
	tr.Shutdown(ctx)

	evs := decodeAll(t, sink)
	if len(evs) != 4 {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	auth, deny, sum, last := evs[0], evs[1], evs[2], evs[3]
	if auth.Type != "io.inorder.audit.authentication" || auth.Principal != "User:bob" || auth.Decision != "allow" || auth.APIKey != "SASLAuthenticate" {
		t.Errorf("authentication: %+v", auth)
	}
	if deny.Type != "io.inorder.audit.request" || deny.Decision != "deny" || deny.ErrorCode != 29 || deny.ResourceName != "secret" || deny.Principal != "User:bob" {
		t.Errorf("denial: %+v", deny)
	}
	if sum.Type != "io.inorder.audit.summary" || sum.Principal != "User:bob" || sum.ClientID != "app" || sum.APIKey != "Produce" ||
		sum.Since != "2026-12-04T12:00:00Z" || sum.Time != "2026-12-04T12:01:00Z" {
		t.Errorf("summary: %+v", sum)
	}
	if len(sum.Resources) != 3 {
		t.Fatalf("summary resources: %+v", sum.Resources)
	}
	w, g, r := sum.Resources[0], sum.Resources[1], sum.Resources[2]
	if w.Name != "orders" || w.Operation != "Write" || w.APIKey != "Produce" || w.Requests != 4 || len(w.Partitions) != 2 {
		t.Fatalf("writes: %+v", w)
	}
	p0, p1 := w.Partitions[0], w.Partitions[1]
	if *p0.First != 10 || *p0.Last != 20 || p0.Records != 11 || p0.Bytes != 1100 || p0.Committed != nil {
		t.Errorf("partition 0: %+v", p0)
	}
	if p1.Partition != 1 || *p1.First != 0 || *p1.Last != 0 || p1.Records != 1 {
		t.Errorf("partition 1: %+v", p1)
	}
	if g.Type != "Group" || g.APIKey != "OffsetCommit" || r.APIKey != "OffsetCommit" || *r.Partitions[0].Committed != 12 || r.Partitions[0].First != nil {
		t.Errorf("commit: %+v %+v", g, r)
	}
	// Close records what the next interval had.
	if last.Type != "io.inorder.audit.summary" || len(last.Resources) != 1 || last.Resources[0].Requests != 1 || *last.Resources[0].Partitions[0].First != 21 {
		t.Errorf("summary at close: %+v", last)
	}
}

// TestSummaryBound checks that a connection touching more partitions than
// the summary tracks counts the rest.
func TestSummaryBound(t *testing.T) {
	tr, sink, _ := newTestTrail(Options{MaxSummaryEntries: 4})
	ctx := context.Background()
	c := tr.Open(ConnInfo{})
	for p := range int32(10) {
		tr.Request(ctx, c, produce("t", p, 0, 1))
	}
	tr.Request(ctx, c, produce("other", 0, 0, 1))
	tr.Close(ctx, c)
	tr.Shutdown(ctx)
	evs := decodeAll(t, sink)
	if len(evs) != 1 {
		t.Fatalf("%+v", evs)
	}
	// One entry for the topic, three for its partitions; 7 partitions and
	// the other topic's one are left out.
	if n := len(evs[0].Resources[0].Partitions); n != 3 || evs[0].PartitionsOmitted != 8 || len(evs[0].Resources) != 1 {
		t.Errorf("partitions %d, omitted %d: %+v", n, evs[0].PartitionsOmitted, evs[0])
	}
	if evs[0].Principal != "User:ANONYMOUS" {
		t.Errorf("principal %q", evs[0].Principal)
	}
}

// TestSummaryQuietConnection checks that the summary of a connection that
// sends nothing more is recorded by the interval's flush, and that
// Shutdown records those still pending.
func TestSummaryQuietConnection(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	sink := &memSink{name: SinkFile}
	tr := New(Options{Interval: 40 * time.Millisecond, Now: clock.Now}, NewQueue(QueueOptions{}, sink))
	ctx := context.Background()
	quiet := tr.Open(ConnInfo{ID: 1})
	tr.Request(ctx, quiet, produce("t", 0, 0, 1))
	clock.add(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.values()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(sink.values()) != 1 {
		t.Fatal("the quiet connection's summary was not recorded")
	}
	open := tr.Open(ConnInfo{ID: 2})
	tr.Request(ctx, open, produce("t", 0, 1, 1))
	tr.Shutdown(ctx)
	if evs := decodeAll(t, sink); len(evs) != 2 || evs[1].Resources[0].Partitions[0].Records != 1 {
		t.Errorf("%+v", evs)
	}
}

func TestDataPathModes(t *testing.T) {
	ctx := context.Background()
	for mode, want := range map[DataPath]int{DataPathOff: 1, DataPathRequest: 3, DataPathSummary: 2} {
		tr, sink, _ := newTestTrail(Options{DataPath: mode})
		c := tr.Open(ConnInfo{})
		tr.Request(ctx, c, produce("t", 0, 0, 1))
		tr.Request(ctx, c, produce("t", 0, 1, 1))
		tr.Request(ctx, c, &Request{APIKey: int16(kmsg.DeleteTopics), Resources: []Resource{{Type: "Topic", Name: "t", Operation: "Delete"}}})
		tr.Close(ctx, c)
		tr.Shutdown(ctx)
		if got := len(sink.values()); got != want {
			t.Errorf("%s: %d events, want %d", mode, got, want)
		}
	}
}

func TestAuthenticationFailure(t *testing.T) {
	tr, sink, _ := newTestTrail(Options{})
	ctx := context.Background()
	c := tr.Open(ConnInfo{TLSSubject: "CN=app,O=Example", Principal: "User:CN=app"})
	tr.Authentication(ctx, c, &Authentication{Mechanism: "PLAIN", APIKey: 36, Principal: "User:mallory", Claimed: "User:mallory", Reason: "invalid credentials", ErrorCode: 58})
	tr.Request(ctx, c, &Request{APIKey: int16(kmsg.CreateTopics), Resources: []Resource{{Type: "Topic", Name: "x", Operation: "Create"}}})
	// A success names whom it proved; a claim is a failure's alone.
	tr.Authentication(ctx, c, &Authentication{Mechanism: "PLAIN", APIKey: 36, Principal: "User:alice", Claimed: "User:alice"})
	tr.Shutdown(ctx)
	evs := decodeAll(t, sink)
	// The failure names the connection's principal, proven by its
	// certificate, and the unverified claim apart.
	if evs[0].Decision != "deny" || evs[0].ErrorCode != 58 || evs[0].Principal != "User:CN=app" || evs[0].Claimed == nil || *evs[0].Claimed != "User:mallory" ||
		evs[0].Reason != "invalid credentials" || evs[0].TLSSubject != "CN=app,O=Example" {
		t.Errorf("failure: %+v", evs[0])
	}
	if evs[2].Decision != "allow" || evs[2].Principal != "User:alice" || evs[2].Claimed != nil {
		t.Errorf("success: %+v", evs[2])
	}
	// A failure does not change who the connection is.
	if evs[1].Principal != "User:CN=app" {
		t.Errorf("after a failure: %+v", evs[1])
	}
}

// TestLargeEventSheds checks that an event above MaxEventBytes is recorded
// within it, its partitions and then resources left out and counted, its
// decision and error code those of the whole request.
func TestLargeEventSheds(t *testing.T) {
	tr, sink, _ := newTestTrail(Options{DataPath: DataPathRequest, MaxEventBytes: 2000})
	ctx := context.Background()
	c := tr.Open(ConnInfo{})
	r := &Request{APIKey: int16(kmsg.DeleteTopics)}
	for i := range 1000 {
		res := Resource{Type: "Topic", Name: "topic-with-a-long-name-" + strconv.Itoa(i), Operation: "Delete",
			Partitions: []Partition{{Partition: 0, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: NoOffset, FetchOffset: NoOffset}, {Partition: 1, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: NoOffset, FetchOffset: NoOffset}}}
		if i == 999 {
			res.Decision, res.ErrorCode = Deny, 29
		}
		r.Resources = append(r.Resources, res)
	}
	if err := tr.Request(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	tr.Shutdown(ctx)
	vals := sink.values()
	if len(vals) != 1 || len(vals[0]) > 2000 {
		t.Fatalf("%d events, first %d bytes", len(vals), len(vals[0]))
	}
	var got struct {
		Decision          string `json:"decision"`
		ErrorCode         int    `json:"error_code"`
		ResourceName      string `json:"resource_name"`
		PartitionsOmitted int64  `json:"partitions_omitted"`
		ResourcesOmitted  int64  `json:"resources_omitted"`
		Resources         []json.RawMessage
	}
	if err := json.Unmarshal([]byte(vals[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Decision != "deny" || got.ErrorCode != 29 || got.ResourceName != "topic-with-a-long-name-0" || got.PartitionsOmitted != 2000 ||
		got.ResourcesOmitted+int64(len(got.Resources)) != 1000 || len(got.Resources) == 0 {
		t.Errorf("%+v", got)
	}
}

// TestShutdownWithStalledSink checks that a stop with a sink that never
// writes ends at its deadline, a summary included, and that the events it
// could not write, or that a connection stopped waiting for, are counted.
func TestShutdownWithStalledSink(t *testing.T) {
	sink := &memSink{name: SinkKafka, gate: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	tr := New(Options{DataPath: DataPathSummary, Interval: 20 * time.Millisecond}, NewQueue(QueueOptions{MaxBytes: 1500, Metrics: m}, sink))
	c := tr.Open(ConnInfo{ID: 1})
	ctx := context.Background()
	var err error
	for i := 0; err == nil && i < 100; i++ {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = tr.Request(short, c, &Request{APIKey: int16(kmsg.CreateTopics), Resources: []Resource{{Type: "Topic", Name: "t", Operation: "Create"}}})
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Request on a full queue: %v", err)
	}
	if n := testutil.ToFloat64(m.dropped[DropCancelled]); n != 1 {
		t.Errorf("dropped_total{reason=cancelled} %v", n)
	}
	tr.Request(ctx, c, produce("t", 0, 0, 1)) // a pending summary
	time.Sleep(100 * time.Millisecond)        // the flush is blocked on the full queue
	stop, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := tr.Shutdown(stop); !errors.Is(err, ErrUnflushed) {
		t.Errorf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	lost := testutil.ToFloat64(m.dropped[DropUnflushed]) + testutil.ToFloat64(m.dropped[DropCancelled])
	if lost < 2 {
		t.Errorf("unflushed and cancelled: %v", lost)
	}
}
