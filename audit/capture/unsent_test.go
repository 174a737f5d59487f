package capture_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/wire"
)

// TestUnsent: the partitions of an acks=0 Produce marked unsent, named
// as the request names their topics (by name before v13, by id from it),
// carry the error and no offsets, their records and bytes kept; the
// others are as read from the request; a partition the request did not
// name is not added. With few partitions, searched, and with many,
// through the index.
func TestUnsent(t *testing.T) {
	for _, version := range []int16{9, 13} {
		for _, n := range []int{4, 40} {
			t.Run(fmt.Sprintf("v%d/%d", version, n), func(t *testing.T) {
				req := kmsg.NewPtrProduceRequest()
				req.SetVersion(version)
				id := func(topic int) [16]byte { return [16]byte{byte(topic), 9} }
				for i := range n {
					rt := kmsg.NewProduceRequestTopic()
					if version >= 13 {
						rt.TopicID = id(i / 4)
					} else {
						rt.Topic = fmt.Sprintf("topic-%d", i/4)
					}
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition, rp.Records = int32(i%4), capturetest.Batch(3, 70)
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
				}
				frame, _ := capturetest.Frames(req, kmsg.NewPtrProduceResponse(), "c")
				h, err := wire.ParseRequestHeader(frame)
				if err != nil {
					t.Fatal(err)
				}
				var c capture.Conn
				ar := c.Read(h, frame, []byte("c"), true, true, nil, false)
				// Every partition of the last topic and partition 1 of
				// the first are not sent; partition 7 of the first was
				// never asked for.
				unsent := func(topic, partition int) bool { return topic == (n-1)/4 || topic == 0 && partition == 1 }
				for i := range n {
					if topic, partition := i/4, i%4; unsent(topic, partition) {
						rt := req.Topics[i]
						c.Unsent(ar, rt.Topic, rt.TopicID, int32(partition), kerr.NotLeaderForPartition.Code)
					}
				}
				c.Unsent(ar, req.Topics[0].Topic, req.Topics[0].TopicID, 7, kerr.NotLeaderForPartition.Code)
				c.Answered(ar, h, nil, time.Unix(1, 0))
				q := ar.Request()
				seen := 0
				for ti, r := range q.Resources {
					want := fmt.Sprintf("topic-%d", ti)
					if version >= 13 {
						i := id(ti)
						want = base64.RawURLEncoding.EncodeToString(i[:])
					}
					if r.Name != want {
						t.Fatalf("resource %d named %q, want %q", ti, r.Name, want)
					}
					for _, p := range r.Partitions {
						seen++
						code := int16(0)
						if unsent(ti, int(p.Partition)) {
							code = kerr.NotLeaderForPartition.Code
						}
						if p.ErrorCode != code || p.FirstOffset != audit.NoOffset || p.LastOffset != audit.NoOffset || p.Records != 3 || p.Bytes <= 0 {
							t.Errorf("%s/%d: %+v, want error %d, 3 records, no offsets", r.Name, p.Partition, p, code)
						}
					}
				}
				if seen != n {
					t.Errorf("the event names %d partitions, the request %d", seen, n)
				}
				capture.Put(ar)
			})
		}
	}
}
