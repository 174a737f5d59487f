package splitmerge

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var testSelf = Self{NodeID: 7, Host: "proxy.local", Port: 9092}

var errPartFailed = errors.New("part failed")

// marker is the code the fake broker node answers every entry with, so
// that a merged entry tells which broker answered it.
func marker(node int32) int16 { return 1000 + int16(node) }

// routedKeys are the keys the property covers: every key kmsg knows but
// FindCoordinator, which the proxy answers alone (TestFindCoordinator).
func routedKeys() []int16 {
	var keys []int16
	for k := range int16(200) {
		if kmsg.RequestForKey(k) != nil && ClassOf(k) != Local {
			keys = append(keys, k)
		}
	}
	return keys
}

// checkSplitMerge is the property: for a request drawn from s, a view
// drawn from s and some brokers failing, merge(split(request)) answers
// every entry exactly once, in the client's order, at the request's
// version, each with the answer of the broker the view places it on (a
// fake that answers every entry with its marker, in a shuffled order),
// the proxy's own answer where the view places it nowhere, or the
// retriable error of a failed part.
func checkSplitMerge(t testing.TB, s *source, key, version int16) {
	t.Helper()
	req := genRequest(s, key, version)
	view := genView(s)
	fails := make(map[int32]bool)
	for _, b := range brokerIDs {
		fails[b] = s.intn(5) == 0
	}
	name := fmt.Sprintf("%s v%d", kmsg.NameForKey(key), version)

	plan, err := Split(req, view)
	if err != nil {
		if !errors.Is(err, ErrNoBrokers) || len(view.Brokers()) != 0 {
			t.Fatalf("%s: split: %v", name, err)
		}
		return
	}
	if plan.Key != key || plan.Version != version {
		t.Fatalf("%s: plan for %d v%d", name, plan.Key, plan.Version)
	}
	results := make([]Result, len(plan.Parts))
	seen := make(map[int32]bool)
	for i, part := range plan.Parts {
		if part.Request.Key() != key || part.Request.GetVersion() != version {
			t.Fatalf("%s: part %d is %s v%d", name, i, kmsg.NameForKey(part.Request.Key()), part.Request.GetVersion())
		}
		if !isBroker(view, part.Node) {
			t.Fatalf("%s: part %d goes to node %d, not a broker", name, i, part.Node)
		}
		if seen[part.Node] && ClassOf(key) != ToEvery {
			t.Fatalf("%s: two parts for node %d", name, part.Node)
		}
		seen[part.Node] = true
		if fails[part.Node] {
			results[i].Err = errPartFailed
			continue
		}
		resp := ErrorResponse(roundTripRequest(part.Request), marker(part.Node), "")
		shuffle(s, reflect.ValueOf(resp), reordered(req))
		results[i].Response = roundTripResponse(resp)
	}
	merged, err := plan.Merge(results, testSelf)
	if err != nil {
		if !errors.Is(err, ErrCannotAnswer) || !cannotAnswer(req, results) {
			t.Fatalf("%s: merge: %v", name, err)
		}
		return
	}
	if merged.Key() != key || merged.GetVersion() != version {
		t.Fatalf("%s: merged into %s", name, describe(merged))
	}
	got := roundTripResponse(merged)

	// Every entry once, in order: the merged response has the shape of
	// the response that answers every entry of the client's request,
	// once each, in its order, apart from the codes and messages.
	want := roundTripResponse(expectedShape(req))
	gotShape := roundTripResponse(merged)
	clearCodes(reflect.ValueOf(want))
	clearCodes(reflect.ValueOf(gotShape))
	if !reflect.DeepEqual(gotShape, want) {
		t.Fatalf("%s: merged response\n%+v\nwant the shape of\n%+v\nrequest %+v", name, gotShape, want, req)
	}
	checkCodes(t, name, req, got, view, fails)
}

// reordered says how many levels of lists merge puts back in the
// client's order, which a test checks by answering them in another:
// topics and partitions of a request split by leader, the entries of a
// batched one. What one broker answers for one entry (a group's
// partitions) is that broker's answer as it is, in its order.
func reordered(req kmsg.Request) int {
	switch ClassOf(req.Key()) {
	case ByLeader:
		return 2
	case ByResource:
		return 1
	case ByCoordinator:
		if _, _, single := singleKey(req); !single {
			return 1
		}
	}
	if req.Key() == 19 || req.Key() == 37 { // CreateTopics, CreatePartitions
		return 1
	}
	return 0
}

// entryName is what a merge knows an entry by: its name fields.
func entryName(e reflect.Value) string {
	var b strings.Builder
	for _, f := range []string{"Topic", "TopicID", "Partition", "Group", "GroupID", "TransactionalID", "ResourceType", "ResourceName"} {
		if fv, ok := field(e, f); ok {
			if fv.Kind() == reflect.Pointer {
				fmt.Fprintf(&b, "%s/", str(fv))
				continue
			}
			fmt.Fprintf(&b, "%v/", fv.Interface())
		}
	}
	return b.String()
}

func isBroker(v View, node int32) bool {
	for _, b := range v.Brokers() {
		if b == node {
			return true
		}
	}
	return false
}

// cannotAnswer says when ErrCannotAnswer is the right outcome: nothing
// answered a request whose response can carry no error for what it asked.
func cannotAnswer(req kmsg.Request, results []Result) bool {
	for _, r := range results {
		if r.Err == nil {
			return false
		}
	}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return r.Topics == nil
	case *kmsg.DescribeTopicPartitionsRequest:
		return len(r.Topics) == 0
	case *kmsg.ApiVersionsRequest:
		return true
	}
	return false
}

// expectedShape is the response that answers every entry of req, as the
// merged one should be shaped.
func expectedShape(req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		if r.Version >= 7 && r.SessionEpoch > 0 {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = r.Version
			return resp
		}
	}
	resp := ErrorResponse(req, 1, "")
	reshape(resp, testSelf)
	return resp
}

// clearCodes zeroes every error code and message in v.
func clearCodes(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearCodes(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			switch {
			case f.Name == "ErrorCode":
				v.Field(i).SetInt(0)
			case f.Name == "ErrorMessage":
				v.Field(i).SetZero()
			default:
				clearCodes(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			clearCodes(v.Index(i))
		}
	}
}

// shuffle permutes the lists of entries in v, down to depth levels, as
// a broker that answers in its own order would; entries that look alike
// to a merge (same key: the answers to an entry the client asked for
// twice) keep their order among themselves, since nothing but that order
// tells them apart.
func shuffle(s *source, v reflect.Value, depth int) {
	if depth == 0 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			shuffle(s, v.Elem(), depth)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			shuffle(s, v.Field(i), depth)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		// Random ranks, handed out within each key in the entries'
		// order, then a sort by rank: entries of one key keep their
		// order, others move freely.
		n := v.Len()
		rank := make([]int, n)
		byKey := make(map[string][]int)
		for i := range n {
			rank[i] = s.intn(256)
			k := entryName(v.Index(i))
			byKey[k] = append(byKey[k], i)
		}
		for _, idx := range byKey {
			rs := make([]int, len(idx))
			for j, i := range idx {
				rs[j] = rank[i]
			}
			sort.Ints(rs)
			for j, i := range idx {
				rank[i] = rs[j]
			}
		}
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return rank[order[a]] < rank[order[b]] })
		vals := make([]reflect.Value, n)
		for i, o := range order {
			vals[i] = reflect.ValueOf(v.Index(o).Interface())
		}
		for i := range vals {
			v.Index(i).Set(vals[i])
		}
		for i := range v.Len() {
			shuffle(s, v.Index(i), depth-1)
		}
	}
}

// checkCodes checks that each entry of the merged response carries the
// answer of the broker the view places it on.
func checkCodes(t testing.TB, name string, req kmsg.Request, got kmsg.Response, view *Table, fails map[int32]bool) {
	t.Helper()
	key := req.Key()
	switch ClassOf(key) {
	case ByLeader:
		byID := (key == 0 || key == 1) && req.GetVersion() >= 13
		eachPartition(reflect.ValueOf(got), "", [16]byte{}, func(topic string, id [16]byte, p int32, code int16) {
			node := view.Leader(topic, id, p)
			want := marker(node)
			switch {
			case node < 0:
				want = leaderCode(node, byID)
			case fails[node]:
				want = notLeader
			}
			if code != want {
				t.Fatalf("%s: partition %q/%x/%d answered %d, want %d (leader %d)", name, topic, id[:1], p, code, want, node)
			}
		})
	case ByCoordinator:
		if typ, k, ok := singleKey(req); ok {
			// Codes a version does not carry read as 0.
			want := coordinatorCode(view, typ, k, fails)
			eachCode(reflect.ValueOf(got), func(code int16) {
				if code != 0 && code != want {
					t.Fatalf("%s: %q answered %d, want %d", name, k, code, want)
				}
			})
			return
		}
		eachKeyed(reflect.ValueOf(got), func(typ int8, k string, codes []int16) {
			want := coordinatorCode(view, typ, k, fails)
			for _, c := range codes {
				if c != want {
					t.Fatalf("%s: %q answered %d, want %d", name, k, c, want)
				}
			}
		})
	case ByResource:
		eachResource(reflect.ValueOf(got), func(typ int8, rname string, code int16) {
			node, _, a := resourceRoute(typ, rname, view.Brokers())
			want := marker(node)
			switch {
			case node < 0:
				want = a.code
			case fails[node]:
				want = anyFailed
			}
			if code != want {
				t.Fatalf("%s: resource %d %q answered %d, want %d", name, typ, rname, code, want)
			}
		})
	}
}

func coordinatorCode(view *Table, typ int8, k string, fails map[int32]bool) int16 {
	node := view.Coordinator(typ, k)
	switch {
	case node < 0:
		return coordinatorUnknown
	case fails[node]:
		return notCoordinator
	}
	return marker(node)
}

func field(v reflect.Value, name string) (reflect.Value, bool) {
	f := v.FieldByName(name)
	return f, f.IsValid()
}

func str(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	return v.String()
}

// eachPartition calls fn for every entry with a Partition and an
// ErrorCode, with the Topic and TopicID of the entry that holds it.
func eachPartition(v reflect.Value, topic string, id [16]byte, fn func(string, [16]byte, int32, int16)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachPartition(v.Elem(), topic, id, fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachPartition(v.Index(i), topic, id, fn)
		}
	case reflect.Struct:
		if f, ok := field(v, "Topic"); ok {
			topic = str(f)
		}
		if f, ok := field(v, "TopicID"); ok {
			id = f.Interface().([16]byte)
		}
		p, okP := field(v, "Partition")
		c, okC := field(v, "ErrorCode")
		if okP && okC {
			fn(topic, id, int32(p.Int()), int16(c.Int()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).Type.Kind() == reflect.Slice {
				eachPartition(v.Field(i), topic, id, fn)
			}
		}
	}
}

// eachCode calls fn with every error code in v.
func eachCode(v reflect.Value, fn func(int16)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachCode(v.Elem(), fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachCode(v.Index(i), fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "ErrorCode" {
				fn(int16(v.Field(i).Int()))
				continue
			}
			eachCode(v.Field(i), fn)
		}
	}
}

// eachKeyed calls fn for every entry named by a group or transactional
// id, with the codes it and its own entries carry.
func eachKeyed(v reflect.Value, fn func(int8, string, []int16)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachKeyed(v.Elem(), fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			e := v.Index(i)
			if e.Kind() != reflect.Struct {
				continue
			}
			typ, k, ok := CoordinatorGroup, "", false
			for _, f := range []string{"Group", "GroupID"} {
				if fv, has := field(e, f); has {
					k, ok = fv.String(), true
				}
			}
			if fv, has := field(e, "TransactionalID"); has {
				typ, k, ok = CoordinatorTransaction, fv.String(), true
			}
			if !ok {
				eachKeyed(e, fn)
				continue
			}
			var codes []int16
			eachCode(e, func(c int16) { codes = append(codes, c) })
			fn(typ, k, codes)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Type.Kind() == reflect.Slice {
				eachKeyed(v.Field(i), fn)
			}
		}
	}
}

// eachResource calls fn for every config resource of a response.
func eachResource(v reflect.Value, fn func(int8, string, int16)) {
	res := v.Elem().FieldByName("Resources")
	for i := range res.Len() {
		e := res.Index(i)
		fn(int8(e.FieldByName("ResourceType").Int()), e.FieldByName("ResourceName").String(), int16(e.FieldByName("ErrorCode").Int()))
	}
}

// TestSplitMergeProperty runs the property over every routed key and
// version, with requests and views from seeded generators, once with
// responses searched and once indexed by key.
func TestSplitMergeProperty(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 10
	}
	defer func(n int) { smallIndex = n }(smallIndex)
	for _, small := range []int{16, 0} {
		smallIndex = small
		for _, key := range routedKeys() {
			max := kmsg.RequestForKey(key).MaxVersion()
			for version := range max + 1 {
				rng := rand.New(rand.NewPCG(uint64(key), uint64(version)))
				for range rounds {
					checkSplitMerge(t, &source{rng: rng}, key, version)
				}
			}
		}
	}
}

// FuzzSplitMerge is the property over inputs the fuzzer finds: its
// bytes pick the key, the version, the request, the view and the
// brokers that fail.
func FuzzSplitMerge(f *testing.F) {
	keys := routedKeys()
	for i := range keys {
		f.Add([]byte{0, byte(i), 0xff, 1, 2, 3, 4, 5, 6, 7, 8})
		f.Add([]byte{1, byte(i), 0, 3, 3, 3, 0, 1, 2, 0, 1, 2, 3})
	}
	defer func(n int) { smallIndex = n }(smallIndex)
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &source{b: b}
		smallIndex = []int{16, 0}[s.intn(2)]
		key := keys[s.intn(len(keys))]
		max := kmsg.RequestForKey(key).MaxVersion()
		version := int16(s.intn(int(max) + 1))
		checkSplitMerge(t, s, key, version)
	})
}
