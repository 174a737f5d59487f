package capture_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/wire"
)

// oddFetch is Fetch's exchange at version with the answers a count must
// take as fillFetched does: a partition ending in part of a batch, one
// with an error and no records, one whose records are a legacy message
// set, one the request did not list, and a top-level error.
func oddFetch(t testing.TB, version int16) (frame, respFrame []byte) {
	t.Helper()
	frame, respFrame, _ = capturetest.Fetch(version, 100)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	at := 8
	if version >= 12 {
		at++ // the header's tag section
	}
	if err := resp.ReadFrom(respFrame[at:]); err != nil {
		t.Fatal(err)
	}
	resp.ErrorCode = 3
	ps := resp.Topics[0].Partitions
	ps[0].RecordBatches = ps[0].RecordBatches[:170]                                // the second batch cut short
	ps[1].RecordBatches, ps[1].ErrorCode = nil, 1                                  // none
	ps[2].RecordBatches[16] = 1                                                    // legacy
	ps[3].RecordBatches = append(ps[3].RecordBatches, ps[3].RecordBatches[:40]...) // a header cut short
	extra := kmsg.NewFetchResponseTopicPartition()
	extra.Partition, extra.RecordBatches = 9, capturetest.Batch(4, 80)
	resp.Topics[1].Partitions = append(resp.Topics[1].Partitions, extra)
	respFrame = resp.AppendTo(append([]byte(nil), respFrame[:at]...))
	binary.BigEndian.PutUint32(respFrame, uint32(len(respFrame)-4))
	return frame, respFrame
}

// streamFetched counts respFrame as the proxy's walk does: the scan
// reporting, through windows of random sizes, the records shown in
// random pieces or skipped where the count lets them go unseen, and its
// tag section scanned. It returns the walk's error, where the proxy would
// end the connection.
func streamFetched(c *capture.Conn, ar *capture.Req, version int16, respFrame []byte, rng *rand.Rand) error {
	var f capture.Fetched
	f.Begin(ar)
	var s wire.FetchStream
	body := respFrame[8:]
	s.Start(version, int64(len(body)), true)
	s.Report()
	for pos, win := 0, 1+rng.IntN(64); ; {
		step, err := s.Next(body[pos:min(len(body), pos+win)])
		if errors.Is(err, wire.ErrNeedMore) {
			win += 1 + rng.IntN(64)
			continue
		}
		if err != nil {
			return err
		}
		switch step.Found {
		case wire.FoundTopic:
			c.FetchTopic(&f, step.Topic, step.TopicID)
		case wire.FoundPartition:
			c.FetchPartition(&f, step.Partition, step.ErrorCode, step.Pass)
		}
		pos += step.Used
		if step.End {
			if _, err := wire.ScanFetchTail(version, body[pos:]); err != nil {
				return err
			}
			c.FetchEnd(&f, s.ErrorCode())
			return nil
		}
		rec := body[pos : pos+int(step.Pass)]
		for len(rec) > 0 && step.Found == wire.FoundPartition {
			n := 1 + rng.IntN(len(rec))
			if u := f.Unseen(); u > 0 && rng.IntN(2) == 0 {
				n = int(min(int64(n), u))
				c.FetchSkip(&f, int64(n))
			} else {
				c.FetchRecords(&f, rec[:n])
			}
			rec = rec[n:]
		}
		pos += int(step.Pass)
		win = 1 + rng.IntN(64)
	}
}

// TestStreamedFetch: a Fetch response counted as it streams, at every
// version, gives the event fillFetched gives reading it whole, the
// partitions cut short, empty or legacy included.
func TestStreamedFetch(t *testing.T) {
	for version := int16(0); version <= kmsg.NewPtrFetchResponse().MaxVersion(); version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			for i, odd := range []bool{false, true} {
				frame, respFrame, _ := capturetest.Fetch(version, 100)
				if odd {
					frame, respFrame = oddFetch(t, version)
				}
				var c capture.Conn
				whole := exchange(t, &c, frame, respFrame, false)
				h, err := wire.ParseRequestHeader(frame)
				if err != nil {
					t.Fatal(err)
				}
				for seed := range uint64(20) {
					ar := c.Read(h, frame, []byte("consumer-1"), true, true, nil, false)
					if err := streamFetched(&c, ar, version, respFrame, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
						t.Fatal(err)
					}
					c.Answered(ar, h, nil, time.Unix(1, 0))
					if !reflect.DeepEqual(ar.Request(), whole.Request()) {
						t.Fatalf("odd %v, seed %d: streamed, the event is\n%+v\nread whole\n%+v", odd, seed, ar.Request(), whole.Request())
					}
					capture.Put(ar)
				}
				if odd && version >= 7 && whole.Request().ErrorCode != 3 {
					t.Fatalf("the response's error recorded as %d", whole.Request().ErrorCode)
				}
				capture.Put(whole)
			}
		})
	}
}

// FuzzStreamedFetch: for any Fetch response body the walk accepts, the
// event counted as it streams, through any windows, is the event read
// whole: a broker's bytes cannot make the two disagree.
func FuzzStreamedFetch(f *testing.F) {
	for _, version := range []int16{4, 11, 12, 13, 16} {
		_, respFrame, _ := capturetest.Fetch(version, 100)
		f.Add(respFrame[8:], version, uint64(1))
		_, respFrame = oddFetch(f, version)
		f.Add(respFrame[8:], version, uint64(2))
	}
	f.Fuzz(func(t *testing.T, body []byte, version int16, seed uint64) {
		version = max(0, version) % (kmsg.NewPtrFetchResponse().MaxVersion() + 1)
		frame, _, _ := capturetest.Fetch(version, 100)
		respFrame := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		respFrame = append(binary.BigEndian.AppendUint32(respFrame, 1), body...)
		h, err := wire.ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		var c capture.Conn
		ar := c.Read(h, frame, []byte("consumer-1"), true, true, nil, false)
		if streamFetched(&c, ar, version, respFrame, rand.New(rand.NewPCG(seed, 0))) != nil {
			return
		}
		c.Answered(ar, h, nil, time.Unix(1, 0))
		whole := exchange(t, &c, frame, respFrame, false)
		if !reflect.DeepEqual(ar.Request(), whole.Request()) {
			t.Fatalf("streamed, the event is\n%+v\nread whole\n%+v", ar.Request(), whole.Request())
		}
	})
}
