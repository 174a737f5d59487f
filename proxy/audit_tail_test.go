package proxy_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// TestAuditStreamedFetchBadTail: behind a proxy recording the audit
// trail request by request (connection and none mode), a backend answers
// a Fetch (v12, v13, v16) with about 200 KiB of record batches over three
// partitions, so that the answer is streamed through a walk, but cuts the
// last byte of its tag section (the frame's length says so), which kmsg
// cannot read. Its client's connection ends without the answer delivered
// whole, and the trail records that Fetch as a request its client got no
// answer to (NETWORK_EXCEPTION), nothing counted of what it returned:
// read whole, kmsg could not read it; streamed, it broke off before its
// end, and the client read none of it. The proxy serves on: another connection's Fetch, answered in
// full, arrives byte for byte as sent and its event counts every
// partition's records.
func TestAuditStreamedFetchBadTail(t *testing.T) {
	const partitions, perBatch, valueSize = 3, 34, 2 << 10
	hostileID, fineID := [16]byte{0xba, 0xd}, [16]byte{0xf1, 0x4e}
	batch := countedBatch(perBatch, valueSize)
	for _, mode := range []config.Ordering{config.OrderingConnection, config.OrderingNone} {
		for _, version := range []int16{12, 13, 16} {
			t.Run(fmt.Sprintf("%s/v%d", mode, version), func(t *testing.T) {
				sent := make(chan []byte, 4)
				up := scriptedUpstreamFrames(t, 4, sent, func(_ int, h wire.RequestHeader, frame []byte) []byte {
					req := kmsg.NewPtrFetchRequest()
					req.Version = h.Version
					if err := req.ReadFrom(frame[h.Body:]); err != nil || len(req.Topics) != 1 {
						t.Errorf("the upstream got a Fetch it cannot read (%v): %+v", err, req)
						return nil
					}
					resp := kmsg.NewPtrFetchResponse()
					resp.Version = h.Version
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
					for p := range int32(partitions) {
						rp := kmsg.NewFetchResponseTopicPartition()
						rp.Partition, rp.HighWatermark, rp.RecordBatches = p, perBatch, batch
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
					body := resp.AppendTo(nil)
					if rt.Topic == "hostile" || rt.TopicID == hostileID {
						// The response's tag section, its last byte, cut.
						body = body[:len(body)-1]
					}
					return body
				})
				m := metrics.New()
				p, stop := auditTrailProxyAt(t, []string{up}, mode, config.AuditDataPathRequest, nil, proxy.WithMetrics(m))
				fetch := func(corr int32, topic string, id [16]byte) (net.Conn, *wire.Buf, error) {
					c := dialClient(t, p.Addr(), nil)
					req := kmsg.NewPtrFetchRequest()
					req.Version, req.MaxBytes = version, 1<<20
					ft := kmsg.NewFetchRequestTopic()
					ft.Topic, ft.TopicID = topic, id
					for p := range int32(partitions) {
						fp := kmsg.NewFetchRequestTopicPartition()
						fp.Partition, fp.PartitionMaxBytes = p, 1<<20
						ft.Partitions = append(ft.Partitions, fp)
					}
					req.Topics = append(req.Topics, ft)
					if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
						t.Fatal(err)
					}
					var lb [4]byte
					buf, err := wire.ReadFrame(c, &lb, wire.MinResponseFrame, 1<<30)
					return c, buf, err
				}

				bad, buf, err := fetch(1, "hostile", hostileID)
				upstream := <-sent
				var ne net.Error
				switch {
				case err == nil:
					t.Errorf("an answer of %d bytes whose tag section kmsg cannot read was delivered whole (the upstream sent %d)", len(buf.B)-4, len(upstream))
					wire.Put(buf)
				case errors.As(err, &ne) && ne.Timeout():
					t.Errorf("the connection of the answer kmsg cannot read stayed open: %v", err)
				}
				bad.Close()

				good, buf, err := fetch(2, "fine", fineID)
				if err != nil {
					t.Fatalf("a well-formed answer after a malformed one: %v", err)
				}
				upstream = <-sent
				if got := wire.ResponseCorrelation(buf.B); got != 2 {
					t.Fatalf("answer to %d, want 2", got)
				}
				off, err := wire.ResponseBody(buf.B, true)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.B[off:], upstream) {
					t.Fatalf("the well-formed answer, %d bytes, differs from the %d the upstream sent", len(buf.B)-off, len(upstream))
				}
				wire.Put(buf)
				good.Close()
				if n := streamedCounter(t, m, metrics.StreamedResponseScanned, 1); n < 1 {
					t.Fatalf("%v answers streamed through a walk", n)
				}

				named := func(name, topic string, id [16]byte) bool {
					return name == topic || name == base64.RawURLEncoding.EncodeToString(id[:])
				}
				var fine, hostile int
				// stop waits for every connection to end.
				for _, e := range stop() {
					if e.APIKey != "Fetch" {
						continue
					}
					for _, res := range e.Resources {
						switch {
						case named(res.Name, "hostile", hostileID):
							hostile++
							if e.ErrorCode != capture.ErrNetwork || res.ErrorCode != capture.ErrNetwork || e.Reason != capture.ReasonUnanswered || len(res.Partitions) != partitions {
								t.Errorf("the event of the Fetch whose answer kmsg cannot read: %+v", e)
							}
							for _, part := range res.Partitions {
								if part.Records != 0 || part.Bytes != 0 || part.First != nil || part.Last != nil || part.Fetch == nil {
									t.Errorf("the Fetch whose answer kmsg cannot read: partition %+v counts what its client never read", part)
								}
							}
						case named(res.Name, "fine", fineID):
							fine++
							if len(res.Partitions) != partitions {
								t.Errorf("the well-formed answer's event: %+v", e)
								continue
							}
							for _, part := range res.Partitions {
								if part.ErrorCode != 0 || part.Records != perBatch || part.Bytes != int64(len(batch)) {
									t.Errorf("the well-formed answer's partition %d counted %d records, %d bytes, code %d; sent %d, %d bytes",
										part.Partition, part.Records, part.Bytes, part.ErrorCode, perBatch, len(batch))
								}
							}
						default:
							t.Errorf("an event for a Fetch of no topic asked: %+v", e)
						}
					}
				}
				if fine != 1 || hostile != 1 {
					t.Errorf("%d events for the well-formed Fetch and %d for the malformed one, want 1 and 1", fine, hostile)
				}
				// Ended by the walk: the answer was streamed.
				if line := logLine(p.log.String(), "tag section"); !strings.Contains(line, "a streamed") {
					t.Errorf("the connection of the answer kmsg cannot read did not end for its tag section in a walk: %q", line)
				}
			})
		}
	}
}
