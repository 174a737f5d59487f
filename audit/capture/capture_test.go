package capture_test

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/wire"
)

// batch is a record batch (v2) of n records and size bytes at offset
// base, as far as its header says.
func batch(base int64, n int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	return b
}

// frames are a request's frame and its answer's, both length prefixed.
func frames(req kmsg.Request, resp kmsg.Response, clientID string) (frame, respFrame []byte) {
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 9)
	respFrame = binary.BigEndian.AppendUint32(make([]byte, 4), 9)
	if req.IsFlexible() {
		respFrame = append(respFrame, 0)
	}
	respFrame = resp.AppendTo(respFrame)
	binary.BigEndian.PutUint32(respFrame, uint32(len(respFrame)-4))
	return frame, respFrame
}

// exchange is the event of frame answered by respFrame, as a connection
// builds it: the whole request read, or its head alone (unread).
func exchange(t testing.TB, c *capture.Conn, frame, respFrame []byte, unread bool) (*capture.Req, wire.RequestHeader) {
	t.Helper()
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	id := []byte(nil)
	if n := int(binary.BigEndian.Uint16(frame[12:])); n > 0 {
		id = frame[14 : 14+n]
	}
	ar := c.Read(h, frame, id, !unread, true, nil, false)
	c.Answered(ar, h, respFrame, time.Unix(1, 0))
	return ar, h
}

// topicEvent is how an event names topic ti of the exchanges here: by
// name, or by id from the versions that carry ids alone.
func topicEvent(name string, id [16]byte, version, idsFrom int16) string {
	if version >= idsFrom {
		return base64.RawURLEncoding.EncodeToString(id[:])
	}
	return name
}

// produceExchange is a Produce of 12 partitions of three topics, each a
// batch of 10+partition records, and its answer, partition p of topic t
// at base offset 1000*t+100*p.
func produceExchange(version int16) (frame, respFrame []byte, req *kmsg.ProduceRequest) {
	req = kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = -1, 5000
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(version)
	for ti, name := range []string{"orders", "payments", "audit-me"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = name, [16]byte{byte(ti + 1), 7}
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for pi := range int32(4) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = pi, batch(0, 10+pi, 200)
			rt.Partitions = append(rt.Partitions, rp)
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = pi, 1000*int64(ti)+100*int64(pi)
			st.Partitions = append(st.Partitions, sp)
		}
		req.Topics = append(req.Topics, rt)
		resp.Topics = append(resp.Topics, st)
	}
	frame, respFrame = frames(req, resp, "producer-1")
	return frame, respFrame, req
}

// TestProduceEvent: a Produce's event names its topics and partitions
// with the records and bytes its batches' headers say and the offsets its
// answer gives; read from its head alone (its body went upstream
// unread), the answer's partitions and offsets, no records. Recorded
// again on the same connection, the event is the same and, its state
// pooled, allocates nothing.
func TestProduceEvent(t *testing.T) {
	for _, version := range []int16{11, 13} {
		for _, unread := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/unread=%v", version, unread), func(t *testing.T) {
				frame, respFrame, req := produceExchange(version)
				var c capture.Conn
				for range 2 {
					ar, _ := exchange(t, &c, frame, respFrame, unread)
					q := ar.Request()
					if q.APIKey != 0 || q.APIVersion != version || q.ClientID != "producer-1" || q.Time != time.Unix(1, 0) || len(q.Resources) != 3 {
						t.Fatalf("produce recorded as %+v", q)
					}
					for ti, res := range q.Resources {
						name := topicEvent(req.Topics[ti].Topic, req.Topics[ti].TopicID, version, 13)
						if res.Type != "Topic" || res.Name != name || res.Operation != "Write" || len(res.Partitions) != 4 {
							t.Fatalf("topic %d recorded as %+v, want %s", ti, res, name)
						}
						for pi, part := range res.Partitions {
							first := 1000*int64(ti) + 100*int64(pi)
							last, records, bytes := first+9+int64(pi), 10+int64(pi), int64(200)
							if unread {
								last, records, bytes = audit.NoOffset, 0, 0
							}
							if part.Partition != int32(pi) || part.FirstOffset != first || part.LastOffset != last || part.Records != records ||
								part.Bytes != bytes || part.Committed != audit.NoOffset || part.FetchOffset != audit.NoOffset {
								t.Fatalf("%s/%d recorded as %+v", name, pi, part)
							}
						}
					}
					capture.Put(ar)
				}
				if raceEnabled {
					return
				}
				if n := testing.AllocsPerRun(100, func() {
					ar, _ := exchange(t, &c, frame, respFrame, unread)
					capture.Put(ar)
				}); n != 0 {
					t.Errorf("a Produce's event allocates %v times", n)
				}
			})
		}
	}
}

// TestFetchEvent: a Fetch's event names the partitions asked for with
// their fetch offsets and, from the batches' headers in its answer, the
// records, bytes and offsets returned, allocating nothing once its state
// is pooled.
func TestFetchEvent(t *testing.T) {
	for _, version := range []int16{12, 13} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(version)
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes = -1, 500, 1
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(version)
			for ti, name := range []string{"orders", "payments"} {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = name, [16]byte{byte(ti + 1), 7}
				st := kmsg.NewFetchResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for pi := range int32(2) {
					first := 1000*int64(ti) + 100*int64(pi)
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = pi, first+3, 1<<20
					rt.Partitions = append(rt.Partitions, rp)
					sp := kmsg.NewFetchResponseTopicPartition()
					sp.Partition, sp.RecordBatches = pi, append(batch(first, 10, 100), batch(first+10, 5, 100)...)
					st.Partitions = append(st.Partitions, sp)
				}
				req.Topics = append(req.Topics, rt)
				resp.Topics = append(resp.Topics, st)
			}
			frame, respFrame := frames(req, resp, "consumer-1")
			var c capture.Conn
			ar, _ := exchange(t, &c, frame, respFrame, false)
			q := ar.Request()
			if q.ClientID != "consumer-1" || len(q.Resources) != 2 {
				t.Fatalf("fetch recorded as %+v", q)
			}
			for ti, res := range q.Resources {
				name := topicEvent(req.Topics[ti].Topic, req.Topics[ti].TopicID, version, 13)
				if res.Name != name || res.Operation != "Read" || len(res.Partitions) != 2 {
					t.Fatalf("topic %d recorded as %+v, want %s", ti, res, name)
				}
				for pi, part := range res.Partitions {
					first := 1000*int64(ti) + 100*int64(pi)
					if part.Partition != int32(pi) || part.FetchOffset != first+3 || part.FirstOffset != first || part.LastOffset != first+14 ||
						part.Records != 15 || part.Bytes != 200 || part.Committed != audit.NoOffset {
						t.Fatalf("%s/%d recorded as %+v", name, pi, part)
					}
				}
			}
			capture.Put(ar)
			if raceEnabled {
				return
			}
			if n := testing.AllocsPerRun(100, func() {
				ar, _ := exchange(t, &c, frame, respFrame, false)
				capture.Put(ar)
			}); n != 0 {
				t.Errorf("a Fetch's event allocates %v times", n)
			}
		})
	}
}

// TestStreamedProduce: a Produce whose body streamed is recorded with the
// partitions counted as they passed, their records where one batch's
// header was in view; without them, with its answer's partitions alone.
func TestStreamedProduce(t *testing.T) {
	frame, respFrame, _ := produceExchange(9)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	var s wire.ProduceScan
	if err := s.Reset(frame[h.Body:], h.Version); err != nil {
		t.Fatal(err)
	}
	var steps []wire.StreamStep
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		steps = append(steps, wire.StreamStep{Found: true, Partition: p, Records: int64(len(p.Records))})
	}
	for _, counted := range []bool{false, true} {
		var c capture.Conn
		var st capture.Stream
		head := frame[:h.Body]
		ar := c.Read(h, head, []byte("producer-1"), false, true, nil, true)
		st.Begin(ar)
		if !st.On() {
			t.Fatal("a stream begun for an audited request counts nothing")
		}
		if counted {
			for i, step := range steps {
				rec := step.Partition.Records
				if i == 0 {
					rec = rec[:20] // the batch's header not in view
				}
				c.Count(&st, step, rec)
			}
			c.Streamed(&st)
		}
		if st.On() != !counted {
			t.Fatalf("counted %v: the stream counts on: %v", counted, st.On())
		}
		c.Answered(ar, h, respFrame, time.Unix(1, 0))
		q := ar.Request()
		if len(q.Resources) != 3 {
			t.Fatalf("counted %v: recorded as %+v", counted, q)
		}
		for ti, res := range q.Resources {
			for pi, part := range res.Partitions {
				records, bytes := 10+int64(pi), int64(200)
				switch {
				case !counted:
					records, bytes = 0, 0
				case ti == 0 && pi == 0:
					records = 0
				}
				first := 1000*int64(ti) + 100*int64(pi)
				last := audit.NoOffset
				if records > 0 {
					last = first + records - 1
				}
				if part.Records != records || part.Bytes != bytes || part.FirstOffset != first || part.LastOffset != last {
					t.Errorf("counted %v: %s/%d recorded as %+v", counted, res.Name, pi, part)
				}
			}
		}
		capture.Put(ar)
	}
}

// session is a client authentication's session as the SASL audit reads it.
type session struct{ principal, claimed string }

func (s *session) Request(wire.RequestHeader, []byte) clientauth.Verdict { return clientauth.Verdict{} }
func (s *session) Token([]byte) clientauth.Verdict                       { return clientauth.Verdict{} }
func (s *session) Principal() string                                     { return s.principal }
func (s *session) Claimed() string                                       { return s.claimed }
func (s *session) CertRefused() error                                    { return nil }

func saslFrame(t *testing.T, req kmsg.Request) (wire.RequestHeader, []byte) {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 1)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	return h, frame
}

// TestSASLExchange: an exchange is recorded once, when it ends: a SCRAM
// success after its second SaslAuthenticate, a PLAIN refusal with whom
// the client claimed to be; any other request the client authentication
// refuses is a denial.
func TestSASLExchange(t *testing.T) {
	answer := clientauth.Verdict{Action: clientauth.Answer}
	s := &session{}
	var x capture.SASL

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	hh, hf := saslFrame(t, hs)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version = 2
	ah, af := saslFrame(t, auth)
	if a, denied := x.Request(hh, hf, answer, s); a != nil || denied != 0 {
		t.Fatalf("a handshake recorded as %+v, %d", a, denied)
	}
	if a, _ := x.Request(ah, af, answer, s); a != nil {
		t.Fatalf("SCRAM's first message recorded as %+v", a)
	}
	s.principal = "User:alice"
	a, _ := x.Request(ah, af, answer, s)
	if a == nil || a.Principal != "User:alice" || a.Mechanism != "SCRAM-SHA-256" || a.APIKey != ah.Key || a.APIVersion != 2 || a.ErrorCode != 0 {
		t.Fatalf("SCRAM's success recorded as %+v", a)
	}
	if a, _ := x.Request(ah, af, answer, s); a != nil {
		t.Fatalf("an answer after the exchange ended recorded as %+v", a)
	}

	hs.Mechanism = "PLAIN"
	hh, hf = saslFrame(t, hs)
	s.claimed = "User:mallory"
	if a, _ := x.Request(hh, hf, answer, s); a != nil {
		t.Fatalf("a handshake recorded as %+v", a)
	}
	failed := clientauth.Verdict{Action: clientauth.AnswerThenClose, Err: errors.New("PLAIN: wrong password")}
	a, _ = x.Request(ah, af, failed, s)
	if a == nil || a.Principal != "" || a.Claimed != "User:mallory" || a.Reason != "PLAIN: wrong password" || a.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("PLAIN's refusal recorded as %+v", a)
	}

	mh, mf := saslFrame(t, kmsg.NewPtrMetadataRequest())
	closed := clientauth.Verdict{Action: clientauth.Close, Err: fmt.Errorf("%w: Metadata", clientauth.ErrIllegalState)}
	if a, denied := x.Request(mh, mf, closed, nil); a != nil || denied != kerr.IllegalSaslState.Code {
		t.Fatalf("a request refused before authentication recorded as %+v, %d", a, denied)
	}
	if a, denied := x.Request(mh, mf, answer, nil); a != nil || denied != 0 {
		t.Fatalf("a request let through recorded as %+v, %d", a, denied)
	}
}
