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
	frames := make([][]byte, n)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID))
	now := time.Now().UnixMilli()
	for i := range n {
		frames[i] = f.AppendRequest(nil, produceRequest(topic, partition, i, now, opts), res.Sent[i])
	}

	c, err := dial(ctx, addr)
	if err != nil {
		return res, err
	}
	defer c.close()

	if opts.Acks == AcksNone {
		for _, frame := range frames {
			if _, err := c.c.Write(frame); err != nil {
				return res, c.wrap(err)
			}
		}
		return res, nil
	}

	// The writer runs beside the reader so that a full window never
	// stalls on a response the reader has not yet taken.
	window := make(chan struct{}, opts.Window)
	readerDone := make(chan struct{})
	writeErr := make(chan error, 1)
	go func() {
		writeErr <- c.writeWindowed(frames, window, readerDone)
	}()
	err = c.readProduceResponses(&res, opts.Version, window)
	close(readerDone)
	if err != nil {
		// Unblock a writer stuck on a full socket buffer.
		c.c.SetDeadline(time.Unix(1, 0))
		<-writeErr
		return res, err
	}
	if err := <-writeErr; err != nil {
		return res, err
	}
	return res, nil
}

func (c *conn) writeWindowed(frames [][]byte, window chan struct{}, readerDone <-chan struct{}) error {
	for _, frame := range frames {
		select {
		case window <- struct{}{}:
		case <-readerDone:
			return nil
		}
		if _, err := c.c.Write(frame); err != nil {
			return c.wrap(err)
		}
	}
	return nil
}

func (c *conn) readProduceResponses(res *Result, version int16, window <-chan struct{}) error {
	seqOf := make(map[int32]int, len(res.Sent))
	for i, id := range res.Sent {
		seqOf[id] = i
	}
	req := &kmsg.ProduceRequest{Version: version}
	for len(res.Responses) < len(res.Sent) {
		corr, body, err := c.readResponse()
		if err != nil {
			return fmt.Errorf("pipeprobe: reading response %d of %d: %w", len(res.Responses)+1, len(res.Sent), err)
		}
		seq, ok := seqOf[corr]
		if !ok {
			return fmt.Errorf("%w: response %d carries id %d", ErrUnknownCorrelation, len(res.Responses), corr)
		}
		delete(seqOf, corr)
		<-window
		kresp, err := parseResponse(req, body)
		if err != nil {
			return err
		}
		resp, err := partitionResult(kresp.(*kmsg.ProduceResponse), res.Topic, res.Partition)
		if err != nil {
			return err
		}
		resp.CorrID, resp.Seq = corr, seq
		res.Responses = append(res.Responses, resp)
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
	req := kmsg.NewPtrProduceRequest()
	req.Version = opts.Version
	req.Acks = opts.Acks.wire()
	req.TimeoutMillis = int32(opts.Timeout.Milliseconds())
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	p.Records = recordBatch([]byte(strconv.Itoa(i)), ts)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// recordBatch encodes a v2 batch of one uncompressed record with no
// producer id, so the broker appends it without sequence checks.
func recordBatch(value []byte, ts int64) []byte {
	rec := kmsg.Record{Value: value}
	// Length counts the bytes after itself; a zero Length encodes in one
	// byte.
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              rec.AppendTo(nil),
	}
	// Length counts the bytes after FirstOffset (8) and itself (4).
	batch.Length = int32(len(batch.AppendTo(nil)) - 12)
	// The CRC covers everything after itself, from byte 21 on.
	batch.CRC = int32(crc32.Checksum(batch.AppendTo(nil)[21:], crc32c))
	return batch.AppendTo(nil)
}
