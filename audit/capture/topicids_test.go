package capture_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/wire"
)

// metadataOf is a Metadata answer naming topics, by name, with ids.
func metadataOf(topics map[string][16]byte) *kmsg.MetadataResponse {
	md := kmsg.NewPtrMetadataResponse()
	for name, id := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(name), id
		md.Topics = append(md.Topics, mt)
	}
	return md
}

// produceEvent is the event of a Produce at version to topics (by name
// before v13, by id from it), answered.
func produceEvent(t *testing.T, c *capture.Conn, version int16, topics []string, ids map[string][16]byte) []string {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(version)
	for _, name := range topics {
		rt := kmsg.NewProduceRequestTopic()
		st := kmsg.NewProduceResponseTopic()
		if version >= 13 {
			rt.TopicID, st.TopicID = ids[name], ids[name]
		} else {
			rt.Topic, st.Topic = name, name
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = capturetest.Batch(2, 70)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		st.Partitions = append(st.Partitions, kmsg.NewProduceResponseTopicPartition())
		resp.Topics = append(resp.Topics, st)
	}
	frame, respFrame := capturetest.Frames(req, resp, "c")
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	ar := c.Read(h, frame, []byte("c"), true, true, nil, false)
	c.Answered(ar, h, respFrame, time.Unix(1, 0))
	var names []string
	for _, r := range ar.Request().Resources {
		names = append(names, r.Name)
	}
	capture.Put(ar)
	return names
}

// TestTopicIDsNameEvents: an event of a request that names its topics by
// id names them as the Metadata answers taught; an id no answer taught
// stays the id; a request that names its topics by name is never
// renamed, whatever its names look like.
func TestTopicIDsNameEvents(t *testing.T) {
	ids := map[string][16]byte{"orders": {1, 2}, "payments": {3, 4}, "unknown": {5, 6}}
	b64 := func(name string) string { id := ids[name]; return base64.RawURLEncoding.EncodeToString(id[:]) }
	var known capture.TopicIDs
	known.Learn(metadataOf(map[string][16]byte{"orders": ids["orders"], "payments": ids["payments"]}))
	c := capture.Conn{IDs: &known}
	if got := fmt.Sprint(produceEvent(t, &c, 13, []string{"orders", "payments", "unknown"}, ids)); got != fmt.Sprint([]string{"orders", "payments", b64("unknown")}) {
		t.Errorf("v13 by id: the event names %s", got)
	}
	if got := fmt.Sprint(produceEvent(t, &c, 12, []string{b64("orders")}, ids)); got != fmt.Sprint([]string{b64("orders")}) {
		t.Errorf("v12 by name: the event names %s, want the topic's own name", got)
	}
	var none capture.Conn
	if got := fmt.Sprint(produceEvent(t, &none, 13, []string{"orders"}, ids)); got != fmt.Sprint([]string{b64("orders")}) {
		t.Errorf("v13 without TopicIDs: the event names %s", got)
	}
	// A topic renamed (deleted and made again under another id, or the
	// same id answered under another name) is named as last taught.
	known.Learn(metadataOf(map[string][16]byte{"orders-v2": ids["orders"]}))
	if got := fmt.Sprint(produceEvent(t, &c, 13, []string{"orders"}, ids)); got != "[orders-v2]" {
		t.Errorf("after a new name: the event names %s", got)
	}
}

// TestTopicIDsBounded: however many topics the answers name, the ids kept
// stay bounded, and the last answer's are known.
func TestTopicIDsBounded(t *testing.T) {
	var ids capture.TopicIDs
	const n = capture.MaxTopicIDs + 500
	for start := 0; start < n; start += 10_000 {
		batch := map[string][16]byte{}
		for i := start; i < min(n, start+10_000); i++ {
			batch[fmt.Sprintf("t%d", i)] = [16]byte{1, byte(i), byte(i >> 8), byte(i >> 16)}
		}
		ids.Learn(metadataOf(batch))
		if got := ids.Len(); got > capture.MaxTopicIDs {
			t.Fatalf("%d ids kept, more than %d", got, capture.MaxTopicIDs)
		}
	}
	last := n - 1
	if got, ok := ids.Name([16]byte{1, byte(last), byte(last >> 8), byte(last >> 16)}); !ok || got != fmt.Sprintf("t%d", last) {
		t.Fatalf("the last topic learned is named %q, %v", got, ok)
	}
}
