package proxy

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit/capture"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/quota"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// API keys the proxy treats specially.
const (
	keyProduce         = 0
	keyFetch           = 1
	keyOffsetCommit    = 8
	keyTxnOffsetCommit = 28
	keyApiVersions     = wire.ApiVersionsKey
)

// request is one client request from the moment it is read until its
// response is written. Requests are pooled.
type request struct {
	hdr    wire.RequestHeader
	ord    ordering.Request
	seq    uint64
	upCorr int32 // correlation id on the upstream connection

	frame *wire.Buf // the request, until written upstream
	resp  *wire.Buf // the response, once received
	local *wire.Buf // a response the proxy makes itself; never forwarded

	// peekedBy: the request's frame was peeked at whole by this
	// connection's client reader, and may still be in its socket
	// (single_unread.go).
	peekedBy *conn

	// stream is how much of the request is still in the client socket
	// after frame, to be spliced upstream right behind it; scanBody: in
	// None mode, scanned for partitions on the way (bodystream.go).
	stream   int
	scanBody bool

	// Stamps for metrics, zero unless they are recorded (see metrics.go).
	readAt, sentAt time.Time
	upTook         time.Duration

	// split is the request's life in the single topology (package
	// single); nil in the others.
	split *single.Split

	// quota is the client's quotas when they apply to the request, and
	// throttle how long it is throttled for them (quota.go).
	quota    *quota.Client
	throttle time.Duration
	// timed is the client's quotas when its request_percentage applies
	// to the request: the proxy's time on its answer is added to it.
	timed *quota.Client
	// mergeAt is when the single topology began merging its answer,
	// when timed (single_host.go).
	mergeAt time.Time

	noResp    bool  // the client expects no response (acks=0)
	forcedAck bool  // acks=0 forwarded as acks=1 to learn when it is accepted
	failed    error // the upstream rejected a forced-ack produce

	// fix completes the answer as the request's authorization asks
	// (authz.go); nil: the answer goes as the upstream gave it.
	fix *authz.Fix
	// refused is what the authorization left out of the request
	// forwarded, for its audit event.
	refused []authz.Refusal
	// aud is what its audit event needs; nil when not audited.
	aud *capture.Req

	// vec: the response frame in pieces (respvec.go), of vecLen bytes;
	// vecFrom, when set, the pipe each piece is spliced from instead
	// (nil: from memory); vecDone gives back what they alias but resp.
	vec     net.Buffers
	vecFrom []*sockio.Pipe
	vecLen  int
	vecDone func()

	// Memory held in the process budget (limits.go), released by free or,
	// for the frame, once it is written upstream.
	bud                                  *budget.Budget
	frameCharge, respCharge, stateCharge charge
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

func getRequest() *request { return requestPool.Get().(*request) }

// free returns every buffer r holds.
func (r *request) free() {
	wire.Put(r.frame)
	if r.resp != noResponse {
		wire.Put(r.resp)
	}
	wire.Put(r.local)
	r.frameCharge.Release(r.bud)
	r.respCharge.Release(r.bud)
	r.stateCharge.Release(r.bud)
	if r.split != nil {
		r.split.ReleaseAll(r.bud)
	}
	if r.vecDone != nil {
		r.vecDone()
	}
	*r = request{}
}

func putRequest(r *request) {
	r.free()
	requestPool.Put(r)
}

// decoder is the client reader's scratch for classifying requests. It keeps
// nothing of a request between requests: the scanners, which alias the
// frame they read, live on the stack of one classification (a frame put
// back into its pool would otherwise stay alive through them), no message
// is decoded into it, and a key slice grown by a wide write is dropped once
// the write is sequenced (see trim).
type decoder struct {
	keys []ordering.Key
}

// keepKeys is the key capacity the decoder keeps between requests; a wider
// write's slice is given back, so that an idle connection holds no more
// than this whatever it sent before.
const keepKeys = 64

// trim drops what the last request left in d; the client reader calls it
// once the request is sequenced (the sequencer copies its keys).
func (d *decoder) trim() {
	if d == nil {
		return
	}
	if cap(d.keys) > keepKeys {
		d.keys = nil
	}
	d.keys = d.keys[:0]
}

// addKey appends k unless d already holds more than ordering.MaxWriteKeys
// keys: one past the limit is enough for the sequencer to make the write a
// barrier, so a request's partitions cost the connection at most that many
// keys however many it names.
func (d *decoder) addKey(k ordering.Key) {
	if len(d.keys) <= ordering.MaxWriteKeys {
		d.keys = append(d.keys, k)
	}
}

// decoder returns the connection's decoder, made on first use so an idle
// connection does not carry one.
func (c *conn) decoder() *decoder {
	if c.dec == nil {
		c.dec = new(decoder)
	}
	return c.dec
}

// served reports whether the upstream serves h's key and version, when the
// proxy was limited by WithVersions.
func (p *Proxy) served(h wire.RequestHeader) bool {
	if p.versions == nil {
		return true
	}
	max, ok := p.versions(h.Key)
	return ok && h.Version <= max
}

// parseRequest reads the header of buf, decides how the request is
// ordered, and makes the changes the proxy must make before forwarding.
// An error closes the connection.
func (c *conn) parseRequest(buf *wire.Buf) (*request, error) {
	h, err := wire.ParseRequestHeader(buf.B)
	if err != nil {
		if h.Key == keyApiVersions && errors.Is(err, wire.ErrUnsupportedVersion) {
			return c.unsupportedApiVersions(buf, h), nil
		}
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if h.Key != keyApiVersions && !c.p.served(h) {
		return nil, fmt.Errorf("%w: %s v%d is not served by the upstream", ErrBadRequest, kmsg.NameForKey(h.Key), h.Version)
	}
	r := getRequest()
	r.hdr, r.frame = h, buf
	switch h.Key {
	case keyProduce:
		err = c.classifyProduce(r)
	case keyOffsetCommit, keyTxnOffsetCommit:
		err = c.classifyCommit(r)
	case keyApiVersions:
		err = c.prepareApiVersions(r)
	case keySaslHandshake, keySaslAuthenticate:
		if c.one == nil {
			err = c.prepareSASL(r)
		}
	}
	if err == nil && c.one != nil && r.frame != nil {
		if err := c.reserveSplit(r); err != nil {
			r.frame = nil
			putRequest(r)
			return nil, err
		}
		err = r.split.Decode()
	}
	if err != nil {
		r.frame = nil
		putRequest(r)
		return nil, fmt.Errorf("%w: %s v%d: %v", ErrBadRequest, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return r, nil
}

// spliceable returns a request for head, the first bytes of a frame of
// size bytes, if its body can be spliced: a Produce whose header and acks
// lie within head; in None mode, or audited, see spliceableNone. Otherwise
// it returns nil and the caller reads the whole frame, which also gives a
// malformed request its precise error.
func (c *conn) spliceable(head *wire.Buf, size int32) *request {
	h, err := wire.ParseRequestHeader(head.B)
	if err != nil || h.Key != keyProduce || !c.p.served(h) || !c.headAllowed(h, head.B, size) {
		return nil
	}
	if c.mode == ordering.None || c.aud.countWrites {
		// In Connection mode when audited, streamed as in None mode,
		// to be counted (audit/capture), acks=0 ones too.
		return c.spliceableNone(head, h, size)
	}
	acks, _, err := produceAcks(head.B[h.Body:], h.Version, h.Flexible())
	if err != nil {
		return nil
	}
	r := getRequest()
	r.hdr, r.frame = h, head
	r.stream = 4 + int(size) - len(head.B)
	r.noResp = acks == 0
	r.ord = ordering.Request{Kind: ordering.Write, NoResponse: r.noResp}
	return r
}

// classifyProduce finds acks and, in None mode, the partitions written.
// Records stay the bytes they arrived in.
func (c *conn) classifyProduce(r *request) error {
	body := r.frame.B[r.hdr.Body:]
	acks, off, err := produceAcks(body, r.hdr.Version, r.hdr.Flexible())
	if err != nil {
		return err
	}
	r.noResp = acks == 0
	r.ord = ordering.Request{Kind: ordering.Write, NoResponse: r.noResp}
	if c.mode == ordering.Connection {
		return nil
	}
	if r.noResp {
		// Forward as acks=1: the proxy must learn when the write is
		// accepted before releasing the next one to its partitions.
		body[off], body[off+1] = 0, 1
		r.forcedAck = true
	}
	d := c.decoder()
	d.keys = d.keys[:0]
	if err := d.scanProduce(body, r.hdr.Version); err != nil {
		return err
	}
	r.ord.Keys = d.keys
	return nil
}

// scanProduce hashes the partitions a Produce request writes into d.keys,
// scanning the body without decoding it. The scan still reads a request of
// more than ordering.MaxWriteKeys partitions to its end, but keeps one key
// past the limit, which is enough for the sequencer to make it a barrier.
// A body the scanner cannot read is decoded with kmsg, which names the
// fault.
func (d *decoder) scanProduce(body []byte, version int16) error {
	var s wire.ProduceScan
	if s.Reset(body, version) == nil {
		for p, ok := s.Next(); ok; p, ok = s.Next() {
			d.addKey(partitionKey('p', "", kbin.UnsafeString(p.Topic), p.TopicID, p.Partition))
		}
		if s.Err() == nil {
			return nil
		}
	}
	d.keys = d.keys[:0]
	// A message of its own, dropped on return: a decoded request aliases
	// the frame.
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	if err := req.UnsafeReadFrom(body); err != nil {
		return err
	}
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			d.addKey(partitionKey('p', "", t.Topic, t.TopicID, t.Partitions[j].Partition))
		}
	}
	return nil
}

// produceAcks reads acks without decoding the request: it follows the
// transactional id (v3+), which is compact in flexible versions.
func produceAcks(body []byte, version int16, flexible bool) (acks int16, off int, err error) {
	rd := kbin.Reader{Src: body}
	if version >= 3 {
		if flexible {
			rd.UnsafeCompactNullableString()
		} else {
			rd.UnsafeNullableString()
		}
	}
	off = len(body) - len(rd.Src)
	acks = rd.Int16()
	if !rd.Ok() {
		return 0, 0, errors.New("truncated before acks")
	}
	return acks, off, nil
}

// classifyCommit finds, in None mode, the group partitions committed,
// scanning the body without decoding it (keys capped as a Produce's are).
func (c *conn) classifyCommit(r *request) error {
	r.ord = ordering.Request{Kind: ordering.Write}
	if c.mode == ordering.Connection {
		return nil
	}
	d := c.decoder()
	d.keys = d.keys[:0]
	scanned, err := d.scanCommit(r.hdr.Key, r.frame.B[r.hdr.Body:], r.hdr.Version)
	if err != nil {
		return err
	}
	if !scanned {
		r.ord.Kind = ordering.Barrier
		return nil
	}
	r.ord.Keys = d.keys
	return nil
}

// scanCommit hashes the group partitions an OffsetCommit or
// TxnOffsetCommit request commits into d.keys, as scanProduce does for a
// Produce. A body the scanner cannot read is decoded with kmsg, which names
// the fault; should kmsg read what the scanner could not (which its
// differential fuzz target says never happens), scanned is false and the
// commit is ordered as a barrier: the same order, without its keys.
func (d *decoder) scanCommit(key int16, body []byte, version int16) (scanned bool, err error) {
	var s wire.CommitScan
	if s.Reset(key, body, version) == nil {
		group := kbin.UnsafeString(s.Group)
		for p, ok := s.Next(); ok; p, ok = s.Next() {
			d.addKey(partitionKey('c', group, kbin.UnsafeString(p.Topic), p.TopicID, p.Partition))
		}
		if s.Err() == nil {
			return true, nil
		}
	}
	d.keys = d.keys[:0]
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	return false, req.ReadFrom(body)
}

var keySeed = maphash.MakeSeed()

// partitionKey hashes what a write touches. Topic names and ids hash
// differently, so a client that switched between them on one connection
// would lose the ordering between the two spellings; no client does.
func partitionKey(domain byte, group, topic string, id [16]byte, partition int32) ordering.Key {
	var h maphash.Hash
	h.SetSeed(keySeed)
	h.WriteByte(domain)
	h.WriteString(group)
	h.WriteByte(0)
	if topic != "" {
		h.WriteString(topic)
	} else {
		h.Write(id[:])
	}
	h.WriteByte(byte(partition >> 24))
	h.WriteByte(byte(partition >> 16))
	h.WriteByte(byte(partition >> 8))
	h.WriteByte(byte(partition))
	return ordering.Key(h.Sum64())
}

// unsupportedApiVersions answers an ApiVersions request above the version
// the proxy parses the way a broker does: a v0 body with
// UNSUPPORTED_VERSION and the versions of ApiVersions itself, so the client
// retries lower. It is sequenced like any request, so the answer keeps its
// place among the responses.
func (c *conn) unsupportedApiVersions(buf *wire.Buf, h wire.RequestHeader) *request {
	max, _ := wire.MaxVersion(keyApiVersions)
	resp := kmsg.NewApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: keyApiVersions, MinVersion: 0, MaxVersion: max}}
	wire.Put(buf)
	r := getRequest()
	r.hdr = h
	r.ord = ordering.Request{Kind: ordering.Barrier}
	r.local = &wire.Buf{B: wire.AppendResponse(nil, h.Correlation, false, resp.AppendTo)}
	return r
}

// prepareApiVersions clears the v5 ClusterID and NodeID on bootstrap
// connections: the upstream behind the bootstrap listener is any broker, and
// a mismatch would make it answer REBOOTSTRAP_REQUIRED. Both are cleared
// together, since clearing one alone is INVALID_REQUEST.
func (c *conn) prepareApiVersions(r *request) error {
	r.ord = ordering.Request{Kind: ordering.Barrier}
	if r.hdr.Version < 5 || c.node >= 0 {
		return nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = r.hdr.Version
	if err := req.ReadFrom(r.frame.B[r.hdr.Body:]); err != nil {
		return err
	}
	if req.ClusterID == nil && req.NodeID == -1 {
		return nil
	}
	req.ClusterID, req.NodeID = nil, -1
	out := wire.AppendRequest(nil, r.frame.B, r.hdr, req.AppendTo)
	wire.Put(r.frame)
	r.frame = &wire.Buf{B: out}
	return nil
}
