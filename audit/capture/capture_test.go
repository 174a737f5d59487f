package capture_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/audit/capture/capturetest"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/wire"
)

// exchange is the event of frame answered by respFrame, as a connection
// builds it: the whole request read, or its head alone (unread).
func exchange(t testing.TB, c *capture.Conn, frame, respFrame []byte, unread bool) *capture.Req {
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
	return ar
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
				frame, respFrame, req := capturetest.Produce(version)
				var c capture.Conn
				for range 2 {
					ar := exchange(t, &c, frame, respFrame, unread)
					q := ar.Request()
					if q.APIKey != 0 || q.APIVersion != version || q.Time != time.Unix(1, 0) {
						t.Fatalf("produce recorded as %+v", q)
					}
					if err := capturetest.CheckProduce(q, req, unread); err != nil {
						t.Fatal(err)
					}
					capture.Put(ar)
				}
				if raceEnabled {
					return
				}
				if n := testing.AllocsPerRun(100, func() {
					ar := exchange(t, &c, frame, respFrame, unread)
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
			frame, respFrame, req := capturetest.Fetch(version, 100)
			var c capture.Conn
			ar := exchange(t, &c, frame, respFrame, false)
			if err := capturetest.CheckFetch(ar.Request(), req, 100); err != nil {
				t.Fatal(err)
			}
			capture.Put(ar)
			if raceEnabled {
				return
			}
			if n := testing.AllocsPerRun(100, func() {
				ar := exchange(t, &c, frame, respFrame, false)
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
	frame, respFrame, _ := capturetest.Produce(9)
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
