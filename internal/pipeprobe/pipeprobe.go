// Package pipeprobe is a raw Kafka client that pipelines Produce requests
// on one connection and reports every way the answers break Kafka's
// per-connection ordering promise: responses out of send order, writes
// appended out of send order, and errors.
//
// It speaks the wire protocol directly, with kmsg types, so that nothing
// between it and the socket re-sequences, retries or hides a violation.
// Correlation ids are a shuffled, never increasing, set: a proxy under
// test must not assume they increase.
package pipeprobe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrReordered means responses came back in a different order than
	// their requests were sent.
	ErrReordered = errors.New("pipeprobe: responses out of send order")
	// ErrOffsetOrder means the base offsets, taken in send order, do not
	// strictly increase: the writes were appended out of order.
	ErrOffsetOrder = errors.New("pipeprobe: writes appended out of send order")
	// ErrResponseError means a response carried a Kafka error code.
	ErrResponseError = errors.New("pipeprobe: response carries an error code")
	// ErrMissingResponses means fewer or more responses than requests
	// were recorded.
	ErrMissingResponses = errors.New("pipeprobe: response count differs from request count")
	// ErrLogOrder means a partition's values are not 0..n-1 in order.
	ErrLogOrder = errors.New("pipeprobe: log does not hold the values in send order")
	// ErrUnknownCorrelation means a response carried a correlation id no
	// outstanding request was sent with.
	ErrUnknownCorrelation = errors.New("pipeprobe: response with unknown correlation id")
	// ErrMalformed means a response frame could not be parsed.
	ErrMalformed = errors.New("pipeprobe: malformed response")
)

// Response is what one Produce response said.
type Response struct {
	CorrID     int32 // correlation id the response carried
	Seq        int   // send position of the request with that id
	BaseOffset int64 // offset the write was appended at
	ErrorCode  int16 // partition error code; 0 is success
}

// Result records a pipelined produce run. Request i carried the value
// strconv.Itoa(i) and the correlation id Sent[i].
type Result struct {
	Topic     string
	Partition int32
	Acks      int16
	Sent      []int32    // correlation ids in send order
	Responses []Response // in the order they arrived
}

// maxReported bounds how many individual violations an error lists.
const maxReported = 5

// Check returns nil if the run kept Kafka's promise, or an error wrapping
// one or more of ErrMissingResponses, ErrReordered, ErrResponseError and
// ErrOffsetOrder that says where it did not. An acks=0 run has no
// responses, so only its log (see CheckLogOrder) can show a violation.
func (r Result) Check() error {
	if r.Acks == 0 {
		if len(r.Responses) != 0 {
			return fmt.Errorf("%w: %d responses to acks=0 requests", ErrMissingResponses, len(r.Responses))
		}
		return nil
	}
	if len(r.Responses) != len(r.Sent) {
		return fmt.Errorf("%w: %d requests, %d responses", ErrMissingResponses, len(r.Sent), len(r.Responses))
	}
	seen := make(map[int]bool, len(r.Responses))
	for i, resp := range r.Responses {
		if resp.Seq < 0 || resp.Seq >= len(r.Sent) || seen[resp.Seq] {
			return fmt.Errorf("%w: response %d names request %d of %d twice or out of range", ErrUnknownCorrelation, i, resp.Seq, len(r.Sent))
		}
		seen[resp.Seq] = true
	}
	var errs []error

	var moved []string
	for i, resp := range r.Responses {
		if resp.CorrID != r.Sent[i] {
			moved = append(moved, fmt.Sprintf("response %d answered request %d (id %d), expected id %d", i, resp.Seq, resp.CorrID, r.Sent[i]))
		}
	}
	if len(moved) > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d out of place: %s", ErrReordered, len(moved), len(r.Sent), summarize(moved)))
	}

	var (
		failed   []string
		firstErr error
	)
	offsets := make([]int64, len(r.Sent))
	for _, resp := range r.Responses {
		offsets[resp.Seq] = resp.BaseOffset
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			failed = append(failed, fmt.Sprintf("request %d: %v", resp.Seq, err))
		}
	}
	if len(failed) > 0 {
		// The first code is wrapped so that a test can ask which one.
		errs = append(errs, fmt.Errorf("%w: %d of %d, first %w: %s", ErrResponseError, len(failed), len(r.Sent), firstErr, summarize(failed)))
	}

	var inverted []string
	for i := 1; i < len(offsets); i++ {
		if offsets[i] <= offsets[i-1] {
			inverted = append(inverted, fmt.Sprintf("request %d at offset %d, request %d at offset %d", i-1, offsets[i-1], i, offsets[i]))
		}
	}
	if len(inverted) > 0 {
		errs = append(errs, fmt.Errorf("%w: %d inversions: %s", ErrOffsetOrder, len(inverted), summarize(inverted)))
	}
	return errors.Join(errs...)
}

func summarize(items []string) string {
	if len(items) <= maxReported {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:maxReported], "; ") + fmt.Sprintf("; and %d more", len(items)-maxReported)
}
