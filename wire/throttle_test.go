package wire

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceThrottleOffset(t *testing.T) {
	for v := int16(1); v <= 12; v++ {
		if _, ok := MaxVersion(produceKey); !ok {
			t.Fatal("no produce version")
		}
		if max, _ := MaxVersion(produceKey); v > max {
			break
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = v
		resp.ThrottleMillis = 0x01020304
		tp := kmsg.NewProduceResponseTopic()
		tp.Topic = "t"
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = 3
		p.ErrorMessage = kmsg.StringPtr("m")
		tp.Partitions = append(tp.Partitions, p)
		resp.Topics = append(resp.Topics, tp)
		if v >= 10 {
			resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: 1, Host: "h", Port: 9})
		}
		body := resp.AppendTo(nil)
		off, err := ProduceThrottleOffset(v, body)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if got := binary.BigEndian.Uint32(body[off:]); got != 0x01020304 {
			t.Fatalf("v%d: throttle at %d reads %#x", v, off, got)
		}
		if _, err := ProduceThrottleOffset(v, body[:len(body)-1]); err == nil {
			t.Fatalf("v%d: a truncated body scanned", v)
		}
	}
	if _, err := ProduceThrottleOffset(0, nil); err == nil {
		t.Fatal("v0 has a throttle")
	}
}

// TestThrottleOffsetMatchesKmsg: for every response kmsg knows, at every
// version, ThrottleOffset finds throttle_time_ms where kmsg encodes it
// and claims it nowhere else. A response whose field follows others must
// give ErrCannotScan, never a wrong offset.
func TestThrottleOffsetMatchesKmsg(t *testing.T) {
	const mark = 0x7eadbeef
	found := 0
	for key := int16(0); key < 200; key++ {
		if key == produceKey {
			continue // TestProduceThrottleOffset
		}
		probe := kmsg.ResponseForKey(key)
		if probe == nil {
			continue
		}
		for v := int16(0); v <= probe.MaxVersion(); v++ {
			resp := kmsg.ResponseForKey(key)
			resp.SetVersion(v)
			th, ok := resp.(interface{ SetThrottle(int32) })
			if ok {
				th.SetThrottle(mark)
			}
			body := resp.AppendTo(nil)
			atStart := ok && len(body) >= 4 && binary.BigEndian.Uint32(body) == mark
			off, err := ThrottleOffset(key, v, body)
			switch {
			case err == nil && !atStart:
				t.Errorf("%s v%d: offset %d, but kmsg puts no throttle_time_ms first", kmsg.NameForKey(key), v, off)
			case err == nil && off != 0:
				t.Errorf("%s v%d: offset %d, want 0", kmsg.NameForKey(key), v, off)
			case err != nil && atStart:
				t.Errorf("%s v%d: %v, but kmsg puts throttle_time_ms first", kmsg.NameForKey(key), v, err)
			case err == nil:
				found++
			}
		}
	}
	if found < 100 {
		t.Fatalf("throttle_time_ms found in %d responses: the table is nearly empty", found)
	}
	if _, err := ThrottleOffset(1, 11, []byte{0, 0}); err == nil {
		t.Fatal("a Fetch body of 2 bytes: an offset")
	}
}
