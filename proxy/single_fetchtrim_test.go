package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleFetchTrimsForABrokerPastMaxBytes: three brokers that answer
// every partition of a Fetch with a 1 MiB batch, whatever its max_bytes
// (kfake's synthetic mode), lead 24 partitions each, under a 16 MiB
// budget: each part's answer is more than the whole budget, and is cut.
// Once their answers were cut, each broker is asked in round 1 only the
// partitions its part's maximum holds, not all 24 (at most half of them
// in one Fetch); and every answer still names all 72 partitions, without
// error, those no broker was asked for with no records and the
// watermarks their broker gave.
func TestSingleFetchTrimsForABrokerPastMaxBytes(t *testing.T) {
	const (
		topic      = "trim"
		partitions = 72
		brokers    = 3
		// synthEnd is every synthetic partition's high watermark.
		synthEnd = int64(1) << 62
	)
	kc := newCluster(t, kfake.SeedTopics(partitions, topic),
		kfake.SyntheticFetch(kfake.SyntheticBatch{Records: 128, RecordBytes: 8000}))
	spreadLeaders(t, kc, topic, partitions)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), func(c *config.Config) { c.MaxMemory = smallestBudget })
	rc := dialRaw(t, p.Addr())
	offsets := make([]int64, partitions)
	fetched := 0
	fetch := func() {
		t.Helper()
		fetched++
		req := fetchAll(topic, offsets, 10*time.Second, 1) // no part is late
		req.MaxBytes = 50 << 20
		fr := rc.do(req).(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != partitions || fr.ErrorCode != 0 {
			t.Fatalf("an answer of %d topics, error %d, want one topic of %d partitions", len(fr.Topics), fr.ErrorCode, partitions)
		}
		withRecords := 0
		for _, rp := range fr.Topics[0].Partitions {
			switch {
			case rp.ErrorCode != 0:
				t.Fatalf("Fetch %d, partition %d: error %d", fetched, rp.Partition, rp.ErrorCode)
			case rp.HighWatermark != synthEnd:
				t.Fatalf("partition %d: high watermark %d, want its broker's %d", rp.Partition, rp.HighWatermark, synthEnd)
			case rp.RecordBatches == nil:
				t.Fatalf("partition %d: null records", rp.Partition)
			case len(rp.RecordBatches) > 0:
				withRecords++
			}
		}
		if withRecords == 0 {
			t.Fatal("an answer with no records")
		}
	}
	fetch()
	if p.FetchCuts() == 0 {
		t.Fatal("no answer was cut: the brokers did not answer past the parts' maximum")
	}
	// Round 1 of this one may already be trimmed; the counting starts
	// after it, when every answer to the first is in.
	fetch()
	asked := countFetches(kc)
	const fetches = 3
	for range fetches {
		fetch()
	}
	waitFor(t, "each broker to be asked", func() bool {
		for n := range int32(brokers) {
			if asked.of(n) == 0 {
				return false
			}
		}
		return true
	})
	if p.FetchTrimmed() == 0 {
		t.Fatal("no Fetch part counted trimmed")
	}
	if most := asked.mostAsked(); most > partitions/brokers/2 {
		t.Fatalf("a broker was asked %d of its %d partitions in one Fetch: brokers answering past max_bytes were asked everything", most, partitions/brokers)
	}
}
