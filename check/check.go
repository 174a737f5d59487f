// Package check probes a Kafka-compatible address for Kafka's
// per-connection ordering promise: on one connection, requests are
// processed in the order sent and answered in that order.
//
// Each property pipelines requests on one raw connection (kmsg frames,
// shuffled correlation ids, nothing between the probe and the socket that
// could re-sequence or retry) and compares what came back, and what
// landed in the log, with what was sent. A kgo client does the
// administration around the probes: it creates and deletes the check's
// own topic and group and reads the records back.
//
// A check either runs to the end and reports, property by property,
// whether the promise held (Report), or could not run (an error wrapping
// ErrCannotRun with the reason: unreachable, not authorised, missing
// permissions).
package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// Defaults for Options' zero fields.
const (
	// DefaultRequests is the requests each property pipelines. A backend
	// that swaps one response in 200 keeps all of one property's
	// responses in order with probability (199/200)^2000 ≈ 4.4e-5, and
	// all of a whole run's (five properties) with about e^-50.
	DefaultRequests = 2000
	// MinRequests and MaxRequests bound Requests.
	MinRequests = 3
	MaxRequests = 1_000_000
	// DefaultWindow bounds the requests in flight on a probe connection.
	DefaultWindow = 64
	// IdempotentWindow is the idempotent producer's bound: Kafka clients
	// keep at most five requests in flight per connection when
	// idempotence is on.
	IdempotentWindow = 5
	// DefaultTimeout bounds a whole run.
	DefaultTimeout = 3 * time.Minute
	// DefaultDialTimeout bounds each connection attempt.
	DefaultDialTimeout = 10 * time.Second
)

// ClientIDPrefix starts the client id of every connection the check
// opens; each property's probe connection appends its own name (see
// Property.ClientID), so a backend's logs tell the probes apart.
const ClientIDPrefix = "inorder-check"

// Options configure a run. The zero value, with Bootstrap set, is a full
// default run.
type Options struct {
	// Bootstrap is the HOST:PORT to probe.
	Bootstrap string
	// Requests is the requests each property pipelines. If zero,
	// DefaultRequests.
	Requests int
	// Window bounds the requests in flight on a probe connection, except
	// the idempotent producer's (IdempotentWindow). If zero,
	// DefaultWindow.
	Window int
	// Topic is the topic written to. If empty, a fresh name
	// "inorder-check-<random>", created and then deleted; a named topic
	// that already exists is used (it needs at least 4 partitions) and
	// kept.
	Topic string
	// Group is the consumer group committed to. If empty, a fresh name,
	// deleted at the end; a named group is kept.
	Group string
	// Timeout bounds the whole run. If zero, DefaultTimeout.
	Timeout time.Duration
	// DialTimeout bounds each connection attempt. If zero,
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Progress receives progress lines. If nil, nothing is written.
	Progress io.Writer
}

// Default returns o with its zero fields filled in.
func (o Options) Default() Options {
	if o.Requests == 0 {
		o.Requests = DefaultRequests
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	return o
}

// Validate reports the first field that cannot be used, after Default.
func (o Options) Validate() error {
	switch {
	case o.Bootstrap == "":
		return fmt.Errorf("%w: bootstrap is required", ErrOptions)
	case !IsHostPort(o.Bootstrap):
		return fmt.Errorf("%w: bootstrap %q is not HOST:PORT", ErrOptions, o.Bootstrap)
	case o.Requests < MinRequests || o.Requests > MaxRequests:
		return fmt.Errorf("%w: requests %d must be between %d and %d", ErrOptions, o.Requests, MinRequests, MaxRequests)
	case o.Window < 1:
		return fmt.Errorf("%w: window %d must be at least 1", ErrOptions, o.Window)
	case o.Timeout < 0:
		return fmt.Errorf("%w: timeout %v is negative", ErrOptions, o.Timeout)
	case o.DialTimeout < 0:
		return fmt.Errorf("%w: dial timeout %v is negative", ErrOptions, o.DialTimeout)
	}
	return nil
}

// IsHostPort reports whether addr names a port to dial. An address
// without one is a mistake in how the check was asked, not a backend that
// cannot be reached, so it is refused before any dial.
func IsHostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != ""
}

var (
	// ErrOptions means an option is out of range.
	ErrOptions = errors.New("check: bad option")
	// ErrCannotRun means the check could not run to the end; the error
	// that wraps it is a *CannotRunError saying why.
	ErrCannotRun = errors.New("check could not run")
)

// Reason says why a check could not run.
type Reason string

// Reasons for CannotRunError.
const (
	ReasonUnreachable  Reason = "unreachable"
	ReasonUnauthorized Reason = "not authorised"
	ReasonPermission   Reason = "missing permissions"
	ReasonUnsupported  Reason = "unsupported"
	ReasonNotKafka     Reason = "not Kafka"
	ReasonFailed       Reason = "failed"
)

// CannotRunError is a run that ended before every property was checked.
type CannotRunError struct {
	Reason Reason
	// Step is what the check was doing, e.g. "creating topic x".
	Step string
	Err  error
}

func (e *CannotRunError) Error() string {
	return fmt.Sprintf("check could not run (%s): %s: %v", e.Reason, e.Step, e.Err)
}

// Unwrap lets errors.Is match ErrCannotRun and the cause.
func (e *CannotRunError) Unwrap() []error { return []error{ErrCannotRun, e.Err} }

// Report is what a run found.
type Report struct {
	Bootstrap  string     `json:"bootstrap"`
	Requests   int        `json:"requests_per_property"`
	Topic      string     `json:"topic"`
	Group      string     `json:"group"`
	Properties []Property `json:"properties"`
	// Error is set when the run could not finish; Properties then holds
	// those checked before.
	Error string `json:"error,omitempty"`
}

// Violations returns how many properties did not hold.
func (r Report) Violations() int {
	n := 0
	for _, p := range r.Properties {
		if !p.Holds {
			n++
		}
	}
	return n
}

// Property is one property's verdict and its evidence.
type Property struct {
	Name     string `json:"name"`
	ClientID string `json:"client_id"`
	Holds    bool   `json:"holds"`
	Requests int    `json:"requests"`
	// Evidence says what was seen, in one line.
	Evidence string `json:"evidence"`
	// Counts are the violations by kind (see the Count constants); only
	// non-zero counts are kept.
	Counts  map[string]int `json:"counts,omitempty"`
	Seconds float64        `json:"seconds"`
}

// Kinds of violation counted in Property.Counts.
const (
	CountResponsesOutOfOrder = "responses_out_of_order"
	CountAppendsOutOfOrder   = "appends_out_of_order"
	CountLogOutOfOrder       = "log_records_out_of_order"
	CountLogMissing          = "log_records_missing"
	CountLogDuplicated       = "log_records_duplicated"
	CountOutOfOrderSequence  = "out_of_order_sequence_errors"
	CountDuplicateSequence   = "duplicate_sequence_errors"
	CountErrors              = "other_errors"
	CountCommitLost          = "last_commit_lost"
)

// Run probes o.Bootstrap and returns the report. A violation is not an
// error: it is a property that does not hold. The error wraps
// ErrCannotRun when the run could not finish; the report then holds the
// properties checked before.
func Run(ctx context.Context, o Options) (Report, error) {
	o = o.Default()
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// Properties is never nil: a run that could not check any writes
	// "properties": [] in JSON, not null.
	r := &run{opts: o, rep: Report{Bootstrap: o.Bootstrap, Requests: o.Requests, Properties: []Property{}}}
	err := r.run(ctx)
	if err != nil {
		r.rep.Error = err.Error()
	}
	return r.rep, err
}

// freshName returns "inorder-check-" and a random suffix.
func freshName() string {
	return ClientIDPrefix + "-" + strconv.FormatUint(rand.Uint64()%math.MaxUint32, 36)
}
