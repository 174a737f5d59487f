package pipeprobe

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Acks is the acknowledgement a Produce request asks for.
type Acks int

const (
	// AcksAll is acks=-1, the zero value.
	AcksAll Acks = iota
	// AcksLeader is acks=1.
	AcksLeader
	// AcksNone is acks=0: nothing is answered, so a run records no
	// responses and only the log can show a violation.
	AcksNone
)

func (a Acks) String() string {
	switch a {
	case AcksAll:
		return "all"
	case AcksLeader:
		return "leader"
	case AcksNone:
		return "none"
	}
	return fmt.Sprintf("Acks(%d)", int(a))
}

func (a Acks) wire() int16 {
	switch a {
	case AcksLeader:
		return 1
	case AcksNone:
		return 0
	}
	return -1
}

// Produce versions Options.Version accepts: v3 is the first with record
// batches, and v13 names topics by id, which this client does not look up.
const (
	MinProduceVersion     = 3
	MaxProduceVersion     = 12
	DefaultProduceVersion = 9
)

// Options tunes ProducePipelined.
type Options struct {
	// Window bounds the requests in flight. If zero, all n are sent
	// without waiting for any response.
	Window int
	// Acks is the acknowledgement asked for; the zero value is AcksAll.
	Acks Acks
	// Version is the Produce version sent. If zero,
	// DefaultProduceVersion, the first flexible one.
	Version int16
	// Seed shuffles the correlation ids. If zero, 1, so that a run is
	// repeatable.
	Seed uint64
	// ClientID is the request header's client id. If empty, "pipeprobe".
	ClientID string
	// Timeout is the Produce request's broker-side timeout. If zero, 10s.
	Timeout time.Duration
}

// Default returns o with its zero fields filled in for n requests.
func (o Options) Default(n int) Options {
	if o.Window == 0 {
		o.Window = n
	}
	if o.Version == 0 {
		o.Version = DefaultProduceVersion
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ClientID == "" {
		o.ClientID = "pipeprobe"
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return o
}

// Validate reports the first field that cannot be used, after Default.
func (o Options) Validate() error {
	switch {
	case o.Window < 1:
		return fmt.Errorf("pipeprobe: Options.Window %d is below 1", o.Window)
	case o.Acks < AcksAll || o.Acks > AcksNone:
		return fmt.Errorf("pipeprobe: Options.Acks %d is not AcksAll, AcksLeader or AcksNone", o.Acks)
	case o.Version < MinProduceVersion || o.Version > MaxProduceVersion:
		return fmt.Errorf("pipeprobe: Options.Version %d is outside %d..%d", o.Version, MinProduceVersion, MaxProduceVersion)
	case o.Timeout < 0:
		return fmt.Errorf("pipeprobe: Options.Timeout %v is negative", o.Timeout)
	}
	return nil
}

// ProducePipelined opens one connection to addr and sends n single-record,
// non-idempotent Produce requests to topic/partition, request i carrying
// the value strconv.Itoa(i), with at most opts.Window in flight. It reads
// every response (none for AcksNone) and records each one's correlation
// id, base offset and error code. The topic must exist.
//
// The error reports a failure to run the probe: a dial or I/O error, a
// malformed response or an unknown correlation id. Ordering violations
// are not errors here; call Result.Check. The Result holds whatever was
// recorded before an error.
func ProducePipelined(ctx context.Context, addr, topic string, partition int32, n int, opts Options) (Result, error) {
	if n < 1 {
		return Result{}, fmt.Errorf("pipeprobe: %d requests: must be at least 1", n)
	}
	opts = opts.Default(n)
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{Topic: topic, Partition: partition, Acks: opts.Acks.wire(), Sent: correlationIDs(n, opts.Seed)}
	now := time.Now().UnixMilli()
	reqs := make([]kmsg.Request, n)
	for i := range n {
		reqs[i] = produceRequest(topic, partition, i, now, opts)
	}
	if opts.Acks == AcksNone {
		return res, sendUnanswered(ctx, addr, reqs, res.Sent, opts.ClientID)
	}
	pres, err := Pipeline(ctx, addr, reqs, PipelineOptions{Window: opts.Window, Seed: opts.Seed, ClientID: opts.ClientID})
	for _, seq := range pres.Arrived {
		x := pres.Exchanges[seq]
		resp, perr := partitionResult(x.Resp.(*kmsg.ProduceResponse), topic, partition)
		if perr != nil {
			return res, perr
		}
		resp.CorrID, resp.Seq = x.CorrID, seq
		res.Responses = append(res.Responses, resp)
	}
	return res, err
}

// sendUnanswered writes requests that expect no response on one
// connection.
func sendUnanswered(ctx context.Context, addr string, reqs []kmsg.Request, ids []int32, clientID string) error {
	c, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	for i, req := range reqs {
		if _, err := c.c.Write(f.AppendRequest(nil, req, ids[i])); err != nil {
			return c.wrap(err)
		}
	}
	return nil
}

func partitionResult(resp *kmsg.ProduceResponse, topic string, partition int32) (Response, error) {
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return Response{BaseOffset: p.BaseOffset, ErrorCode: p.ErrorCode}, nil
			}
		}
	}
	return Response{}, fmt.Errorf("%w: produce response lacks %s/%d", ErrMalformed, topic, partition)
}

// correlationIDs returns n distinct ids in a seeded shuffled order that is
// never increasing, offset from zero so that no id is the default value.
func correlationIDs(n int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, seed))
	ids := make([]int32, n)
	for i, p := range rng.Perm(n) {
		ids[i] = int32(1000 + 7*p)
	}
	if n > 1 && slices.IsSorted(ids) {
		slices.Reverse(ids)
	}
	return ids
}

func produceRequest(topic string, partition int32, i int, ts int64, opts Options) *kmsg.ProduceRequest {
	return NewProduce(ProduceSpec{
		Topic: topic, Partition: partition, Value: []byte(strconv.Itoa(i)), Timestamp: ts,
		Version: opts.Version, Acks: opts.Acks.wire(), Timeout: opts.Timeout,
	})
}

// ProduceSpec describes a Produce request of one single-record batch.
type ProduceSpec struct {
	Topic     string
	Partition int32
	Value     []byte
	Timestamp int64 // milliseconds since the epoch
	Version   int16
	Acks      int16         // -1, 0 or 1
	Timeout   time.Duration // the broker-side timeout
	// Producer is the idempotent producer that writes the batch at
	// Sequence. If nil, the batch carries no producer id and the broker
	// appends it without sequence checks.
	Producer *Producer
	Sequence int32
	// Transactional marks the batch as part of Producer's open
	// transaction (attribute bit 0x10): the broker hides it from
	// read_committed consumers until EndTxn commits it. It needs a
	// Producer from a transactional InitProducerID.
	Transactional bool
}

// Producer is an idempotent producer's identity, from InitProducerID.
type Producer struct {
	ID    int64
	Epoch int16
}

// NewProduce builds the request spec describes.
func NewProduce(spec ProduceSpec) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = spec.Version
	req.Acks = spec.Acks
	req.TimeoutMillis = int32(spec.Timeout.Milliseconds())
	t := kmsg.NewProduceRequestTopic()
	t.Topic = spec.Topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = spec.Partition
	p.Records = recordBatch(spec)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// attrTransactional is the record batch attribute bit that marks a
// transactional batch.
const attrTransactional = 0x10

// recordBatch encodes a v2 batch of one uncompressed record.
func recordBatch(spec ProduceSpec) []byte {
	rec := kmsg.Record{Value: spec.Value}
	// Length counts the bytes after itself; a zero Length encodes in one
	// byte.
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       spec.Timestamp,
		MaxTimestamp:         spec.Timestamp,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              rec.AppendTo(nil),
	}
	if p := spec.Producer; p != nil {
		batch.ProducerID, batch.ProducerEpoch, batch.FirstSequence = p.ID, p.Epoch, spec.Sequence
	}
	if spec.Transactional {
		batch.Attributes |= attrTransactional
	}
	// Length counts the bytes after FirstOffset (8) and itself (4).
	batch.Length = int32(len(batch.AppendTo(nil)) - 12)
	// The CRC covers everything after itself, from byte 21 on.
	batch.CRC = int32(crc32.Checksum(batch.AppendTo(nil)[21:], crc32c))
	return batch.AppendTo(nil)
}
