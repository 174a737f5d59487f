package verify

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/junit"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/wire"
)

// produceVersion is a flexible Produce version, so that the response
// header's tags are skipped too.
const produceVersion = 9

// produceHeader is the header of the client's Produce request with
// correlation id corr.
func produceHeader(corr int32) wire.RequestHeader {
	return wire.RequestHeader{Key: keyProduce, Version: produceVersion, Correlation: corr}
}

// produceAnswer is the frame of a Produce response with upstream
// correlation id upCorr for partition 0 of topic t.
func produceAnswer(upCorr int32, code int16, base int64) []byte {
	resp := kmsg.NewProduceResponse()
	resp.Version = produceVersion
	p := kmsg.NewProduceResponseTopicPartition()
	p.ErrorCode, p.BaseOffset = code, base
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, p)
	resp.Topics = append(resp.Topics, rt)
	return wire.AppendResponse(nil, upCorr, true, resp.AppendTo)
}

// answer passes the response to the Produce written with upCorr through
// cv as the upstream reader does.
func answer(cv *Conn, upCorr int32, code int16, base int64) {
	h := produceHeader(upCorr + 100)
	cv.Inspect(h, upCorr, produceAnswer(upCorr, code, base), cv.Answered(h, upCorr))
}

func count(r Report, kind metrics.Violation) int64 {
	for _, k := range r.Violations {
		if k.Kind == kind {
			return k.Count
		}
	}
	return -1
}

func newConn() (*Verifier, *Conn) {
	v := New(nil)
	return v, v.Conn("client:1", func() string { return "upstream:2" })
}

// TestConnOffsetsInOrder: Produce requests to one partition answered in
// write order with rising base offsets are no violation.
func TestConnOffsetsInOrder(t *testing.T) {
	v, cv := newConn()
	for corr := range int32(3) {
		cv.Sent(keyProduce, corr)
	}
	for corr := range int32(3) {
		answer(cv, corr, 0, 10+int64(corr))
	}
	rep := v.Report()
	if rep.Total() != 0 || v.Violations() != 0 {
		t.Fatalf("violations on an upstream that kept order: %+v", rep)
	}
	if rep.Requests["Produce"] != 3 || len(rep.Violations) != len(Kinds) {
		t.Fatalf("report: %+v", rep)
	}
}

// TestConnOffsetRegression: answers in write order whose base offsets go
// backwards are an offset regression, named by both requests.
func TestConnOffsetRegression(t *testing.T) {
	v, cv := newConn()
	cv.Sent(keyProduce, 1)
	cv.Sent(keyProduce, 2)
	answer(cv, 1, 0, 11)
	answer(cv, 2, 0, 10)
	rep := v.Report()
	if n := count(rep, metrics.ViolationOffsetRegression); n != 1 || rep.Total() != 1 {
		t.Fatalf("%d offset regressions (total %d), want 1: %+v", n, rep.Total(), rep)
	}
	e := rep.Violations[1].Examples[0]
	if e.Kind != metrics.ViolationOffsetRegression || e.Client != "client:1" || e.Upstream != "upstream:2" || e.API != "Produce" ||
		e.ClientCorrelation != 102 || e.UpstreamCorrelation != 2 || e.OtherCorrelation != 1 ||
		e.Partition == nil || *e.Partition != (Partition{Topic: "t", Partition: 0, BaseOffset: 10, OtherBaseOffset: 11}) ||
		!strings.Contains(e.Detail, "written earlier") {
		t.Fatalf("example: %+v", e)
	}
}

// TestConnOffsetRegressionAnsweredLate: the later write answered first
// with the lower offset is caught when the earlier one's answer arrives,
// besides the response order.
func TestConnOffsetRegressionAnsweredLate(t *testing.T) {
	v, cv := newConn()
	cv.Sent(keyProduce, 1)
	cv.Sent(keyProduce, 2)
	answer(cv, 2, 0, 10)
	answer(cv, 1, 0, 11)
	rep := v.Report()
	if count(rep, metrics.ViolationOutOfOrderResponse) != 1 || count(rep, metrics.ViolationOffsetRegression) != 1 || rep.Total() != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if e := rep.Violations[1].Examples[0]; !strings.Contains(e.Detail, "written later") || e.OtherCorrelation != 2 {
		t.Fatalf("example: %+v", e)
	}
}

// TestConnResponseOrder: a response is out of order while one written
// before it is unanswered, and only then.
func TestConnResponseOrder(t *testing.T) {
	v, cv := newConn()
	h := wire.RequestHeader{Key: 3, Version: 12, Correlation: 7} // Metadata
	cv.Sent(h.Key, 1)
	cv.Sent(h.Key, 2)
	cv.Sent(h.Key, 3)
	cv.Answered(h, 2)
	cv.Answered(h, 1)
	cv.Answered(h, 3)
	rep := v.Report()
	if n := count(rep, metrics.ViolationOutOfOrderResponse); n != 1 || rep.Total() != 1 {
		t.Fatalf("%d out of order (total %d), want 1", n, rep.Total())
	}
	if e := rep.Violations[0].Examples[0]; e.API != "Metadata" || e.UpstreamCorrelation != 2 || e.OtherCorrelation != 1 || e.Partition != nil {
		t.Fatalf("example: %+v", e)
	}
	if rep.Requests["Metadata"] != 3 {
		t.Fatalf("requests: %v", rep.Requests)
	}
}

// TestConnSequenceErrors: the idempotent producer's sequence errors are
// counted by kind; an answer to a request never written is not inspected.
func TestConnSequenceErrors(t *testing.T) {
	v, cv := newConn()
	cv.Sent(keyProduce, 1)
	cv.Sent(keyProduce, 2)
	answer(cv, 1, kerr.OutOfOrderSequenceNumber.Code, -1)
	answer(cv, 2, kerr.DuplicateSequenceNumber.Code, -1)
	answer(cv, 3, kerr.OutOfOrderSequenceNumber.Code, -1) // never sent
	rep := v.Report()
	if count(rep, metrics.ViolationOutOfOrderSequence) != 1 || count(rep, metrics.ViolationDuplicateSequence) != 1 || rep.Total() != 2 {
		t.Fatalf("report: %+v", rep)
	}
}

// TestReportListsEveryKind: a report of nothing seen names every kind
// watched, with no examples rather than null in JSON, and passes as JUnit.
func TestReportListsEveryKind(t *testing.T) {
	rep := New(nil).Report()
	var js bytes.Buffer
	if err := rep.Write(&js, "r.json"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(js.String(), `"examples": []`); n != len(Kinds) {
		t.Fatalf("%d kinds with empty examples, want %d:\n%s", n, len(Kinds), js.String())
	}
	var ju bytes.Buffer
	if err := rep.Write(&ju, "r.xml"); err != nil {
		t.Fatal(err)
	}
	suite, err := junit.Read(ju.Bytes())
	if err != nil {
		t.Fatalf("junit: %v\n%s", err, ju.String())
	}
	if suite.Tests != len(Kinds) || suite.Failures != 0 {
		t.Fatalf("junit: %+v", suite)
	}
}
