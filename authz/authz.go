// Package authz enforces an ACL file on the proxy's clients. It holds the
// running acl.Authorizer, swapped whole when the file is reloaded, and
// turns a request's verdict into what the proxy does with it: forward it
// untouched, answer it at the proxy, forward it with the denied entries
// left out and their refusals merged into the answer, or close the
// connection (a denied acks=0 write, as Kafka closes). It knows nothing of
// sockets: the proxy hands it a request frame and, when asked, the decoded
// answer.
//
// A decision never changes a request's place among the connection's
// responses: a local answer is delivered where the request's response
// would have been, and a request with denied entries is still forwarded
// (or answered) in its turn.
package authz

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/wire"
)

// Counter counts denials by resource type and operation, both from closed
// sets (acl.ResourceType and acl.Operation names); nil counts nothing.
type Counter interface {
	ACLDenial(resource, operation string)
}

// Guard enforces one ACL file. Its methods are safe for concurrent use.
type Guard struct {
	file string
	opts acl.Options
	cur  atomic.Pointer[rules]
	m    Counter
	log  *slog.Logger

	// ids names the topics the clients name by id (Fetch and Produce
	// v13+), as learned from the Metadata answers the proxy passed on: a
	// client learns a topic's id there before it uses it.
	idMu  sync.RWMutex
	ids   map[[16]byte]string
	names func([16]byte) (string, bool) // resolveID, made once: no allocation per request

	// upstream lists the upstream's topics by id, for an id no Metadata
	// answer taught: a client may hold ids from another connection, or
	// from before the proxy started. nil: ids are learned only.
	upstream   atomic.Pointer[func(context.Context) (map[[16]byte]string, error)]
	resolveMu  sync.Mutex // one upstream listing at a time
	resolvedAt time.Time  // the last listing's, under resolveMu

	// gen counts the reloads: each rules has its own, so that a fetch
	// session opened or a decision kept under older rules is not trusted
	// (see Conn).
	gen atomic.Uint64

	logMu   sync.Mutex
	logNext time.Time
	skipped int
}

// logEvery is how often a denial may be logged: a client retrying a
// refused request must not flood the log.
const logEvery = 10 * time.Second

// New loads file and returns its Guard. m and log may be nil.
func New(file string, opts acl.Options, m Counter, log *slog.Logger) (*Guard, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{file: file, opts: opts, m: m, log: log, ids: map[[16]byte]string{}}
	g.names = g.resolveID
	if err := g.Reload(); err != nil {
		return nil, err
	}
	return g, nil
}

// Reload re-reads the file. On an error the running rules stay: a file
// caught half-edited neither opens nor closes anything.
func (g *Guard) Reload() error {
	set, err := acl.Load(g.file)
	if err != nil {
		return err
	}
	a, err := acl.New(set, g.opts)
	if err != nil {
		return err
	}
	g.cur.Store(&rules{a: a, gen: g.gen.Add(1)})
	return nil
}

// rules are the running rules and their generation, swapped together so
// that what a connection keeps is never filed under the wrong ones.
type rules struct {
	a   *acl.Authorizer
	gen uint64
}

// Conn is one client connection's authorization state, kept by the
// proxy; the zero value is a new connection's.
//
// An incremental Fetch names only the partitions that changed, while the
// upstream answers every partition of its fetch session: a topic the
// rules denied after it entered the session would go on being served.
// Kafka checks every partition of the session; the proxy, which does not
// hold the session, makes the client open a new one instead, naming
// every partition, which is checked: an incremental Fetch on a connection
// that has not fetched under the running rules is forwarded without its
// session, and the client, told so by the answer, starts afresh.
//
// It also keeps the connection's last decisions (decisions): a client
// writes the same few topics request after request, and a decision over
// a large ACL file costs a lookup per prefix length.
type Conn struct {
	gen  uint64 // the rules' generation this connection last fetched under
	seen bool   // the connection has fetched
	dec  decisions
	// head reads Produce heads (ProduceHead), its topic buffer reused.
	head wire.ProduceStream
	// kept lends dec to Check (acl.Client.Kept).
	kept kept
}

// staleSession reports whether f continues a fetch session that may
// predate the rules of generation gen, and notes that the connection now
// fetches under them.
func (g *Guard) staleSession(st *Conn, f *kmsg.FetchRequest, gen uint64) bool {
	stale := st.stale(f.Version, f.SessionID, gen)
	st.gen, st.seen = gen, true
	return stale
}

// stale reports whether a Fetch at version in session continues a fetch
// session that may predate the rules of generation gen: the connection
// has not fetched yet, or fetched under other rules.
func (st *Conn) stale(version int16, session int32, gen uint64) bool {
	return version >= 7 && session != 0 && (!st.seen || st.gen != gen)
}

// File is the ACL file's path.
func (g *Guard) File() string { return g.file }

// Authorizer is the running rules.
func (g *Guard) Authorizer() *acl.Authorizer { return g.cur.Load().a }

// Client is who sends requests on a connection, for Guard.Request.
func (g *Guard) Client(principal string, host netip.Addr) acl.Client {
	if principal == "" {
		principal = Anonymous
	}
	return acl.Client{Principal: principal, Host: host, TopicName: g.names}
}

// Anonymous is the principal of a client that did not authenticate, as
// Kafka names it.
const Anonymous = "User:ANONYMOUS"

func (g *Guard) topicName(id [16]byte) (string, bool) {
	g.idMu.RLock()
	defer g.idMu.RUnlock()
	n, ok := g.ids[id]
	return n, ok
}

// ResolveTopicIDsWith gives the Guard list, which asks the upstream for
// every topic's id and name. A topic id no Metadata answer taught is then
// looked up there before a request naming it is decided, instead of
// answered UNKNOWN_TOPIC_ID.
func (g *Guard) ResolveTopicIDsWith(list func(context.Context) (map[[16]byte]string, error)) {
	g.upstream.Store(&list)
}

// resolveEvery bounds how often an unknown id asks the upstream: ids that
// name no topic, a client's typo or a deleted topic, must not turn every
// request into a listing of the cluster. A client retries
// UNKNOWN_TOPIC_ID, and its retry after a topic's creation finds it.
const resolveEvery = time.Second

// resolveTimeout bounds the wait of a request naming an unknown id.
const resolveTimeout = 10 * time.Second

// resolveID names the topic of id: as learned, or else by the upstream's
// listing. Only a request naming an id not learned waits for the upstream,
// and only that request's connection waits.
func (g *Guard) resolveID(id [16]byte) (string, bool) {
	if n, ok := g.topicName(id); ok {
		return n, true
	}
	list := g.upstream.Load()
	if list == nil {
		return "", false
	}
	g.resolveMu.Lock()
	defer g.resolveMu.Unlock()
	if n, ok := g.topicName(id); ok {
		// A listing made while this one waited found it.
		return n, true
	}
	if !g.resolvedAt.IsZero() && time.Since(g.resolvedAt) < resolveEvery {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	topics, err := (*list)(ctx)
	g.resolvedAt = time.Now()
	if err != nil {
		g.log.Warn("listing the upstream's topic ids", "error", err)
		return "", false
	}
	var zero [16]byte
	g.idMu.Lock()
	for tid, n := range topics {
		if tid != zero && n != "" {
			g.ids[tid] = n
		}
	}
	g.idMu.Unlock()
	return g.topicName(id)
}

func (g *Guard) learn(resp *kmsg.MetadataResponse) {
	var zero [16]byte
	g.idMu.Lock()
	defer g.idMu.Unlock()
	for _, t := range resp.Topics {
		if t.Topic != nil && t.TopicID != zero && t.ErrorCode == 0 {
			g.ids[t.TopicID] = *t.Topic
		}
	}
}

// Action is what the proxy does with a request.
type Action uint8

const (
	// Pass: forward the request as it was read.
	Pass Action = iota
	// Answer: Outcome.Response is the whole answer; nothing is forwarded.
	Answer
	// Forward: forward Outcome.Frame (Outcome.Request decoded) in the
	// request's place: the denied entries are left out.
	Forward
	// Close: nothing is forwarded and the connection closes without an
	// answer, as Kafka closes on an acks=0 Produce it refuses.
	Close
)

// Outcome is a request's fate.
type Outcome struct {
	Action Action
	// Response is the answer's frame, the client's correlation id in it.
	Response []byte
	// Frame is the request to forward instead; Request is it decoded.
	Frame   []byte
	Request kmsg.Request
	// Fix, when not nil, completes the answer to what is forwarded: the
	// refusals of the entries left out, the entries the client may not
	// see removed. Its Apply takes the decoded answer.
	Fix *Fix
	// CloseAfter: close the connection once the forwarded acks=0 write
	// is sent, as Kafka closes when any partition of one is refused.
	CloseAfter bool
	// Err says why, for Close and CloseAfter.
	Err error
	// Refused is what was refused, for the audit trail: the resources
	// denied (Answer, Close, or the entries a Forward leaves out), or the
	// one resource a refusal of the whole request speaks of. Empty when
	// nothing was refused.
	Refused []Refusal
}

// Refusal is one resource a request was refused on.
type Refusal struct {
	Resource  acl.ResourceType
	Name      string // acl.ClusterName for the cluster; a whole refusal's group or transactional id from the request; empty when it names none
	Operation acl.Operation
	Code      int16
}

// refused lists what v refuses of req.
func refused(req kmsg.Request, v acl.Verdict) []Refusal {
	key := req.Key()
	if v.Code != 0 {
		rt := codeResource(v.Code)
		name := wholeName(req, rt)
		if rt == acl.Cluster {
			name = acl.ClusterName
		}
		return []Refusal{{Resource: rt, Name: name, Operation: needOperation(key, rt), Code: v.Code}}
	}
	rs := make([]Refusal, len(v.Denied))
	for i, d := range v.Denied {
		rs[i] = Refusal{Resource: d.Resource, Name: d.Name, Operation: needOperation(key, d.Resource), Code: d.Code}
	}
	return rs
}

// needOperation is the operation a request with key key needs on a
// resource of type rt: the first of its rule's needs on that type.
func needOperation(key int16, rt acl.ResourceType) acl.Operation {
	rule, _ := acl.RuleFor(key)
	for _, n := range rule.Needs {
		if n.Resource == rt {
			return n.Operation
		}
	}
	return acl.Describe
}

// ErrDenied is why a connection closes after a refused acks=0 Produce.
var ErrDenied = fmt.Errorf("acks=0 produce denied by the ACL file")

// Request decides on one request frame (length prefix included) with
// header hdr. req is the request decoded when the caller has it already
// (the single topology), nil otherwise. noResp: the client expects no
// answer (acks=0), whatever the frame now says.
//
// st, the connection's state, may be nil (then nothing is kept).
func (g *Guard) Request(st *Conn, c acl.Client, hdr wire.RequestHeader, frame []byte, req kmsg.Request, noResp bool) (Outcome, error) {
	rs := g.cur.Load()
	a := rs.a
	switch hdr.Key {
	case 18, 17, 36: // ApiVersions, SaslHandshake, SaslAuthenticate need nothing
		return Outcome{}, nil
	}
	if req == nil && hdr.Key == 0 && g.produceAllowed(st, rs, c, hdr, frame) {
		return Outcome{}, nil
	}
	if req == nil && hdr.Key == 1 && g.fetchAllowed(st, rs, c, hdr, frame) {
		return Outcome{}, nil
	}
	if req == nil {
		req = kmsg.RequestForKey(hdr.Key)
		if req == nil {
			return Outcome{}, nil
		}
		req.SetVersion(hdr.Version)
		if err := req.ReadFrom(frame[hdr.Body:]); err != nil {
			return Outcome{}, err
		}
	}
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		return g.answer(hdr, a.DescribeACLs(c, r)), nil
	case *kmsg.CreateACLsRequest:
		return g.answer(hdr, a.CreateACLs(c, g.file, r)), nil
	case *kmsg.DeleteACLsRequest:
		return g.answer(hdr, a.DeleteACLs(c, g.file, r)), nil
	}
	changed := false
	if f, ok := req.(*kmsg.FetchRequest); ok && st != nil && g.staleSession(st, f, rs.gen) {
		f.SessionID, f.SessionEpoch, f.ForgottenTopics = 0, -1, nil
		changed = true
	}
	v := a.Check(g.keptClient(st, rs, c), req)
	if v.Unhandled {
		v = g.unhandled(a, c, hdr.Key)
	}
	g.count(c, hdr.Key, v)
	if v.Code != 0 {
		if noResp {
			return Outcome{Action: Close, Err: ErrDenied, Refused: refused(req, v)}, nil
		}
		return g.refuse(hdr, req, errorResponse(req, v.Code), v), nil
	}
	fix := g.fixFor(a, c, req, v)
	if len(v.Denied) == 0 {
		if fix != nil && hdr.Key == 3 {
			g.autoCreate(a, c, req.(*kmsg.MetadataRequest), fix)
			changed = changed || fix.reencode
		}
		if changed {
			return g.forward(hdr, frame, req, fix), nil
		}
		return Outcome{Fix: fix}, nil
	}
	kept, parts, ok := strip(req, v)
	if !ok {
		// A request whose entries this package cannot separate is
		// refused whole, with the first denial's code: a denied entry is
		// never forwarded.
		if noResp {
			return Outcome{Action: Close, Err: ErrDenied, Refused: refused(req, v)}, nil
		}
		return g.refuse(hdr, req, errorResponse(req, v.Denied[0].Code), v), nil
	}
	if fix == nil {
		fix = &Fix{g: g, a: a, c: c}
	}
	fix.parts = parts
	if noResp {
		if !kept {
			return Outcome{Action: Close, Err: ErrDenied, Refused: refused(req, v)}, nil
		}
		out := g.forward(hdr, frame, req, nil)
		out.CloseAfter, out.Err, out.Refused = true, ErrDenied, refused(req, v)
		return out, nil
	}
	if !kept {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		fix.Apply(resp)
		return g.refuse(hdr, req, resp, v), nil
	}
	if hdr.Key == 3 {
		g.autoCreate(a, c, req.(*kmsg.MetadataRequest), fix)
	}
	out := g.forward(hdr, frame, req, fix)
	out.Refused = refused(req, v)
	return out, nil
}

// keptClient is c with the decisions kept on st, for Check alone: the
// Fix, which the upstream reader applies, must not reach them.
func (g *Guard) keptClient(st *Conn, rs *rules, c acl.Client) acl.Client {
	if st == nil {
		return c
	}
	st.kept = kept{st: st, rs: rs}
	c.Kept = &st.kept
	return c
}

// forward re-encodes req, which the caller changed, in frame's header.
func (g *Guard) forward(hdr wire.RequestHeader, frame []byte, req kmsg.Request, fix *Fix) Outcome {
	out := wire.AppendRequest(make([]byte, 0, len(frame)), frame, hdr, req.AppendTo)
	return Outcome{Action: Forward, Frame: out, Request: req, Fix: fix}
}

func (g *Guard) answer(hdr wire.RequestHeader, resp kmsg.Response) Outcome {
	return Outcome{Action: Answer, Response: wire.AppendResponse(nil, hdr.Correlation, hdr.ResponseFlexible(), resp.AppendTo)}
}

// refuse answers req with resp, a refusal of what v denies.
func (g *Guard) refuse(hdr wire.RequestHeader, req kmsg.Request, resp kmsg.Response, v acl.Verdict) Outcome {
	out := g.answer(hdr, resp)
	out.Refused = refused(req, v)
	return out
}

// unhandled decides a key whose needs depend on more than its request
// (delegation tokens) from the table alone: every need without a
// condition must be met, or the request is refused with the cluster's
// code.
func (g *Guard) unhandled(a *acl.Authorizer, c acl.Client, key int16) acl.Verdict {
	rule, ok := acl.RuleFor(key)
	if !ok {
		return acl.Verdict{Code: acl.ClusterAuthorizationFailed}
	}
	for _, n := range rule.Needs {
		if n.When != "" || n.Scope != acl.TheCluster {
			continue
		}
		if !a.Authorize(c.Principal, c.Host, n.Operation, n.Resource, acl.ClusterName) {
			return acl.Verdict{Code: acl.ClusterAuthorizationFailed}
		}
	}
	return acl.Verdict{}
}

// produceAllowed reports, without decoding the request, whether a
// Produce without a transactional id writes only topics the client may
// write: the common case, forwarded untouched. False sends the request on
// to the full check. Its records are not read: transactional records
// without a transactional id are refused by Kafka whatever the ACLs
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Check would refuse them.
func (g *Guard) produceAllowed(st *Conn, rs *rules, c acl.Client, hdr wire.RequestHeader, frame []byte) bool {
	body := frame[hdr.Body:]
	if id, ok := transactionalID(hdr, body); !ok || id != nil {
		return false
	}
	var s wire.ProduceScan
	if s.Reset(body, hdr.Version) != nil {
		return false
	}
	var k topicCheck
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		if !k.allowed(g, st, rs, c, acl.Write, p.Topic, p.TopicID) {
			return false
		}
	}
	return s.Err() == nil
}

// topicCheck decides the topics a request names in turn, once per run of
// the same topic, for the fast paths. Its zero value has decided none.
type topicCheck struct {
	last    []byte
	lastID  [16]byte
	checked bool
}

// allowed reports whether op is allowed on the topic named topic, or,
// where the request names it by id alone, on the topic learned for id;
// false for an id learned for none.
func (k *topicCheck) allowed(g *Guard, st *Conn, rs *rules, c acl.Client, op acl.Operation, topic []byte, id [16]byte) bool {
	if k.checked && string(topic) == string(k.last) && id == k.lastID {
		return true
	}
	name := topic
	if len(name) == 0 {
		n, ok := g.topicName(id)
		if !ok {
			return false
		}
		name = []byte(n)
	}
	if !allowed(st, rs, c, op, acl.Topic, name) {
		return false
	}
	k.last, k.lastID, k.checked = topic, id, true
	return true
}

// fetchAllowed reports whether a consumer's Fetch reads only topics the
// client may read, found by the scanner with nothing decoded: the common
// case, forwarded untouched, as the full check would forward it. False
// sends the request on to the full check: a follower's fetch, a session
// that may predate the rules, a topic id no Metadata answer taught, a
// topic the client may not read, a body the scanner cannot read.
func (g *Guard) fetchAllowed(st *Conn, rs *rules, c acl.Client, hdr wire.RequestHeader, frame []byte) bool {
	var s wire.FetchScan
	s.Reset(frame[hdr.Body:], hdr.Version)
	if st != nil && st.stale(hdr.Version, s.Session(), rs.gen) {
		return false
	}
	var k topicCheck
	for p, ok := s.Next(); ok; p, ok = s.Next() {
		if !k.allowed(g, st, rs, c, acl.Read, p.Topic, p.TopicID) {
			return false
		}
	}
	if id, ok := s.Replica(); !ok || id >= 0 {
		return false
	}
	if st != nil {
		st.gen, st.seen = rs.gen, true
	}
	return true
}

// count counts and logs a verdict's denials.
func (g *Guard) count(c acl.Client, key int16, v acl.Verdict) {
	if v.Code == 0 && len(v.Denied) == 0 {
		return
	}
	if g.m != nil {
		if v.Code != 0 {
			rt := codeResource(v.Code)
			g.m.ACLDenial(rt.String(), needOperation(key, rt).String())
		}
		for _, d := range v.Denied {
			g.m.ACLDenial(d.Resource.String(), needOperation(key, d.Resource).String())
		}
	}
	now := time.Now()
	g.logMu.Lock()
	if now.Before(g.logNext) {
		g.skipped++
		g.logMu.Unlock()
		return
	}
	g.logNext = now.Add(logEvery)
	skipped := g.skipped
	g.skipped = 0
	g.logMu.Unlock()
	first, code := "", v.Code
	if len(v.Denied) > 0 {
		first, code = v.Denied[0].Resource.String()+":"+v.Denied[0].Name, v.Denied[0].Code
	}
	g.log.Info("request denied by the ACL file", "principal", c.Principal, "host", c.Host.String(), "api", kmsg.NameForKey(key), "code", code,
		"denied", len(v.Denied), "first", first, "similar_not_logged", skipped)
}

// codeResource is the resource type a whole-request refusal speaks of.
func codeResource(code int16) acl.ResourceType {
	switch code {
	case acl.TopicAuthorizationFailed:
		return acl.Topic
	case acl.GroupAuthorizationFailed:
		return acl.Group
	case acl.TransactionalIDAuthorizationFailed:
		return acl.TransactionalID
	}
	return acl.Cluster
}

// ProduceHead reports whether a Produce request is allowed whole by what
// precedes its records: head is the start of its frame (length prefix
// included), frameLen the whole frame's length. It is when the request
// names one topic, which the client may write, and either no
// transactional id or one the client may write (then it does not matter
// whether the records are transactional). The proxy then forwards the
// request as it arrives, never holding it. False says nothing: the request
// is read whole and decided by Request.
//
// st, the connection's state, may be nil (then nothing is kept).
func (g *Guard) ProduceHead(st *Conn, c acl.Client, hdr wire.RequestHeader, head []byte, frameLen int) bool {
	if hdr.Key != 0 || hdr.Body > len(head) || frameLen < len(head) {
		return false
	}
	rs := g.cur.Load()
	body := head[hdr.Body:]
	id, ok := transactionalID(hdr, body)
	if !ok || id != nil && !allowed(st, rs, c, acl.Write, acl.TransactionalID, []byte(*id)) {
		return false
	}
	var ps wire.ProduceStream
	s := &ps
	if st != nil {
		s = &st.head
	}
	used, err := s.Start(body, hdr.Version, frameLen-hdr.Body)
	if err != nil || s.Topics() != 1 {
		return false
	}
	step, err := s.Next(body[used:])
	if err != nil || !step.Found {
		return false
	}
	name := step.Partition.Topic
	if len(name) == 0 {
		n, ok := g.topicName(step.Partition.TopicID)
		if !ok {
			return false
		}
		name = []byte(n)
	}
	return allowed(st, rs, c, acl.Write, acl.Topic, name)
}

// transactionalID reads a Produce body's transactional id (v3+; nil when
// null or before v3), aliasing body; false when body ends before it.
func transactionalID(hdr wire.RequestHeader, body []byte) (*string, bool) {
	if hdr.Version < 3 {
		return nil, true
	}
	r := kbin.Reader{Src: body}
	var id *string
	if hdr.Flexible() {
		id = r.UnsafeCompactNullableString()
	} else {
		id = r.UnsafeNullableString()
	}
	return id, r.Ok()
}
