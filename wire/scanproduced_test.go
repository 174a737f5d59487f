package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkProducedScan compares ProducedScan with kmsg on a Produce response
// body: the same verdict and, when both read it, the same partitions with
// their errors and base offsets.
func checkProducedScan(t *testing.T, body []byte, version int16) {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	kerr := resp.ReadFrom(body)

	var s ProducedScan
	var got []Produced
	s.Reset(body, version)
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		got = append(got, p)
	}
	if !sameVerdict(t, fmt.Sprintf("Produce v%d response: ProducedScan", version), kerr, s.Err(), body) {
		return
	}
	var want []Produced
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			w := Produced{TopicID: tp.TopicID, Partition: p.Partition, ErrorCode: p.ErrorCode, BaseOffset: p.BaseOffset}
			if version < topicIDFrom {
				w.Topic, w.TopicID = []byte(tp.Topic), [16]byte{}
			}
			want = append(want, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("Produce v%d response: scanner found %d partitions, kmsg %d", version, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Topic, w.Topic) || g.TopicID != w.TopicID || g.Partition != w.Partition || g.ErrorCode != w.ErrorCode || g.BaseOffset != w.BaseOffset {
			t.Fatalf("Produce v%d response: partition %d: scanner %+v, kmsg %+v", version, i, g, w)
		}
	}
}

func TestProducedScanMatchesKmsg(t *testing.T) {
	for v := range kmsg.NewPtrProduceResponse().MaxVersion() + 1 {
		for _, body := range produceResponses(v) {
			for cut := range len(body) + 1 {
				checkProducedScan(t, body[:cut], v)
			}
			checkProducedScan(t, append(bytes.Clone(body), 0), v)
		}
	}
}

func TestProducedScanAllocatesNothing(t *testing.T) {
	body := produceResponses(13)[1]
	var s ProducedScan
	n := testing.AllocsPerRun(100, func() {
		s.Reset(body, 13)
		found := 0
		for _, ok := s.Next(); ok; _, ok = s.Next() {
			found++
		}
		if s.Err() != nil || found != 4 {
			t.Fatalf("found %d partitions, err %v", found, s.Err())
		}
	})
	if n != 0 {
		t.Fatalf("scanning a Produce response allocates %v times", n)
	}
}

// FuzzScanProduced: for every Produce response body, ProducedScan accepts
// exactly what kmsg accepts and finds the same partitions, errors and
// base offsets.
func FuzzScanProduced(f *testing.F) {
	for _, v := range []int16{2, 9, 13} {
		for _, body := range produceResponses(v) {
			f.Add(body, v)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, version int16) {
		checkProducedScan(t, body, versionIn(version, kmsg.NewPtrProduceResponse().MaxVersion()))
	})
}
