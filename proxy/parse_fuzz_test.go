package proxy

import (
	"bytes"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/wire"
)

// FuzzClientStream runs arbitrary client bytes, split at any point, through
// the client side of the forwarding path: framing, header parsing,
// classification (Produce acks and partitions, commits, ApiVersions) and
// sequencing, in both modes. Nothing may panic, and every accepted request
// must be sequenced with its frame intact.
func FuzzClientStream(f *testing.F) {
	id := "fuzz"
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
	add := func(req kmsg.Request) {
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f.Add(fmtr.AppendRequest(nil, req, 1), uint(7), false)
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 0
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{1, 2, 3}
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	add(produce)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	add(commit)
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.Group = "g"
	add(txn)
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClusterID = kmsg.StringPtr("c")
	av.NodeID = 3
	add(av)
	f.Fuzz(func(t *testing.T, data []byte, split uint, connectionMode bool) {
		cfg := config.Default()
		p := &Proxy{cfg: cfg}
		c := &conn{p: p, cfg: &cfg, node: -1}
		if connectionMode {
			c.mode = ordering.Connection
		}
		c.seq = ordering.New[*request](c.mode, 64, 1<<20)
		at := int(split % uint(len(data)+1))
		r := io.MultiReader(bytes.NewReader(data[:at]), bytes.NewReader(data[at:]))
		var lb [4]byte
		for {
			buf, err := wire.ReadFrame(r, &lb, wire.MinRequestFrame, 1<<16)
			if err != nil {
				return
			}
			req, err := c.parseRequest(buf)
			if err != nil {
				wire.Put(buf)
				return
			}
			if req.local == nil && (req.frame == nil || len(req.frame.B) < wire.MinRequestFrame+4) {
				t.Fatalf("accepted request lost its frame")
			}
			if req.noResp && c.mode == ordering.Connection {
				putRequest(req)
				continue
			}
			seq := c.seq.Push(req.ord, req)
			if got, _ := c.seq.Get(seq); got != req {
				t.Fatal("sequencer lost the request")
			}
		}
	})
}
