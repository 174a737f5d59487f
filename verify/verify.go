// Package verify is the live-traffic verifier (--verify): it watches what
// the upstream does with the requests that pass through and counts the
// ordering violations it can see. The proxy delivers responses in order
// whatever the verifier finds; the verifier only reports.
//
// The proxy gives each client connection a Conn and calls it at three
// hooks: Sent where a request is written upstream (in write order),
// Answered where the upstream reader has matched a response's correlation
// id, Inspect with a response frame read whole. It hands over plain values
// (the request's header, its upstream correlation id, the frame); the
// package does not import proxy. Without --verify the proxy has no
// Verifier and the hooks cost a nil check each.
package verify

import (
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/wire"
)

// Bounds of what the verifier keeps.
const (
	// maxExamples is how many examples of each kind a report keeps.
	maxExamples = 5
	// maxPartitions bounds the partitions one connection tracks for
	// offset order; Produce to further partitions is checked for error
	// codes only.
	maxPartitions = 4096
	// maxKeys is one past the highest API key counted by name.
	maxKeys = 128
)

// keyProduce is the Produce request's API key.
const keyProduce = 0

// Verifier gathers what every connection's verifier saw. Its methods are
// safe for concurrent use.
type Verifier struct {
	metrics *metrics.Metrics // nil records nothing

	requests [maxKeys + 1]atomic.Int64 // by API key; the last counts keys past the table

	mu       sync.Mutex
	counts   map[metrics.Violation]int64
	examples map[metrics.Violation][]Example
}

// New returns a verifier that also counts violations in m (nil: only in
// its report).
func New(m *metrics.Metrics) *Verifier {
	return &Verifier{
		metrics:  m,
		counts:   make(map[metrics.Violation]int64),
		examples: make(map[metrics.Violation][]Example),
	}
}

// Example is one violation as the verifier saw it.
type Example struct {
	Kind     metrics.Violation `json:"kind"`
	Client   string            `json:"client"`   // the client's address
	Upstream string            `json:"upstream"` // the upstream connection's address
	API      string            `json:"api"`
	// ClientCorrelation and UpstreamCorrelation identify the request
	// whose response showed the violation.
	ClientCorrelation   int32 `json:"client_correlation_id"`
	UpstreamCorrelation int32 `json:"upstream_correlation_id"`
	// OtherCorrelation is the upstream correlation id of the other
	// request involved: the earlier one still unanswered, or the Produce
	// whose base offset conflicts.
	OtherCorrelation int32 `json:"other_upstream_correlation_id,omitempty"`
	// Partition is set for the kinds about one partition.
	Partition *Partition `json:"partition,omitempty"`
	Detail    string     `json:"detail"`
}

// Partition names the partition of a violation and its offsets.
type Partition struct {
	Topic      string `json:"topic"` // the name, or the topic id in hex
	Partition  int32  `json:"partition"`
	BaseOffset int64  `json:"base_offset"`
	// OtherBaseOffset is the base offset of the conflicting Produce.
	OtherBaseOffset int64 `json:"other_base_offset"`
}

func (v *Verifier) record(e Example) {
	v.metrics.Violation(e.Kind)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.counts[e.Kind]++
	if len(v.examples[e.Kind]) < maxExamples {
		v.examples[e.Kind] = append(v.examples[e.Kind], e)
	}
}

// Violations returns the violations seen so far, of every kind.
func (v *Verifier) Violations() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var n int64
	for _, c := range v.counts {
		n += c
	}
	return n
}

// Report is what a Verifier saw, for --report.
type Report struct {
	// Requests counts the requests forwarded upstream by API name.
	Requests   map[string]int64 `json:"requests"`
	Violations []KindReport     `json:"violations"`
}

// KindReport is one kind of violation: how many, and the first few.
type KindReport struct {
	Kind     metrics.Violation `json:"kind"`
	Count    int64             `json:"count"`
	Examples []Example         `json:"examples"`
}

// Total returns the violations of every kind.
func (r Report) Total() int64 {
	var n int64
	for _, k := range r.Violations {
		n += k.Count
	}
	return n
}

// Report returns what was seen so far. Every kind is listed, with a zero
// count if it was never seen, so that a report says what was watched.
func (v *Verifier) Report() Report {
	r := Report{Requests: make(map[string]int64)}
	for key := range v.requests {
		n := v.requests[key].Load()
		if n == 0 {
			continue
		}
		name := "other"
		if key < maxKeys {
			if name = kmsg.NameForKey(int16(key)); name == "" {
				name = "key " + strconv.Itoa(key)
			}
		}
		r.Requests[name] += n
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range Kinds {
		// Never nil, so that a kind never seen is "examples": [] in JSON.
		examples := append(make([]Example, 0, len(v.examples[k])), v.examples[k]...)
		r.Violations = append(r.Violations, KindReport{Kind: k, Count: v.counts[k], Examples: examples})
	}
	return r
}

// Kinds are the violations the verifier looks for.
var Kinds = []metrics.Violation{
	metrics.ViolationOutOfOrderResponse,
	metrics.ViolationOffsetRegression,
	metrics.ViolationOutOfOrderSequence,
	metrics.ViolationDuplicateSequence,
}

// Conn is one connection's verifier. The proxy calls Sent in the order
// requests are written upstream, from one goroutine at a time; the
// upstream reader calls Answered and Inspect. Its own lock serialises the
// two.
type Conn struct {
	v        *Verifier
	client   string
	upstream func() string // the upstream connection's address, "" before it is dialled

	mu      sync.Mutex
	next    uint64        // send index of the next request written
	pending []sentRequest // written and unanswered, in send order
	parts   map[string]*partOrder
}

// unsent is the write order Answered gives a request it never saw written.
const unsent = ^uint64(0)

// sentRequest is a request written upstream and not yet answered.
type sentRequest struct {
	idx  uint64
	corr int32
}

// partOrder holds, for one partition, the base offsets of answered Produce
// requests by send index, sorted. Entries older than every unanswered
// request are pruned to the newest of them, which is all a later answer
// can be compared with.
type partOrder struct {
	entries []offsetAt
}

type offsetAt struct {
	idx  uint64
	off  int64
	corr int32
}

// Conn returns the verifier of a client connection from address client;
// upstream returns the address of its upstream connection when a
// violation is recorded.
func (v *Verifier) Conn(client string, upstream func() string) *Conn {
	return &Conn{v: v, client: client, upstream: upstream}
}

// Sent records a request with API key key as written upstream next, with
// correlation id upCorr on the upstream connection.
func (cv *Conn) Sent(key int16, upCorr int32) {
	k := int(key)
	if k < 0 || k >= maxKeys {
		k = maxKeys
	}
	cv.v.requests[k].Add(1)
	cv.mu.Lock()
	cv.pending = append(cv.pending, sentRequest{idx: cv.next, corr: upCorr})
	cv.next++
	cv.mu.Unlock()
}

// Answered checks the order of the upstream's response to the request
// with header h and upstream correlation id upCorr, and returns the
// request's place in write order, for Inspect.
func (cv *Conn) Answered(h wire.RequestHeader, upCorr int32) uint64 {
	cv.mu.Lock()
	i := slices.IndexFunc(cv.pending, func(s sentRequest) bool { return s.corr == upCorr })
	if i < 0 {
		cv.mu.Unlock()
		return unsent
	}
	me := cv.pending[i]
	earlier := cv.pending[0].corr
	cv.pending = slices.Delete(cv.pending, i, i+1)
	cv.mu.Unlock()
	if i > 0 {
		cv.v.record(cv.example(metrics.ViolationOutOfOrderResponse, h, upCorr, Example{
			OtherCorrelation: earlier,
			Detail:           fmt.Sprintf("answered while upstream correlation id %d, written earlier, was not", earlier),
		}))
	}
	return me.idx
}

// Inspect checks the body of the upstream's response to the request with
// header h and upstream correlation id upCorr: frame is the response, read
// whole, prefix included; sent is what Answered returned for it.
func (cv *Conn) Inspect(h wire.RequestHeader, upCorr int32, frame []byte, sent uint64) {
	if h.Key == keyProduce && sent != unsent {
		cv.produce(h, upCorr, frame, sent)
	}
}

func (cv *Conn) example(kind metrics.Violation, h wire.RequestHeader, upCorr int32, e Example) Example {
	e.Kind = kind
	e.Client = cv.client
	e.Upstream = cv.upstream()
	e.API = kmsg.NameForKey(h.Key)
	e.ClientCorrelation = h.Correlation
	e.UpstreamCorrelation = upCorr
	return e
}

// produce checks a Produce response's error codes and base offsets.
func (cv *Conn) produce(h wire.RequestHeader, upCorr int32, frame []byte, idx uint64) {
	off, err := wire.ResponseBody(frame, h.ResponseFlexible())
	if err != nil {
		return // the upstream reader reports a malformed frame
	}
	resp := kmsg.ProduceResponse{Version: h.Version}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return
	}
	for _, t := range resp.Topics {
		topic := t.Topic
		if topic == "" {
			topic = hex.EncodeToString(t.TopicID[:])
		}
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case kerr.OutOfOrderSequenceNumber.Code:
				cv.v.record(cv.example(metrics.ViolationOutOfOrderSequence, h, upCorr, Example{
					Partition: &Partition{Topic: topic, Partition: p.Partition, BaseOffset: -1, OtherBaseOffset: -1},
					Detail:    "the upstream answered OUT_OF_ORDER_SEQUENCE_NUMBER"}))
			case kerr.DuplicateSequenceNumber.Code:
				cv.v.record(cv.example(metrics.ViolationDuplicateSequence, h, upCorr, Example{
					Partition: &Partition{Topic: topic, Partition: p.Partition, BaseOffset: -1, OtherBaseOffset: -1},
					Detail:    "the upstream answered DUPLICATE_SEQUENCE_NUMBER"}))
			case 0:
				if p.BaseOffset >= 0 {
					cv.offset(h, upCorr, topic, p.Partition, offsetAt{idx: idx, off: p.BaseOffset, corr: upCorr})
				}
			}
		}
	}
}

// offset places an answered Produce's base offset among the others to the
// same partition: a request written earlier must have a lower offset, one
// written later a higher one.
func (cv *Conn) offset(h wire.RequestHeader, upCorr int32, topic string, partition int32, at offsetAt) {
	key := topic + "\x00" + strconv.Itoa(int(partition))
	cv.mu.Lock()
	po := cv.parts[key]
	if po == nil {
		if len(cv.parts) >= maxPartitions {
			cv.mu.Unlock()
			return
		}
		if cv.parts == nil {
			cv.parts = make(map[string]*partOrder)
		}
		po = &partOrder{}
		cv.parts[key] = po
	}
	i := sort.Search(len(po.entries), func(i int) bool { return po.entries[i].idx > at.idx })
	var bad *offsetAt
	switch {
	case i > 0 && po.entries[i-1].off >= at.off:
		e := po.entries[i-1]
		bad = &e
	case i < len(po.entries) && po.entries[i].off <= at.off:
		e := po.entries[i]
		bad = &e
	}
	po.entries = slices.Insert(po.entries, i, at)
	// Every request before the oldest unanswered one is answered: of
	// those, only the newest can still be compared with.
	oldest := cv.next
	if len(cv.pending) > 0 {
		oldest = cv.pending[0].idx
	}
	settled := sort.Search(len(po.entries), func(i int) bool { return po.entries[i].idx >= oldest })
	if settled > 1 {
		po.entries = slices.Delete(po.entries, 0, settled-1)
	}
	cv.mu.Unlock()
	if bad == nil {
		return
	}
	detail := fmt.Sprintf("base offset %d, but a Produce written earlier (upstream correlation id %d) got %d", at.off, bad.corr, bad.off)
	if bad.idx > at.idx {
		detail = fmt.Sprintf("base offset %d, but a Produce written later (upstream correlation id %d) got %d", at.off, bad.corr, bad.off)
	}
	cv.v.record(cv.example(metrics.ViolationOffsetRegression, h, upCorr, Example{
		OtherCorrelation: bad.corr,
		Partition:        &Partition{Topic: topic, Partition: partition, BaseOffset: at.off, OtherBaseOffset: bad.off},
		Detail:           detail,
	}))
}
