package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceEvent() *Event {
	return &Event{
		Kind: KindRequest, Time: time.Date(2026, 12, 4, 21, 0, 0, 123456789, time.UTC),
		Listener: "node", Principal: "User:alice", ClientAddress: "10.0.0.7:51234", ClientID: "orders-svc",
		Connection: 42, APIKey: int16(kmsg.Produce), APIVersion: 11,
		Resources: []Resource{
			{Type: "Topic", Name: "orders", Operation: "Write", Partitions: []Partition{
				{Partition: 0, FirstOffset: 100, LastOffset: 109, Committed: NoOffset, FetchOffset: NoOffset, Records: 10, Bytes: 10240},
				{Partition: 3, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: NoOffset, FetchOffset: NoOffset, ErrorCode: 6},
			}},
			{Type: "Topic", Name: "audit", Operation: "Write", Decision: Deny, ErrorCode: 29},
		},
	}
}

// fetchEvent is README's second example: a Fetch of two partitions, one
// of which had nothing new.
func fetchEvent() *Event {
	return &Event{
		Kind: KindRequest, Time: time.Date(2026, 12, 4, 21, 0, 1, 5000000, time.UTC),
		Listener: "node", Principal: "User:bob", ClientAddress: "10.0.0.9:40112", ClientID: "billing",
		Connection: 43, APIKey: int16(kmsg.Fetch), APIVersion: 12,
		Resources: []Resource{
			{Type: "Topic", Name: "orders", Operation: "Read", Partitions: []Partition{
				{Partition: 0, FetchOffset: 100, FirstOffset: 100, LastOffset: 109, Committed: NoOffset, Records: 10, Bytes: 10240},
				{Partition: 3, FetchOffset: 57, FirstOffset: NoOffset, LastOffset: NoOffset, Committed: NoOffset},
			}},
		},
	}
}

// TestEncodeSchema decodes an encoded event with encoding/json and checks
// every documented field: the fixed ones at the top level, the CloudEvents
// attributes beside them, and the resources.
func TestEncodeSchema(t *testing.T) {
	src := NewSource("proxy-a")
	line := AppendEvent(nil, src, produceEvent())
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	want := map[string]any{
		"specversion": "1.0", "id": "proxy-a-1", "source": "inorder/node", "type": "io.inorder.audit.request",
		"datacontenttype": "application/json", "time": "2026-12-04T21:00:00.123456789Z",
		"principal": "User:alice", "client_address": "10.0.0.7:51234", "api_key": "Produce",
		"resource_type": "Topic", "resource_name": "orders", "operation": "Write",
		"decision": "deny", "error_code": 6.0, "listener": "node", "client_id": "orders-svc",
		"connection": 42.0, "api_version": 11.0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "resources" {
			t.Errorf("unexpected field %s", k)
		}
	}
	res := got["resources"].([]any)
	if len(res) != 2 {
		t.Fatalf("resources: %v", res)
	}
	r0 := res[0].(map[string]any)
	parts := r0["partitions"].([]any)
	p0, p1 := parts[0].(map[string]any), parts[1].(map[string]any)
	if p0["first_offset"] != 100.0 || p0["last_offset"] != 109.0 || p0["records"] != 10.0 || p0["bytes"] != 10240.0 || p0["error_code"] != nil {
		t.Errorf("partition 0: %v", p0)
	}
	if p1["error_code"] != 6.0 || p1["first_offset"] != nil || p1["committed_offset"] != nil {
		t.Errorf("partition 3: %v", p1)
	}
	r1 := res[1].(map[string]any)
	if r1["decision"] != "deny" || r1["error_code"] != 29.0 || r1["resource_name"] != "audit" {
		t.Errorf("resource 1: %v", r1)
	}
	// The next event has the next id.
	var next map[string]any
	json.Unmarshal(AppendEvent(nil, src, produceEvent()), &next)
	if next["id"] != "proxy-a-2" {
		t.Errorf("second id %v", next["id"])
	}
}

// TestEncodeFixedFieldsAlways checks that an event with nothing set still
// carries every fixed field, and that an authentication by certificate
// alone has an empty api_key.
func TestEncodeFixedFieldsAlways(t *testing.T) {
	var got map[string]any
	line := AppendEvent(nil, NewSource("x"), &Event{Kind: KindAuthentication, APIKey: NoAPIKey, Mechanism: "TLS", TLSSubject: "CN=a", Decision: Deny, Reason: "no matching rule"})
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "principal", "client_address", "api_key", "resource_type", "resource_name", "operation", "decision", "error_code"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %s in %s", k, line)
		}
	}
	if got["api_key"] != "" || got["type"] != "io.inorder.audit.authentication" || got["mechanism"] != "TLS" ||
		got["tls_subject"] != "CN=a" || got["reason"] != "no matching rule" || got["decision"] != "deny" || got["api_version"] != nil {
		t.Errorf("%s", line)
	}
}

// TestEncodeStrings checks that whatever a client names (a client id, a
// topic) round-trips through encoding/json, as Go's own encoder writes it,
// and that the line stays one line.
func TestEncodeStrings(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " back \ slash`, "nl\n cr\r tab\t nul\x00 bel\x07 del\x7f",
		"é ü 日本 🎉", "bad \xff utf8 \xc3", "sep \u2028 \u2029", "</script>&"} {
		line := AppendEvent(nil, NewSource("x"), &Event{ClientID: s, Principal: s})
		if bytes.Count(line, []byte("\n")) != 1 {
			t.Errorf("%q: more than one line: %q", s, line)
		}
		var got struct {
			ClientID  string `json:"client_id"`
			Principal string `json:"principal"`
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Errorf("%q: %v: %s", s, err, line)
			continue
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if !utf8.ValidString(s) {
			// encoding/json replaces each bad byte by U+FFFD, as we do.
			b, _ := json.Marshal(s)
			json.Unmarshal(b, &want)
		}
		if got.Principal != want || (s != "" && got.ClientID != want) {
			t.Errorf("%q: decoded %q, want %q", s, got.Principal, want)
		}
	}
}

func TestAPIName(t *testing.T) {
	for key, want := range map[int16]string{0: "Produce", 1: "Fetch", 36: "SASLAuthenticate", -1: "", 32000: "32000"} {
		if got := APIName(key); got != want {
			t.Errorf("APIName(%d) = %q, want %q", key, got, want)
		}
	}
}

// BenchmarkEncode is the encoding alone of a Produce event naming one
// partition, as a per-request trail writes one per Produce.
func BenchmarkEncode(b *testing.B) {
	src := NewSource("bench")
	e := produceEvent()
	e.Resources = e.Resources[:1]
	e.Resources[0].Partitions = e.Resources[0].Partitions[:1]
	enc := NewEncoder(src)
	b.ReportAllocs()
	for b.Loop() {
		enc.Encode(e)
	}
}

// TestREADMEExample checks that README's example event is what the
// encoder writes for that event.
func TestREADMEExample(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "## Audit trail")
	block := readme[start:]
	i := strings.Index(block, "```json\n")
	if start < 0 || i < 0 {
		t.Fatal("README has no Audit trail example")
	}
	block = block[i+len("```json\n"):]
	example := block[:strings.Index(block, "\n```")+1]
	src := NewSource("20261204T210000.123456789Z")
	src.seq.Store(41)
	e := produceEvent()
	e.Resources = e.Resources[:1]
	if got := string(AppendEvent(nil, src, e)); got != example {
		t.Errorf("README's example:\n%s\nthe encoder writes:\n%s", example, got)
	}
	block = block[strings.Index(block, "\n```")+4:]
	i = strings.Index(block, "```json\n")
	if i < 0 {
		t.Fatal("README has no Fetch example")
	}
	block = block[i+len("```json\n"):]
	example = block[:strings.Index(block, "\n```")+1]
	if got := string(AppendEvent(nil, src, fetchEvent())); got != example {
		t.Errorf("README's Fetch example:\n%s\nthe encoder writes:\n%s", example, got)
	}
}

// TestREADMENamesMetricsAndLabels checks that README names every audit
// metric and every value its labels take.
func TestREADMENamesMetricsAndLabels(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	var want []string
	for _, r := range DropReasons {
		want = append(want, "`"+string(r)+"`")
	}
	for _, s := range SinkNames {
		want = append(want, "`"+string(s)+"`")
	}
	for _, m := range []string{"queued_events", "queued_bytes", "enqueue_wait_seconds_total", "dropped_total", "written_total", "sink_errors_total", "sink_up"} {
		want = append(want, "`inorder_audit_"+m+"`")
	}
	for _, w := range want {
		if !strings.Contains(readme, w) {
			t.Errorf("README.md does not name %s", w)
		}
	}
}

// FuzzEncodeString checks that any client id, principal or resource name
// gives one line of valid JSON that decodes to the name, as encoding/json
// would have written it.
func FuzzEncodeString(f *testing.F) {
	for _, s := range []string{"", "a", "\x00", "\"\\", "\xff", "\u2028", "日本", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line := AppendEvent(nil, NewSource("f"), &Event{ClientID: s, Resources: []Resource{{Name: s}}})
		if bytes.Count(line, []byte("\n")) != 1 || !json.Valid(line) {
			t.Fatalf("%q: %q", s, line)
		}
		var got struct {
			ResourceName string `json:"resource_name"`
		}
		json.Unmarshal(line, &got)
		ref, _ := json.Marshal(s)
		var want string
		json.Unmarshal(ref, &want)
		if got.ResourceName != want {
			t.Fatalf("%q decoded %q, encoding/json's %q", s, got.ResourceName, want)
		}
	})
}

// TestEncodeClaimedPrincipal checks that a refused authentication's claim
// is written apart from the principal, round-tripping whatever the client
// sent, and that it is absent when not set.
func TestEncodeClaimedPrincipal(t *testing.T) {
	claim := "User:ev\"il\n\\x,y=z"
	line := AppendEvent(nil, NewSource("x"), &Event{Kind: KindAuthentication, APIKey: 36, Mechanism: "PLAIN", Principal: "User:ANONYMOUS", ClaimedPrincipal: claim, Decision: Deny, Reason: "r"})
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got["claimed_principal"] != claim || got["principal"] != "User:ANONYMOUS" || strings.Count(string(line), "\n") != 1 {
		t.Errorf("%s", line)
	}
	got = nil
	line = AppendEvent(nil, NewSource("x"), &Event{Kind: KindAuthentication, APIKey: 36, Mechanism: "PLAIN", Principal: "User:alice"})
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["claimed_principal"]; ok {
		t.Errorf("a claim in a success: %s", line)
	}
}
