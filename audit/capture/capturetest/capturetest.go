// Package capturetest holds the Kafka exchanges the audit's tests record,
// in audit/capture and through the proxy, and what their events must say.
package capturetest

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
)

// Batch is a record batch (v2) of n records and size bytes, as far as its
// header says.
func Batch(n int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	return b
}

// Frames are req's frame and resp's, both length prefixed, correlation
// id 9.
func Frames(req kmsg.Request, resp kmsg.Response, clientID string) (frame, respFrame []byte) {
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 9)
	respFrame = binary.BigEndian.AppendUint32(make([]byte, 4), 9)
	if req.IsFlexible() {
		respFrame = append(respFrame, 0)
	}
	respFrame = resp.AppendTo(respFrame)
	binary.BigEndian.PutUint32(respFrame, uint32(len(respFrame)-4))
	return frame, respFrame
}

// topics are the three topics of the exchanges, ids {1, 7}, {2, 7} and
// {3, 7}.
var topics = []string{"orders", "payments", "audit-me"}

// eventName is how an event names a topic of req: by name, or by its id
// in the versions that carry ids alone (Produce v13 and Fetch v13 on).
func eventName(name string, id [16]byte, version int16) string {
	if version >= 13 {
		return base64.RawURLEncoding.EncodeToString(id[:])
	}
	return name
}

// Produce is a Produce of client "producer-1" to 12 partitions of three
// topics, partition p a batch of 10+p records in 200 bytes, and its
// answer: partition p of topic t written at 1000*t+100*p.
func Produce(version int16) (frame, respFrame []byte, req *kmsg.ProduceRequest) {
	req = kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = -1, 5000
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(version)
	for ti, name := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = name, [16]byte{byte(ti + 1), 7}
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for pi := range int32(4) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = pi, Batch(10+pi, 200)
			rt.Partitions = append(rt.Partitions, rp)
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = pi, 1000*int64(ti)+100*int64(pi)
			st.Partitions = append(st.Partitions, sp)
		}
		req.Topics = append(req.Topics, rt)
		resp.Topics = append(resp.Topics, st)
	}
	frame, respFrame = Frames(req, resp, "producer-1")
	return frame, respFrame, req
}

// CheckProduce says how q, the event of Produce's exchange at req's
// version, is not what the request and its answer said; nil when it is.
// unread: the request's body went upstream unread, so that its topics
// and partitions are its answer's, their records not known.
func CheckProduce(q *audit.Request, req *kmsg.ProduceRequest, unread bool) error {
	if q.ClientID != "producer-1" || len(q.Resources) != 3 {
		return fmt.Errorf("produce (unread %v) recorded as %+v", unread, q)
	}
	for ti, res := range q.Resources {
		name := eventName(req.Topics[ti].Topic, req.Topics[ti].TopicID, req.Version)
		if res.Name != name || res.Operation != "Write" || len(res.Partitions) != 4 {
			return fmt.Errorf("topic %d (unread %v) recorded as %+v, want %s", ti, unread, res, name)
		}
		for pi, part := range res.Partitions {
			first := 1000*int64(ti) + 100*int64(pi)
			last, records, bytes := first+9+int64(pi), 10+int64(pi), int64(200)
			if unread {
				last, records, bytes = audit.NoOffset, 0, 0
			}
			if part.Partition != int32(pi) || part.FirstOffset != first || part.LastOffset != last || part.Records != records || part.Bytes != bytes {
				return fmt.Errorf("topic %s partition %d (unread %v) recorded as %+v", name, pi, unread, part)
			}
		}
	}
	return nil
}

// Fetch is a Fetch of client "consumer-1" of 12 partitions of three
// topics and its answer, each partition returning two batches of size
// bytes: the first at offset 1000*topic+100*partition holding 10
// records, the second 10 further on holding 5. Each partition is asked
// for from its first offset plus 3.
func Fetch(version int16, size int) (frame, respFrame []byte, req *kmsg.FetchRequest) {
	req = kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes = -1, 500, 1
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	for ti, name := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = name, [16]byte{byte(ti + 1), 7}
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for pi := range int32(4) {
			first := 1000*int64(ti) + 100*int64(pi)
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = pi, first+3, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			a, b := Batch(10, size), Batch(5, size)
			binary.BigEndian.PutUint64(a, uint64(first))
			binary.BigEndian.PutUint32(a[23:], 9)
			binary.BigEndian.PutUint64(b, uint64(first+10))
			binary.BigEndian.PutUint32(b[23:], 4)
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.HighWatermark, sp.RecordBatches = pi, first+15, append(a, b...)
			st.Partitions = append(st.Partitions, sp)
		}
		req.Topics = append(req.Topics, rt)
		resp.Topics = append(resp.Topics, st)
	}
	frame, respFrame = Frames(req, resp, "consumer-1")
	return frame, respFrame, req
}

// CheckFetch says how q, the event of Fetch's exchange with batches of
// size bytes at req's version, is not what the request asked and its
// answer returned; nil when it is.
func CheckFetch(q *audit.Request, req *kmsg.FetchRequest, size int) error {
	if q.ClientID != "consumer-1" || len(q.Resources) != 3 {
		return fmt.Errorf("fetch recorded as %+v", q)
	}
	for ti, res := range q.Resources {
		name := eventName(req.Topics[ti].Topic, req.Topics[ti].TopicID, req.Version)
		if res.Name != name || res.Operation != "Read" || len(res.Partitions) != 4 {
			return fmt.Errorf("topic %d recorded as %+v, want %s", ti, res, name)
		}
		for pi, part := range res.Partitions {
			first := 1000*int64(ti) + 100*int64(pi)
			if part.Partition != int32(pi) || part.FetchOffset != first+3 || part.FirstOffset != first || part.LastOffset != first+14 ||
				part.Records != 15 || part.Bytes != 2*int64(size) || part.Committed != audit.NoOffset {
				return fmt.Errorf("topic %s partition %d recorded as %+v", name, pi, part)
			}
		}
	}
	return nil
}
