package proxy_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/config"
)

// TestAuditUnanswered: a write the upstream took and never answered (its
// connection closed, as a broker's crash closes it) is in the trail,
// though the client got no answer: the upstream may have applied it. Its
// event names the topic and partition written, carries NETWORK_EXCEPTION,
// what the client saw, and says why; the client's retry, answered, is an
// event of its own. In a summary, the resource carries the error.
func TestAuditUnanswered(t *testing.T) {
	for _, tc := range []struct {
		mode     config.Ordering
		dataPath string
	}{
		{config.OrderingNone, config.AuditDataPathRequest},
		{config.OrderingConnection, config.AuditDataPathRequest},
		{config.OrderingConnection, config.AuditDataPathSummary},
	} {
		t.Run(string(tc.mode)+"/"+tc.dataPath, func(t *testing.T) {
			const topic = "lost"
			kc := newCluster(t, kfake.SeedTopics(1, topic))
			var dropped atomic.Bool
			kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				if dropped.CompareAndSwap(false, true) {
					return nil, errors.New("crashed before answering"), true
				}
				return nil, nil, false
			})
			p, stop := auditTrailProxy(t, kc, tc.mode, tc.dataPath, nil)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
				kgo.MetadataMinAge(10*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testContext(t, 30*time.Second)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			if !dropped.Load() {
				t.Fatal("the upstream answered every write")
			}
			var lost, answered int
			for _, e := range stop() {
				if e.APIKey != "Produce" {
					continue
				}
				if len(e.Resources) != 1 || e.Resources[0].Name != topic {
					t.Fatalf("a Produce event names %+v, want the topic %q", e.Resources, topic)
				}
				res := e.Resources[0]
				switch {
				case tc.dataPath == config.AuditDataPathSummary:
					// One summary per connection: the dropped one's and
					// the retry's.
					if res.ErrorCode == capture.ErrNetwork {
						lost++
					} else if res.ErrorCode == 0 {
						answered++
					}
					if e.Reason != "" {
						t.Errorf("a summary carries the reason %q", e.Reason)
					}
				case e.ErrorCode == capture.ErrNetwork:
					lost++
					if e.Reason != capture.ReasonUnanswered {
						t.Errorf("the unanswered write's reason is %q, want %q", e.Reason, capture.ReasonUnanswered)
					}
					if len(res.Partitions) != 1 || res.Partitions[0].Partition != 0 || res.Partitions[0].First != nil {
						t.Errorf("the unanswered write's partitions are %+v, want partition 0 without offsets", res.Partitions)
					}
				case e.ErrorCode == 0:
					answered++
					if e.Reason != "" {
						t.Errorf("an answered write carries the reason %q", e.Reason)
					}
				default:
					t.Errorf("a Produce event with error code %d", e.ErrorCode)
				}
			}
			if lost != 1 || answered != 1 {
				t.Fatalf("%d events of an unanswered write and %d of an answered one, want 1 and 1", lost, answered)
			}
		})
	}
}
