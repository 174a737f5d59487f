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
