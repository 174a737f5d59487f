package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestAcksZeroFailureClosesConnection sends an acks=0 produce to a topic
// that does not exist, followed by a metadata request. In None mode the
// proxy forwards the write with acks=1, learns it failed, and closes the
// connection as Kafka does for a failed acks=0 write; the metadata request
// behind it is never answered.
func TestAcksZeroFailureClosesConnection(t *testing.T) {
	kc := newCluster(t)
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t"))
	prod := produceV9("does-not-exist", 0, oneRecordBatch())
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 1
	frames := fmtr.AppendRequest(nil, prod, 1)
	frames = append(frames, fmtr.AppendRequest(nil, meta, 2)...) // AppendRequest writes the length at dst[0:4]
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("read %d bytes (%v); want the connection closed with no response", n, err)
	}
	c.Close()
	p.log.waitFor(t, "acks=0 produce failed")
}

// oneRecordBatch returns a v2 record batch holding one record.
func oneRecordBatch() []byte { return recordBatch([]byte("v")) }

// recordBatch returns a v2 record batch holding one record of value.
func recordBatch(value []byte) []byte {
	rec := kmsg.Record{Value: value}
	recBytes := rec.AppendTo(nil)
	b := kmsg.RecordBatch{
		Magic:                2,
		LastOffsetDelta:      0,
		FirstTimestamp:       time.Now().UnixMilli(),
		MaxTimestamp:         time.Now().UnixMilli(),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              recBytes,
		PartitionLeaderEpoch: -1,
	}
	raw := b.AppendTo(nil)
	// Length covers everything after the length field; CRC covers
	// everything after the CRC field.
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	crc := crc32c(raw[21:])
	b.CRC = int32(crc)
	return b.AppendTo(nil)
}
