package pipeprobe

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PinTo makes a kgo client dial addr whatever broker address it learned
// from metadata. A hostile backend's kfake advertises the backend, so a
// client reading the honest log behind it needs this.
func PinTo(addr string) kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
}

// ReadPartition returns every record value of topic/partition, from offset
// 0 up to the high watermark it finds on entry, read by a kgo direct
// consumer (no group) bootstrapped from addr. opts are added to the
// client's options, e.g. PinTo. It returns when the values are read or
// ctx ends.
func ReadPartition(ctx context.Context, addr, topic string, partition int32, opts ...kgo.Opt) ([]string, error) {
	return ReadRange(ctx, addr, topic, partition, 0, -1, opts...)
}

// ReadRange returns the record values of topic/partition at offsets from
// up to, not including, to; a negative to means the high watermark found
// on entry. It reads as ReadPartition does.
func ReadRange(ctx context.Context, addr, topic string, partition int32, from, to int64, opts ...kgo.Opt) ([]string, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {partition: kgo.NewOffset().At(from)},
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("pipeprobe: reading %s/%d: %w", topic, partition, err)
	}
	defer cl.Close()

	if to < 0 {
		if to, err = HighWatermark(ctx, cl, topic, partition); err != nil {
			return nil, fmt.Errorf("pipeprobe: reading %s/%d: %w", topic, partition, err)
		}
	}
	var values []string
	for next := from; next < to; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return values, fmt.Errorf("pipeprobe: reading %s/%d at offset %d of %d: %w", topic, partition, next, to, err)
		}
		for _, fe := range fs.Errors() {
			return values, fmt.Errorf("pipeprobe: reading %s/%d at offset %d: %w", topic, partition, next, fe.Err)
		}
		for rec := range fs.RecordsAll() {
			if rec.Offset >= to {
				continue
			}
			values = append(values, string(rec.Value))
			next = rec.Offset + 1
		}
	}
	return values, nil
}

// HighWatermark asks, through cl, for the offset the next record of
// topic/partition will get.
func HighWatermark(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition = partition
	p.Timestamp = -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	kresp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range kresp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic && p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return 0, err
				}
				return p.Offset, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: list offsets response lacks %s/%d", ErrMalformed, topic, partition)
}

// CheckLogOrder returns nil if values is exactly "0", "1", ..., n-1, the
// log a ProducePipelined run of n requests leaves in an empty partition,
// and otherwise an error wrapping ErrLogOrder that says where it differs.
func CheckLogOrder(values []string, n int) error {
	var misplaced []string
	for i := range min(len(values), n) {
		if want := strconv.Itoa(i); values[i] != want {
			misplaced = append(misplaced, fmt.Sprintf("offset %d holds %q, want %q", i, values[i], want))
		}
	}
	switch {
	case len(values) != n && len(misplaced) > 0:
		return fmt.Errorf("%w: %d values, want %d; %d of them misplaced: %s", ErrLogOrder, len(values), n, len(misplaced), summarize(misplaced))
	case len(values) != n:
		return fmt.Errorf("%w: %d values, want %d", ErrLogOrder, len(values), n)
	case len(misplaced) > 0:
		return fmt.Errorf("%w: %d of %d misplaced: %s", ErrLogOrder, len(misplaced), n, summarize(misplaced))
	}
	return nil
}

// ReadCommitted returns the first n record values of topic/partition that
// a read_committed consumer sees, from offset 0, read as ReadPartition
// does. Records of open or aborted transactions are skipped by the
// consumer, so if fewer than n committed records exist it returns what it
// saw when ctx ends, with ctx's error.
func ReadCommitted(ctx context.Context, addr, topic string, partition int32, n int, opts ...kgo.Opt) ([]string, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {partition: kgo.NewOffset().At(0)},
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("pipeprobe: reading %s/%d committed: %w", topic, partition, err)
	}
	defer cl.Close()
	var values []string
	for len(values) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return values, fmt.Errorf("pipeprobe: reading %s/%d committed: %d of %d values: %w", topic, partition, len(values), n, err)
		}
		for _, fe := range fs.Errors() {
			return values, fmt.Errorf("pipeprobe: reading %s/%d committed: %w", topic, partition, fe.Err)
		}
		for rec := range fs.RecordsAll() {
			values = append(values, string(rec.Value))
		}
	}
	return values, nil
}
