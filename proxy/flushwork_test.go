package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestReleasedWritesHandOffWork counts the goroutines started to write
// upstream the requests that a response released, over pipelined Produce
// requests on 12 partitions, each sharing a partition with the one before,
// so that in none mode nearly every one waits for an answer and is
// released by it. Connection mode releases nothing on an answer and starts
// none; none mode must start no more: the upstream reader writes what the
// socket takes at once itself, and a goroutine is started only for a write
// the socket did not take whole, which requests this small never leave.
func TestReleasedWritesHandOffWork(t *testing.T) {
	const requests, partitions = 120, 12
	reqs := make([]kmsg.Request, requests)
	for i := range reqs {
		parts := []int32{int32(i % partitions), int32((i + 1) % partitions)}
		reqs[i] = multiProduce(9, "h", parts, []string{"a", "b"}, 100)
	}
	handOffs := map[config.Ordering]int64{}
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "h"))
		p := startProxy(t, mode, c.ListenAddrs(), nil)
		res, err := pipeprobe.Pipeline(testContext(t, 60*time.Second), p.Addr(), reqs, pipeprobe.PipelineOptions{Window: 16})
		if err != nil {
			t.Fatal(err)
		}
		for i, at := range res.Arrived {
			if at != i {
				t.Fatalf("%s: responses arrived in the order %v", mode, res.Arrived)
			}
		}
		for i, ex := range res.Exchanges {
			resp, ok := ex.Resp.(*kmsg.ProduceResponse)
			if !ok || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
				t.Fatalf("%s: response %d does not answer its two partitions", mode, i)
			}
			for _, rp := range resp.Topics[0].Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("%s: response %d: partition %d error %d", mode, i, rp.Partition, rp.ErrorCode)
				}
			}
		}
		handOffs[mode] = p.FlushHandOffs()
		t.Logf("%s: %d goroutines started to write released requests, for %d requests", mode, handOffs[mode], requests)
	}
	if n, want := handOffs[config.OrderingNone], handOffs[config.OrderingConnection]; n > want {
		t.Errorf("none mode started %d goroutines to write released requests (%.2f per request), want at most connection mode's %d",
			n, float64(n)/requests, want)
	}
}
