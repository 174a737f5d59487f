package audit

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Recorder is what the proxy calls: the one seam between a connection and
// the trail. Every method is called from the connection's reader, so that
// a full queue in block mode holds back exactly the clients whose events
// wait; a method returns ctx's error when ctx ends first, and ErrDropped
// or ErrClosed when the event was not queued (counted either way: the
// connection goes on).
type Recorder interface {
	// Open starts the audit of a client connection, once its TLS
	// handshake (if any) is done.
	Open(info ConnInfo) *Conn
	// Authentication records the end of one authentication, successful
	// or not; a success sets the principal of the connection's later
	// events.
	Authentication(ctx context.Context, c *Conn, a *Authentication) error
	// Request records one request once the client's answer is known.
	// Call it for the requests Wants says it takes; it keeps none of r's
	// slices after it returns, and may keep its strings, which must not
	// share memory the caller reuses.
	Request(ctx context.Context, c *Conn, r *Request) error
	// Wants reports whether Request records a request of the key with the
	// decision, so that the proxy builds a Request only for those:
	// every denied request, every administrative one, and the data path
	// unless it is off.
	Wants(key int16, d Decision) bool
	// Close ends the connection's audit, recording its pending summary.
	Close(ctx context.Context, c *Conn) error
}

// ConnInfo is what a client connection is known by from its start.
type ConnInfo struct {
	// ID identifies the connection within the proxy instance (written as
	// connection when not zero).
	ID            uint64
	Listener      string
	ClientAddress string
	// TLSSubject is the client certificate's subject, empty without one.
	TLSSubject string
	// Principal is the connection's principal before any SASL exchange:
	// the certificate's under mutual TLS, else User:ANONYMOUS. Empty means
	// User:ANONYMOUS.
	Principal string
}

// Authentication is the outcome of one authentication.
type Authentication struct {
	Time       time.Time // zero: now
	Mechanism  string    // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, or TLS
	APIKey     int16     // SaslAuthenticate, SaslHandshake for a legacy exchange; NoAPIKey for TLS alone
	APIVersion int16
	// Principal is who the client proved to be; ignored on a failure,
	// whose event carries the connection's principal (User:ANONYMOUS, or
	// the one proven before), since nothing was proven.
	Principal string
	// Claimed is, on a failure, whom the client named as itself in its
	// credentials, unverified (Kafka's form, User:mallory); empty when it
	// named no one readable. Never a secret.
	Claimed string
	// Reason is why the authentication failed; empty for a success. It
	// must never hold a secret.
	Reason    string
	ErrorCode int16 // SASL_AUTHENTICATION_FAILED (58) on a failure
}

// Request is one request and the client's answer. The proxy fills it;
// Request copies it and keeps none of its slices.
type Request struct {
	Time       time.Time // when answered; zero: now
	APIKey     int16
	APIVersion int16
	ClientID   string
	Decision   Decision
	ErrorCode  int16
	// Resources are the resources the request named, with per-partition
	// offsets for writes, reads and commits.
	Resources []Resource
	// PartitionsOmitted counts the partitions left out of Resources: an
	// answer or a streamed request naming more than an event holds.
	PartitionsOmitted int64
	// Reason says why the client got no answer (its connection closed
	// first); empty for a request answered.
	Reason string
}

// DataPath is how the data path (Produce, Fetch, OffsetCommit,
// TxnOffsetCommit, EndTxn) is audited.
type DataPath string

const (
	// DataPathOff records no allowed data-path request (denied ones are
	// always recorded).
	DataPathOff DataPath = "off"
	// DataPathSummary records, per connection and interval, the records,
	// bytes and first and last offsets per partition.
	DataPathSummary DataPath = "summary"
	// DataPathRequest records every data-path request.
	DataPathRequest DataPath = "request"
)

// Class is how a request is audited.
type Class uint8

const (
	// ClassOther: recorded only when denied.
	ClassOther Class = iota
	// ClassAdmin: always recorded, with its outcome.
	ClassAdmin
	// ClassData: the data path, recorded as DataPath says.
	ClassData
)

// ClassOf returns the audit class of an API key: the data path (Produce,
// Fetch, OffsetCommit, TxnOffsetCommit, EndTxn), administrative requests
// (those that create, delete or alter topics, partitions, configs,
// records, groups, ACLs, quotas, credentials or delegation tokens, and
// ACL reads), or other.
func ClassOf(key int16) Class {
	switch kmsg.Key(key) {
	case kmsg.Produce, kmsg.Fetch, kmsg.OffsetCommit, kmsg.TxnOffsetCommit, kmsg.EndTxn:
		return ClassData
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.DeleteRecords, kmsg.CreatePartitions,
		kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs, kmsg.AlterReplicaLogDirs,
		kmsg.AlterPartitionAssignments, kmsg.ElectLeaders,
		kmsg.DeleteGroups, kmsg.OffsetDelete,
		kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs,
		kmsg.AlterClientQuotas, kmsg.AlterUserSCRAMCredentials,
		kmsg.CreateDelegationToken, kmsg.RenewDelegationToken, kmsg.ExpireDelegationToken,
		kmsg.UpdateFeatures, kmsg.UnregisterBroker:
		return ClassAdmin
	}
	return ClassOther
}

// Options configure a Trail. The zero value of each field is described
// beside it.
type Options struct {
	// DataPath is how the data path is recorded. Empty means
	// DataPathSummary.
	DataPath DataPath
	// Interval is a summary's interval. Zero means one minute.
	Interval time.Duration
	// MaxSummaryEntries bounds the resources and partitions one
	// connection's summary tracks; further partitions are counted in
	// partitions_omitted. Zero means 1024.
	MaxSummaryEntries int
	// Source gives the events their ids. Nil means a source named by the
	// time of New.
	Source *Source
	// MaxEventBytes bounds one encoded event. An event above it sheds the
	// partitions of its resources, then resources from the end, counting
	// what it left out, and keeps its fixed fields, decision and error
	// code: a request naming more than the bound allows is still recorded
	// rather than dropped, as Kafka would refuse the record whole. Zero
	// means 900,000 bytes, below Kafka's default message.max.bytes
	// (1,048,588) with room for the record's overhead.
	MaxEventBytes int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Trail is the Recorder: it encodes events, summarises the data path and
// queues the events for the sinks.
type Trail struct {
	o   Options
	q   *Queue
	src *Source

	mu    sync.Mutex
	conns map[*Conn]struct{}

	bufs sync.Pool
	stop chan struct{}
	done chan struct{}
	// ctx is the flush's: cancelled when Shutdown's deadline passes, so
	// that a flush waiting for room does not outlive the stop.
	ctx    context.Context
	cancel context.CancelFunc
}

var _ Recorder = (*Trail)(nil)

// New returns a trail queueing its events on q, and starts the flush of
// the summaries of quiet connections every interval. Close stops it and
// closes q.
func New(o Options, q *Queue) *Trail {
	if o.DataPath == "" {
		o.DataPath = DataPathSummary
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.MaxSummaryEntries <= 0 {
		o.MaxSummaryEntries = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = 900_000
	}
	if o.Source == nil {
		o.Source = NewSource(time.Now().UTC().Format("20060102T150405.000000000Z"))
	}
	t := &Trail{o: o, q: q, src: o.Source, conns: map[*Conn]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	t.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if o.DataPath == DataPathSummary {
		go t.flushEvery()
	} else {
		close(t.done)
	}
	return t
}

// Conn is one client connection's audit state.
type Conn struct {
	info ConnInfo

	mu        sync.Mutex
	principal string
	clientID  string
	sum       summary
}

// Open implements Recorder.
func (t *Trail) Open(info ConnInfo) *Conn {
	c := &Conn{info: info, principal: info.Principal}
	if c.principal == "" {
		c.principal = "User:ANONYMOUS"
	}
	c.sum.since = t.o.Now()
	t.mu.Lock()
	t.conns[c] = struct{}{}
	t.mu.Unlock()
	return c
}

// Wants implements Recorder.
func (t *Trail) Wants(key int16, d Decision) bool {
	if d == Deny {
		return true
	}
	switch ClassOf(key) {
	case ClassAdmin:
		return true
	case ClassData:
		return t.o.DataPath != DataPathOff
	}
	return false
}

// Authentication implements Recorder.
func (t *Trail) Authentication(ctx context.Context, c *Conn, a *Authentication) error {
	d := Allow
	if a.Reason != "" || a.ErrorCode != 0 {
		d = Deny
	}
	c.mu.Lock()
	if d == Allow && a.Principal != "" {
		c.principal = a.Principal
	}
	c.mu.Unlock()
	// A failure proved nothing: its event names the connection's
	// principal, and whom the client claimed apart.
	principal := a.Principal
	if principal == "" || d == Deny {
		principal = c.principalNow()
	}
	e := Event{
		Kind: KindAuthentication, Time: a.Time, Listener: c.info.Listener, Principal: principal,
		ClientAddress: c.info.ClientAddress, Connection: c.info.ID, APIKey: a.APIKey, APIVersion: a.APIVersion,
		Decision: d, ErrorCode: a.ErrorCode, Mechanism: a.Mechanism, TLSSubject: c.info.TLSSubject, Reason: a.Reason,
	}
	if d == Deny {
		e.ClaimedPrincipal = a.Claimed
	}
	return t.enqueue(ctx, &e)
}

func (c *Conn) principalNow() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

// Request implements Recorder.
func (t *Trail) Request(ctx context.Context, c *Conn, r *Request) error {
	d := r.Decision
	for i := range r.Resources {
		if r.Resources[i].Decision == Deny {
			d = Deny
		}
	}
	if d == Allow && ClassOf(r.APIKey) == ClassData {
		switch t.o.DataPath {
		case DataPathOff:
			return nil
		case DataPathSummary:
			return t.summarise(ctx, c, r)
		}
	}
	c.mu.Lock()
	if r.ClientID != "" {
		c.clientID = r.ClientID
	}
	principal := c.principal
	c.mu.Unlock()
	e := Event{
		Kind: KindRequest, Time: r.Time, Listener: c.info.Listener, Principal: principal,
		ClientAddress: c.info.ClientAddress, ClientID: r.ClientID, Connection: c.info.ID,
		APIKey: r.APIKey, APIVersion: r.APIVersion, Decision: r.Decision, ErrorCode: r.ErrorCode,
		Resources: r.Resources, PartitionsOmitted: r.PartitionsOmitted, Reason: r.Reason,
	}
	return t.enqueue(ctx, &e)
}

// summarise adds r to c's summary, and records the summary if its
// interval has passed: from the connection's reader, so that a full queue
// holds back the client the summary is of.
func (t *Trail) summarise(ctx context.Context, c *Conn, r *Request) error {
	now := t.o.Now()
	c.mu.Lock()
	if r.ClientID != "" {
		c.clientID = r.ClientID
	}
	c.sum.add(r, t.o.MaxSummaryEntries)
	var e *Event
	if now.Sub(c.sum.since) >= t.o.Interval {
		e = c.takeSummary(now)
	}
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	return t.enqueue(ctx, e)
}

// takeSummary returns c's summary as an event ending at now, or nil when
// it is empty, and starts the next. c.mu is held.
func (c *Conn) takeSummary(now time.Time) *Event {
	s := &c.sum
	if len(s.resources) == 0 && s.omitted == 0 {
		s.since = now
		return nil
	}
	e := &Event{
		Kind: KindSummary, Time: now, Since: s.since, Listener: c.info.Listener, Principal: c.principal,
		ClientAddress: c.info.ClientAddress, ClientID: c.clientID, Connection: c.info.ID,
		PartitionsOmitted: s.omitted, Resources: s.event(),
	}
	e.APIKey = e.Resources[0].APIKey
	s.reset(now)
	return e
}

// Close implements Recorder.
func (t *Trail) Close(ctx context.Context, c *Conn) error {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.mu.Lock()
	e := c.takeSummary(t.o.Now())
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	return t.enqueue(ctx, e)
}

// enqueue queues e: a copy to be encoded with the events queued beside
// it (see Queue.encode), or, for an event that might not fit MaxEventBytes
// or the queue, encoded here into a record of its exact size, shed to
// MaxEventBytes if need be.
func (t *Trail) enqueue(ctx context.Context, e *Event) error {
	if e.Time.IsZero() {
		e.Time = t.o.Now()
	}
	if n := eventBound(t.src, e); n <= t.o.MaxEventBytes {
		if t.q.holds(recordSize(n, e.Principal)) {
			return t.q.Enqueue(ctx, Record{Key: e.Principal, lazy: ownEvent(t.src, e, n)})
		}
	}
	bp := t.bufs.Get().(*[]byte)
	b := AppendEvent((*bp)[:0], t.src, e)
	if len(b) > t.o.MaxEventBytes {
		b = t.shrink(b[:0], e)
	}
	v := make([]byte, len(b))
	copy(v, b)
	if cap(b) <= 64<<10 { // one huge event does not pin its buffer
		*bp = b
		t.bufs.Put(bp)
	}
	return t.q.Enqueue(ctx, Record{Value: v, Key: e.Principal})
}

// shrink encodes into b a copy of e that fits MaxEventBytes: the
// partitions of every resource left out first, then resources from the
// end, each counted. The decision and error code are those of the whole
// event. The id drawn for the event that did not fit is skipped.
func (t *Trail) shrink(b []byte, e *Event) []byte {
	small := *e
	small.Decision, small.ErrorCode = e.decision(), e.errorCode()
	res := make([]Resource, len(e.Resources))
	copy(res, e.Resources)
	for i := range res {
		small.PartitionsOmitted += int64(len(res[i].Partitions))
		res[i].Partitions = nil
	}
	small.Resources = res
	for {
		b = AppendEvent(b[:0], t.src, &small)
		if len(b) <= t.o.MaxEventBytes || len(small.Resources) <= 1 {
			return b
		}
		// Halve the resources kept: a few encodings whatever the count.
		keep := len(small.Resources) / 2
		small.ResourcesOmitted += int64(len(small.Resources) - keep)
		small.Resources = small.Resources[:keep]
	}
}

// flushEvery records, every interval, the summaries of connections that
// sent nothing since theirs fell due.
func (t *Trail) flushEvery() {
	defer close(t.done)
	tick := time.NewTicker(t.o.Interval / 4)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.flushDue(t.ctx, false)
		}
	}
}

// flushDue records the summaries that are due, or all with every.
func (t *Trail) flushDue(ctx context.Context, every bool) {
	t.mu.Lock()
	conns := make([]*Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	now := t.o.Now()
	for _, c := range conns {
		c.mu.Lock()
		var e *Event
		if every || now.Sub(c.sum.since) >= t.o.Interval {
			e = c.takeSummary(now)
		}
		c.mu.Unlock()
		if e != nil {
			// Blocks while the queue is full: the summaries of quiet
			// connections wait their turn like any event. An error is
			// counted by the queue.
			_ = t.enqueue(ctx, e)
		}
	}
}

// Err returns why the trail is not healthy, or nil; see Queue.Err.
func (t *Trail) Err() error { return t.q.Err() }

// Shutdown records the pending summary of every connection still open,
// then closes the queue, which writes every queued event unless ctx ends
// first (see Queue.Close).
func (t *Trail) Shutdown(ctx context.Context) error {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		t.cancel()
		<-t.done
	}
	defer t.cancel()
	t.flushDue(ctx, true)
	return t.q.Close(ctx)
}
