// Package capture reads what the audit trail records of a client's
// requests from the requests and their answers, for the proxy, which
// hands it each request as it is read and each answer as it is delivered,
// and gives the audit.Request built to its audit.Recorder. It knows
// nothing of connections: what it keeps per connection (Conn) is the
// scanners, buffers and names that make a request's event cheap.
//
// What a request's event holds is read from the request on the client
// reader (its frame is gone once written upstream) and from the response
// at delivery. The data path stays cheap in summary mode: a Produce's
// partitions, records and bytes come from the scan the proxy already knows
// (wire.ProduceScan, and the record batches' headers) and its response is
// not decoded, so a summary has no Produce offsets; per-request auditing
// scans the Produce response for the offsets and errors (wire.ProducedScan).
// A Produce streamed is counted as its partitions pass (stream.go); an
// acks=0 one in Connection mode, which nothing answers, is recorded once
// it is written upstream, with no offsets.
// A Fetch's partitions and fetch offsets are scanned from its request
// (wire.FetchScan) and what it returned from its response (wire.FetchedScan,
// the records skipped by their lengths, the offsets read from the record
// batches' headers), in both modes, decoding neither; a response streamed
// to the client, never whole in memory, is counted as it passes
// (Fetched, stream.go). An
// event's request state is pooled with its slices, and the topic names and
// client id a connection repeats are kept per connection, so that an
// audited Produce allocates little beyond its encoded event.
package capture

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/wire"
)

// Conn is what a connection keeps to build its requests' events. Its zero
// value is ready; it is not copied once used.
type Conn struct {
	scan  wire.ProduceScan // client reader only
	fetch wire.FetchScan   // client reader only
	// clientID and names are the client id and topic names last seen in
	// requests, so that a connection repeating them allocates them once;
	// client reader only.
	clientID string
	names    topicNames
	// IDs, if set, names the topics a request names by id (TopicIDs).
	IDs *TopicIDs

	// On the goroutine delivering the responses: the scan of a Produce
	// response, the partitions it found, and the names of topics the
	// response adds.
	produced     wire.ProducedScan
	producedBuf  []wire.Produced
	fetched      wire.FetchedScan
	fetchedBuf   []wire.Fetched
	deliverNames topicNames
	// renamed: the names rename gave last, while IDs is at renamedGen.
	renamed     [4]renamedTopic
	renamedGen  uint64
	renamedNext int

	// mu guards queued, requests answered on a goroutine other clients
	// share, waiting for the client reader to record them, and a
	// streamed request's counted partitions (stream.go).
	mu     sync.Mutex
	queued []*Req
}

// topicNames keeps the last few topic names a connection used, by name or
// by id, so that a name is allocated once rather than per request.
type topicNames struct {
	e    [8]topicNameEntry
	n    int // entries in use
	next int // the entry replaced next once all are in use
}

type topicNameEntry struct {
	id   [16]byte
	name string
}

// get returns the name of the topic named name or identified by id, as
// topicName does.
func (t *topicNames) get(name []byte, id [16]byte) string {
	if len(name) == 0 && id == [16]byte{} {
		return ""
	}
	for i := range t.e[:t.n] {
		e := &t.e[i]
		if len(name) > 0 && e.id == [16]byte{} && e.name == string(name) || len(name) == 0 && e.id == id {
			return e.name
		}
	}
	e := topicNameEntry{name: topicName(string(name), id)}
	if len(name) == 0 {
		e.id = id
	}
	if t.n < len(t.e) {
		t.e[t.n] = e
		t.n++
	} else {
		t.e[t.next] = e
		t.next = (t.next + 1) % len(t.e)
	}
	return e.name
}

// Req is what a request's event needs from the request, taken on the
// client reader before its frame goes, and then from its answer. It is
// pooled once recorded (Put), its slices with it.
type Req struct {
	req  audit.Request
	kreq kmsg.Request // decoded: administrative requests, commits, EndTxn
	// perRequest: the data path is recorded request by request, so a
	// Produce's response is scanned for its offsets.
	perRequest bool
	// refused is what the authorization left out of the request
	// forwarded: its event is a denial, those resources denied.
	refused []authz.Refusal

	// The backing arrays of req.Resources and of their partitions, kept
	// for the next request; starts is where each resource's partitions
	// begin in parts while they are read.
	resources []audit.Resource
	parts     []audit.Partition
	starts    []int

	// fetch holds a Fetch's partitions, each with its topic's name, as the
	// request and then the response name them (and those of a Produce that
	// went upstream unread, as its response names them, or as they
	// streamed past); they become resources once the response is read
	// (groupResources).
	fetch []fetchPart
	// streams: a Produce whose body streams in None mode, its partitions
	// counted on the way; counted (under Conn.mu) once they are in
	// fetch (stream.go).
	streams, counted bool

	// On the goroutine delivering the answer (index.go): index finds the
	// partitions the answer names, last is the Produce partition found
	// last, added counts the partitions the answer added; topics and
	// ords group the partitions of fetch by topic (groupResources).
	index  partIndex
	last   struct{ res, part int }
	added  int
	full   bool // the request's partitions were omitted past the bound
	topics map[string]int32
	ords   []int32
	// work counts the entries looked at to place the answer's
	// partitions and group them, so that tests bound an answer's cost by
	// its size.
	work int
}

// Request is the request's event as the Recorder is given it, once the
// answer is in (Answered).
func (ar *Req) Request() *audit.Request { return &ar.req }

// fetchPart is one partition of a Fetch's event, before it is grouped
// under its topic.
type fetchPart struct {
	topic string
	audit.Partition
}

var reqPool = sync.Pool{New: func() any { return new(Req) }}

// keepParts bounds the partitions a pooled Req keeps room for: a request
// wider than that gives its arrays back.
const keepParts = 256

func getReq() *Req {
	ar := reqPool.Get().(*Req)
	ar.req = audit.Request{Resources: ar.resources[:0]}
	ar.parts, ar.fetch = ar.parts[:0], ar.fetch[:0]
	ar.index.reset()
	ar.last, ar.added, ar.full, ar.work = struct{ res, part int }{0, -1}, 0, false, 0
	return ar
}

// Put pools ar once its event is recorded (Recorder.Request keeps nothing
// of it).
func Put(ar *Req) {
	if cap(ar.parts) > keepParts || cap(ar.resources) > keepParts || cap(ar.fetch) > keepParts || cap(ar.ords) > keepParts {
		return
	}
	clear(ar.fetch) // no topic name kept alive
	ar.resources = ar.req.Resources[:0]
	clear(ar.resources[:cap(ar.resources)]) // names and partitions not kept alive
	ar.req, ar.kreq, ar.perRequest, ar.refused = audit.Request{}, nil, false, nil
	ar.streams, ar.counted = false, false
	reqPool.Put(ar)
}

// haltCtx is the context of a connection's recording: it ends when halt
// closes, so that an event waiting for room in the queue gives up
// (counted by the queue) rather than outlive its connection.
type haltCtx struct {
	context.Context
	halt <-chan struct{}
}

func (a haltCtx) Done() <-chan struct{} { return a.halt }

func (a haltCtx) Err() error {
	select {
	case <-a.halt:
		return context.Canceled
	default:
		return nil
	}
}

// Context is a connection's recording context, done once halt closes; made
// once per connection: a context made per event would be an allocation
// per request.
func Context(halt <-chan struct{}) context.Context {
	return haltCtx{Context: context.Background(), halt: halt}
}

// Read starts the event of the request whose header is h, from frame
// (length prefix included): the whole request when whole, else its head
// alone, the body going upstream unread or streamed, recorded with what
// its response says. clientID is the client id within frame;
// dataPathRequest, the data path is recorded request by request; refused,
// what the authorization left out of the request forwarded; streams, a
// Produce whose partitions are counted as its body streams (Stream).
// Client reader.
func (c *Conn) Read(h wire.RequestHeader, frame, clientID []byte, whole, dataPathRequest bool, refused []authz.Refusal, streams bool) *Req {
	ar := getReq()
	ar.req.APIKey, ar.req.APIVersion, ar.req.ClientID = h.Key, h.Version, c.clientIDOf(clientID)
	switch key := kmsg.Key(h.Key); {
	case key == kmsg.Produce:
		// A denial is recorded on its own, never in a summary.
		ar.perRequest = dataPathRequest || len(refused) > 0
		if whole {
			c.produceResources(ar, frame[h.Body:], h.Version)
		}
	case key == kmsg.Fetch:
		// The partitions asked for and their fetch offsets, read in place;
		// the response adds what it returned (fillFetched).
		if whole {
			c.fetchRequest(ar, frame[h.Body:], h.Version)
		}
	case whole:
		kr := kmsg.RequestForKey(h.Key)
		if kr != nil {
			kr.SetVersion(h.Version)
			if kr.ReadFrom(frame[h.Body:]) == nil {
				ar.kreq = kr
			}
		}
	}
	ar.refused = refused
	ar.streams = streams
	return ar
}

// clientIDOf is the client id id, as a string: the last request's when
// the same, made anew otherwise.
func (c *Conn) clientIDOf(id []byte) string {
	if len(c.clientID) > 0 && string(id) == c.clientID {
		return c.clientID
	}
	c.clientID = string(id)
	return c.clientID
}

// Answered completes ar once its response (the frame the client got; nil
// when none) was delivered at now; on the goroutine delivering the
// responses.
func (c *Conn) Answered(ar *Req, h wire.RequestHeader, resp []byte, now time.Time) {
	ar.req.Time = now
	if ar.streams {
		c.streamedResources(ar)
	}
	if resp != nil {
		c.fillResponse(ar, resp, h)
	}
	if h.Key == int16(kmsg.Fetch) {
		groupResources(ar, "Read")
	}
	if namesByID(h) {
		c.rename(ar.req.Resources)
	}
	if len(ar.refused) > 0 {
		markRefused(&ar.req, ar.refused)
	}
}

// Unsent marks the partition of a Produce no answer comes for (acks=0)
// that was never sent upstream, named by topic (or, from v13, its id)
// and partition as the request named it: it carries code, the error a
// broker's answer would have given it, and no offsets, so that the event
// names it as not written. In a summary too, whose partitions otherwise
// come from the request alone. A partition the event does not list (its
// partitions omitted) is left. Before Answered, on the goroutine that
// calls it.
func (c *Conn) Unsent(ar *Req, topic string, id [16]byte, partition int32, code int16) {
	if p := ar.listedPartition(topicName(topic, id), partition); p != nil {
		p.ErrorCode = code
		p.FirstOffset, p.LastOffset = audit.NoOffset, audit.NoOffset
	}
}

// ErrNetwork is NETWORK_EXCEPTION, what a Kafka client makes of a
// connection that closed before its request was answered.
const ErrNetwork int16 = 13

// ReasonUnanswered is the reason of the event of a request the client
// never got an answer to.
const ReasonUnanswered = "the connection closed before the client was answered"

// Unanswered completes ar, which the client never got an answer to: its
// connection closed first (the client, the upstream or the proxy ended
// it, or the answer could not be written), at now. The request may have
// reached the upstream and been applied there; its event says what it
// asked, with the error the client saw, NETWORK_EXCEPTION, on the request
// and on each resource that had none (a summary keeps the resources'),
// and why. What only an answer tells (the offsets written, the records a
// Fetch returned, some of which a streamed answer may have counted
// before it broke off) is left out: the client read none of it. On the
// goroutine that calls Answered, or once every other has ended.
func (c *Conn) Unanswered(ar *Req, h wire.RequestHeader, now time.Time) {
	c.Answered(ar, h, nil, now)
	r := &ar.req
	if r.ErrorCode == 0 {
		r.ErrorCode = ErrNetwork
	}
	fetch := h.Key == int16(kmsg.Fetch)
	for i := range r.Resources {
		res := &r.Resources[i]
		if res.ErrorCode == 0 && res.Decision != audit.Deny {
			res.ErrorCode = ErrNetwork
		}
		for j := range res.Partitions {
			p := &res.Partitions[j]
			p.FirstOffset, p.LastOffset = audit.NoOffset, audit.NoOffset
			if fetch {
				p.ErrorCode, p.Records, p.Bytes = 0, 0, 0
			}
		}
	}
	r.Reason = ReasonUnanswered
}

// Queue keeps ar, answered on a goroutine other clients share, for the
// client reader to record (Queued).
func (c *Conn) Queue(ar *Req) {
	c.mu.Lock()
	c.queued = append(c.queued, ar)
	c.mu.Unlock()
}

// Queued takes the requests queued, in the order they were answered.
func (c *Conn) Queued() []*Req {
	c.mu.Lock()
	q := c.queued
	c.queued = nil
	c.mu.Unlock()
	return q
}

// Denial is the event of a request refused for its principal, with the
// error code the client gets and the resources refused, each denied.
func Denial(h wire.RequestHeader, clientID string, code int16, res []audit.Resource) audit.Request {
	for i := range res {
		res[i].Decision = audit.Deny
	}
	return audit.Request{APIKey: h.Key, APIVersion: h.Version, ClientID: clientID, Decision: audit.Deny, ErrorCode: code, Resources: res}
}

// produceResources sets ar's resources to a Produce's topics and
// partitions, with their records and bytes, from the scan the data path
// already uses: only the record batches' headers are read. Past
// maxEventParts partitions the rest are counted, not held: an event costs
// its connection bounded memory whatever the request names.
func (c *Conn) produceResources(ar *Req, body []byte, version int16) {
	s := &c.scan
	defer s.Reset(nil, 0) // the scan keeps no frame alive
	if s.Reset(body, version) != nil {
		return
	}
	out, starts := ar.req.Resources[:0], ar.starts[:0]
	var omitted int64
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		if len(ar.parts) >= maxEventParts {
			omitted++
			continue
		}
		if n := len(out); n == 0 || !sameTopic(out[n-1].Name, p.Topic, p.TopicID) {
			out = append(out, audit.Resource{Type: "Topic", Name: c.names.get(p.Topic, p.TopicID), Operation: "Write"})
			starts = append(starts, len(ar.parts))
		}
		ar.parts = append(ar.parts, audit.Partition{Partition: p.Partition, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: audit.NoOffset,
			Records: batchRecords(p.Records), Bytes: int64(len(p.Records))})
	}
	// The partitions are sliced once all are read, parts having grown;
	// each capped, so that a partition the response adds is appended to
	// a copy rather than over the next resource's.
	for i := range out {
		end := len(ar.parts)
		if i+1 < len(out) {
			end = starts[i+1]
		}
		out[i].Partitions = ar.parts[starts[i]:end:end]
	}
	ar.req.Resources, ar.resources, ar.starts = out, out, starts
	ar.omitListed(omitted)
}

// omitListed counts n partitions of ar's request past maxEventParts as
// omitted: the event holds no more, and the answer, which names them
// again, adds none.
func (ar *Req) omitListed(n int64) {
	if n > 0 {
		ar.req.PartitionsOmitted += n
		ar.added, ar.full = maxEventParts, true
	}
}

// fetchRequest lists the partitions a Fetch request asks for, with their
// fetch offsets, in ar.fetch. A request of an incremental fetch session
// lists only the partitions that changed; the response adds the others it
// returns. A body that does not scan leaves the list to the response.
// Past maxEventParts partitions the rest are counted, not held.
func (c *Conn) fetchRequest(ar *Req, body []byte, version int16) {
	s := &c.fetch
	defer s.Reset(nil, 0) // the scan keeps no frame alive
	s.Reset(body, version)
	name := ""
	var omitted int64
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		if len(ar.fetch) >= maxEventParts {
			omitted++
			continue
		}
		if n := len(ar.fetch); n == 0 || !sameTopic(name, p.Topic, p.TopicID) {
			name = c.names.get(p.Topic, p.TopicID)
		}
		ar.fetch = append(ar.fetch, fetchPart{topic: name, Partition: audit.Partition{Partition: p.Partition,
			FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: p.FetchOffset}})
	}
	if s.Err() != nil {
		clear(ar.fetch) // no topic name kept alive
		ar.fetch = ar.fetch[:0]
		return
	}
	ar.omitListed(omitted)
}

// fillFetched completes a Fetch's partitions from its response, read by
// the scanner: per partition the error, the record bytes returned and,
// from the record batches' headers, their records and offsets; false when
// the scanner cannot read it (nor kmsg). The partitions are applied once the whole
// body scanned, so that a response read in part changes nothing.
func (c *Conn) fillFetched(ar *Req, body []byte, version int16) bool {
	found, ok := scanAll(&c.fetched, &c.fetchedBuf, body, version)
	defer clear(found) // no frame kept alive by the names and records
	if !ok {
		return false
	}
	if version >= 7 {
		ar.req.ErrorCode = int16(binary.BigEndian.Uint16(body[4:])) // after the throttle
	}
	at := 0 // the response lists the partitions in the request's order, nearly always
	for i := range found {
		p := &found[i]
		n, first, last := batches(p.Records)
		at = c.fetchedInto(ar, at, p.Topic, p.TopicID, audit.Partition{Partition: p.Partition, ErrorCode: p.ErrorCode,
			Bytes: int64(len(p.Records)), Records: n, FirstOffset: first, LastOffset: last})
	}
	return true
}

// sameTopic reports whether the event's topic name is the topic a scanner
// found, by name or, from the versions that name topics by id, by the id
// as topicName prints it; allocating nothing.
func sameTopic(name string, topic []byte, id [16]byte) bool {
	if len(topic) > 0 || id == [16]byte{} {
		return name == string(topic)
	}
	var b [22]byte // 16 bytes in unpadded base64
	if len(name) != len(b) {
		return false
	}
	base64.RawURLEncoding.Encode(b[:], id[:])
	return name == string(b[:])
}

// batchRecords counts the records of a partition's record batches from
// their headers; see batches.
func batchRecords(b []byte) int64 {
	n, _, _ := batches(b)
	return n
}

// batches reads a partition's record batches from their headers (v2,
// magic 2: baseOffset at byte 0 of each batch, lastOffsetDelta at 23,
// numRecords at 57): the records they hold, the first batch's base offset
// and the last batch's last offset; NoOffset for none. Only whole batches
// count (a Fetch response may end in part of one, which the client
// drops), and the legacy message sets, not counted, stop the walk.
func batches(b []byte) (n, first, last int64) {
	first, last = audit.NoOffset, audit.NoOffset
	for len(b) >= batchHeader {
		size, ok := batchSize(b, int64(len(b)))
		if !ok {
			break
		}
		n, first, last = addBatch(b, n, first, last)
		b = b[size:]
	}
	return n, first, last
}

// batchHeader is the length of a record batch's header up to its record
// count, all that batches reads of a batch.
const batchHeader = 61

// batchSize is the size of the batch whose header h begins, where left
// bytes from its start are the partition's; false for a legacy message
// set, a length that does not hold the header, or a batch cut short.
func batchSize(h []byte, left int64) (int64, bool) {
	const lengthAt, magicAt = 8, 16
	size := 12 + int64(int32(binary.BigEndian.Uint32(h[lengthAt:])))
	return size, h[magicAt] == 2 && size >= batchHeader && size <= left
}

// addBatch adds the batch whose header is h to the records n and the
// offsets first and last counted so far.
func addBatch(h []byte, n, first, last int64) (int64, int64, int64) {
	const deltaAt, countAt = 23, 57
	base := int64(binary.BigEndian.Uint64(h))
	if first == audit.NoOffset {
		first = base
	}
	last = base + int64(int32(binary.BigEndian.Uint32(h[deltaAt:])))
	return n + int64(int32(binary.BigEndian.Uint32(h[countAt:]))), first, last
}

// markRefused makes q, forwarded without the entries refused, a denial:
// each refused resource denied with its code, added when the answer did
// not name it.
func markRefused(q *audit.Request, refused []authz.Refusal) {
	for _, d := range refused {
		typ, i := d.Resource.String(), 0
		for i < len(q.Resources) && (q.Resources[i].Type != typ || q.Resources[i].Name != d.Name) {
			i++
		}
		if i == len(q.Resources) {
			q.Resources = append(q.Resources, audit.Resource{Type: typ, Name: d.Name, Operation: d.Operation.String()})
		}
		q.Resources[i].Decision = audit.Deny
		if q.Resources[i].ErrorCode == 0 {
			q.Resources[i].ErrorCode = d.Code
		}
	}
	q.Decision = audit.Deny
	if q.ErrorCode == 0 {
		q.ErrorCode = refused[0].Code
	}
}

// SASL follows a connection's SASL exchanges, so that each is recorded
// once, as it ends; client reader.
type SASL struct {
	// mech is the mechanism of the client's last SaslHandshake,
	// exchanging says an exchange is under way since it, and rounds
	// counts its SaslAuthenticate answers.
	mech       string
	exchanging bool
	rounds     int
}

// Request follows the verdict v of the client authentication on a
// request: the authentication to record when it ends an exchange (nil
// when none), and, for any other request it refuses, the error code of
// its denial (0 when none). s is the connection's session, nil before
// one. A success is the first answer after a handshake that leaves the
// session with a principal.
func (x *SASL) Request(h wire.RequestHeader, frame []byte, v clientauth.Verdict, s clientauth.Session) (a *audit.Authentication, denied int16) {
	switch h.Key {
	case int16(kmsg.SASLHandshake):
		var req kmsg.SASLHandshakeRequest
		req.SetVersion(h.Version)
		if h.Body <= len(frame) && req.ReadFrom(frame[h.Body:]) == nil {
			x.mech = req.Mechanism
		}
		x.exchanging, x.rounds = true, 0
		if v.Action == clientauth.Answer || v.Action == clientauth.AnswerThenTokens {
			return nil, 0 // the exchange begins; a refused mechanism ends it
		}
	case int16(kmsg.SASLAuthenticate):
		x.rounds++
		if v.Action == clientauth.Answer && x.rounds < exchangeRounds(x.mech) {
			return nil, 0 // a challenge: the exchange goes on
		}
	default:
		// Any other request the client authentication refuses (before
		// authentication, after a session ended) is denied for who the
		// client is not yet, or no longer.
		if (v.Action == clientauth.Close || v.Action == clientauth.AnswerThenClose) && v.Err != nil {
			return nil, refusalCode(v.Err)
		}
		return nil, 0
	}
	return x.Verdict(h.Key, h.Version, v, s), 0
}

// Verdict is the authentication to record for a verdict that ends an
// exchange (a raw SASL token's, SaslHandshake v0, among them); nil when v
// ends none.
func (x *SASL) Verdict(key, version int16, v clientauth.Verdict, s clientauth.Session) *audit.Authentication {
	a := &audit.Authentication{Mechanism: x.mech, APIKey: key, APIVersion: version}
	switch v.Action {
	case clientauth.AnswerThenClose, clientauth.Close:
		if v.Err == nil {
			return nil
		}
		// clientauth's errors name the mechanism and the reason,
		// never a secret.
		a.Reason = v.Err.Error()
		a.ErrorCode = refusalCode(v.Err)
		a.Claimed = s.Claimed()
	case clientauth.Answer:
		if !x.exchanging || principal(s) == "" {
			return nil
		}
		a.Principal = principal(s)
	default:
		return nil
	}
	x.exchanging = false
	return a
}

// principal is who the session's client is; "" without a session.
func principal(s clientauth.Session) string {
	if s == nil {
		return ""
	}
	return s.Principal()
}

// refusalCode is the Kafka error a refusal of the client authentication
// stands for.
func refusalCode(err error) int16 {
	if errors.Is(err, clientauth.ErrIllegalState) {
		return kerr.IllegalSaslState.Code
	}
	return kerr.SaslAuthenticationFailed.Code
}

// exchangeRounds is how many SaslAuthenticate requests a successful
// exchange of the mechanism takes: SCRAM's client-first and client-final
// messages, one for the others. A session that re-authenticates keeps its
// principal throughout, so the principal alone cannot say that an
// exchange ended.
func exchangeRounds(mech string) int {
	if strings.HasPrefix(mech, "SCRAM-") {
		return 2
	}
	return 1
}

// fillResponse completes ar from the response frame the client got: the
// outcome, and the resources of the request with their errors; on the
// goroutine delivering the responses. A response that does not decode
// leaves the event with what the request said.
func (c *Conn) fillResponse(ar *Req, frame []byte, h wire.RequestHeader) {
	at, err := wire.ResponseBody(frame, h.ResponseFlexible())
	if err != nil {
		return
	}
	body := frame[at:]
	switch kmsg.Key(h.Key) {
	case kmsg.Produce:
		if !ar.perRequest {
			return // a summary takes its partitions from the request alone
		}
		if c.fillProduced(ar, body, h.Version) {
			return
		}
	case kmsg.Fetch:
		// The scanner reads what kmsg reads: a body it cannot read is not
		// a response kmsg would decode either.
		c.fillFetched(ar, body, h.Version)
		return
	}
	kr := kmsg.ResponseForKey(h.Key)
	if kr == nil {
		return
	}
	kr.SetVersion(h.Version)
	if kr.ReadFrom(body) != nil {
		return
	}
	q := &ar.req
	switch resp := kr.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range resp.Topics {
			name := topicName(t.Topic, t.TopicID)
			for _, p := range t.Partitions {
				produced(ar.producedPartition(name, p.Partition), p.ErrorCode, p.BaseOffset)
			}
		}
	case *kmsg.OffsetCommitResponse:
		req, _ := ar.kreq.(*kmsg.OffsetCommitRequest)
		if req != nil {
			q.Resources = append(q.Resources, audit.Resource{Type: "Group", Name: req.Group, Operation: "Read"})
		}
		q.Resources = append(q.Resources, commitTopics(commitOffsets(req), resp.Topics)...)
	case *kmsg.TxnOffsetCommitResponse:
		req, _ := ar.kreq.(*kmsg.TxnOffsetCommitRequest)
		var offsets map[string]map[int32]int64
		if req != nil {
			q.Resources = append(q.Resources, audit.Resource{Type: "TransactionalId", Name: req.TransactionalID, Operation: "Write"},
				audit.Resource{Type: "Group", Name: req.Group, Operation: "Read"})
			offsets = map[string]map[int32]int64{}
			for _, t := range req.Topics {
				m := map[int32]int64{}
				for _, p := range t.Partitions {
					m[p.Partition] = p.Offset
				}
				offsets[t.Topic] = m
			}
		}
		for _, t := range resp.Topics {
			res := audit.Resource{Type: "Topic", Name: t.Topic, Operation: "Read"}
			for _, p := range t.Partitions {
				res.Partitions = append(res.Partitions, committed(offsets, t.Topic, p.Partition, p.ErrorCode))
			}
			q.Resources = append(q.Resources, res)
		}
	case *kmsg.EndTxnResponse:
		q.ErrorCode = resp.ErrorCode
		if req, _ := ar.kreq.(*kmsg.EndTxnRequest); req != nil {
			q.Resources = append(q.Resources, audit.Resource{Type: "TransactionalId", Name: req.TransactionalID, Operation: "Write", ErrorCode: resp.ErrorCode})
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range resp.Topics {
			q.Resources = append(q.Resources, audit.Resource{Type: "Topic", Name: t.Topic, Operation: "Create", ErrorCode: t.ErrorCode})
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range resp.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			q.Resources = append(q.Resources, audit.Resource{Type: "Topic", Name: name, Operation: "Delete", ErrorCode: t.ErrorCode})
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range resp.Topics {
			q.Resources = append(q.Resources, audit.Resource{Type: "Topic", Name: t.Topic, Operation: "Alter", ErrorCode: t.ErrorCode})
		}
	case *kmsg.DeleteRecordsResponse:
		for _, t := range resp.Topics {
			res := audit.Resource{Type: "Topic", Name: t.Topic, Operation: "Delete"}
			for _, p := range t.Partitions {
				res.Partitions = append(res.Partitions, audit.Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: audit.NoOffset})
			}
			q.Resources = append(q.Resources, res)
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range resp.Groups {
			q.Resources = append(q.Resources, audit.Resource{Type: "Group", Name: g.Group, Operation: "Delete", ErrorCode: g.ErrorCode})
		}
	case *kmsg.AlterConfigsResponse:
		for _, r := range resp.Resources {
			q.Resources = append(q.Resources, audit.Resource{Type: configType(int8(r.ResourceType)), Name: r.ResourceName, Operation: "AlterConfigs", ErrorCode: r.ErrorCode})
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, r := range resp.Resources {
			q.Resources = append(q.Resources, audit.Resource{Type: configType(int8(r.ResourceType)), Name: r.ResourceName, Operation: "AlterConfigs", ErrorCode: r.ErrorCode})
		}
	case *kmsg.DescribeACLsResponse:
		q.ErrorCode = resp.ErrorCode
		q.Resources = append(q.Resources, audit.Resource{Type: "Cluster", Name: "kafka-cluster", Operation: "Describe", ErrorCode: resp.ErrorCode})
	case *kmsg.CreateACLsResponse:
		res := audit.Resource{Type: "Cluster", Name: "kafka-cluster", Operation: "Alter"}
		for _, r := range resp.Results {
			if res.ErrorCode == 0 {
				res.ErrorCode = r.ErrorCode
			}
		}
		q.Resources = append(q.Resources, res)
	case *kmsg.DeleteACLsResponse:
		res := audit.Resource{Type: "Cluster", Name: "kafka-cluster", Operation: "Alter"}
		for _, r := range resp.Results {
			if res.ErrorCode == 0 {
				res.ErrorCode = r.ErrorCode
			}
		}
		q.Resources = append(q.Resources, res)
	}
}

// fillProduced completes a Produce's partitions from its response, read
// by the scanner; false when the scanner cannot read it (kmsg decodes it
// then). The partitions are applied once the whole body scanned, so that
// a response read in part changes nothing.
func (c *Conn) fillProduced(ar *Req, body []byte, version int16) bool {
	found, ok := scanAll(&c.produced, &c.producedBuf, body, version)
	defer clear(found) // no frame kept alive by the names
	if !ok {
		return false
	}
	q := &ar.req
	if len(q.Resources) == 0 {
		// The request went upstream unread (spliced): its partitions are
		// the response's, in the pooled arrays rather than a slice
		// allocated per resource.
		name := ""
		for i := range found {
			p := &found[i]
			if n := len(ar.fetch); n == 0 || !sameTopic(name, p.Topic, p.TopicID) {
				name = c.deliverNames.get(p.Topic, p.TopicID)
			}
			if !ar.adds() {
				continue
			}
			part := audit.Partition{Partition: p.Partition, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: audit.NoOffset}
			produced(&part, p.ErrorCode, p.BaseOffset)
			ar.fetch = append(ar.fetch, fetchPart{topic: name, Partition: part})
		}
		groupResources(ar, "Write")
		return true
	}
	for i := range found {
		p := &found[i]
		name := ""
		// The topic found last or the next one, nearly always; else
		// a name kept by the connection.
		for ri := ar.last.res; ri <= ar.last.res+1 && ri < len(q.Resources); ri++ {
			if sameTopic(q.Resources[ri].Name, p.Topic, p.TopicID) {
				name = q.Resources[ri].Name
				break
			}
		}
		if name == "" {
			name = c.deliverNames.get(p.Topic, p.TopicID)
		}
		produced(ar.producedPartition(name, p.Partition), p.ErrorCode, p.BaseOffset)
	}
	return true
}

// answerScan is a scanner of an answer's partitions (wire.FetchedScan,
// wire.ProducedScan).
type answerScan[T any] interface {
	Reset(body []byte, version int16)
	Next() (T, bool)
	Err() error
}

// scanAll returns every partition s finds in body, in the connection's
// pooled slice buf (kept while it stays small), and whether the body
// scanned whole. The caller clears what it returns once done, so that no
// frame stays alive in the pool; s keeps none either.
func scanAll[T any, S answerScan[T]](s S, buf *[]T, body []byte, version int16) ([]T, bool) {
	defer s.Reset(nil, 0)
	found := (*buf)[:0]
	s.Reset(body, version)
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		found = append(found, p)
	}
	if cap(found) <= keepParts {
		*buf = found[:0]
	}
	return found, s.Err() == nil
}

// produced sets a written partition's error and offsets: the broker's
// base offset, and the last record's from the records the request held.
func produced(part *audit.Partition, code int16, base int64) {
	if part == nil {
		return // omitted
	}
	part.ErrorCode = code
	if code == 0 && base >= 0 {
		part.FirstOffset = base
		if part.Records > 0 {
			part.LastOffset = base + part.Records - 1
		}
	}
}

// commitOffsets are the offsets an OffsetCommit asked for, by topic and
// partition; nil without the request.
func commitOffsets(req *kmsg.OffsetCommitRequest) map[string]map[int32]int64 {
	if req == nil {
		return nil
	}
	out := map[string]map[int32]int64{}
	for _, t := range req.Topics {
		m := map[int32]int64{}
		for _, p := range t.Partitions {
			m[p.Partition] = p.Offset
		}
		out[topicName(t.Topic, t.TopicID)] = m
	}
	return out
}

func commitTopics(offsets map[string]map[int32]int64, topics []kmsg.OffsetCommitResponseTopic) []audit.Resource {
	var out []audit.Resource
	for _, t := range topics {
		name := topicName(t.Topic, t.TopicID)
		res := audit.Resource{Type: "Topic", Name: name, Operation: "Read"}
		for _, p := range t.Partitions {
			res.Partitions = append(res.Partitions, committed(offsets, name, p.Partition, p.ErrorCode))
		}
		out = append(out, res)
	}
	return out
}

// committed is one partition of a commit: the offset the request asked to
// commit, and the error the client got for it.
func committed(offsets map[string]map[int32]int64, topic string, partition int32, code int16) audit.Partition {
	p := audit.Partition{Partition: partition, ErrorCode: code, FirstOffset: audit.NoOffset, LastOffset: audit.NoOffset, Committed: audit.NoOffset, FetchOffset: audit.NoOffset}
	if o, ok := offsets[topic][partition]; ok && code == 0 {
		p.Committed = o
	}
	return p
}

// configType names a config resource type as Kafka's ACLs do.
func configType(t int8) string {
	switch t {
	case 2:
		return "Topic"
	case 4:
		return "Cluster"
	}
	return "BrokerConfig"
}

// topicName names a topic in an event: by its name, or, in the versions
// that carry only its id (Produce and Fetch v13, OffsetCommit v10 and
// later), by the id as Kafka prints it (base64, URL alphabet, no
// padding), until the event is complete and TopicIDs names it.
func topicName(name string, id [16]byte) string {
	if name != "" || id == [16]byte{} {
		return name
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}
