package pipeprobe

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional request versions this client sends: flexible, and
// below the versions (EndTxn v5, TxnOffsetCommit v5, Produce v12) where the
// broker bumps epochs or adds partitions and groups to a transaction
// implicitly, so that the order of the requests alone decides what a
// transaction holds.
const (
	initProducerIDVersion  = 4
	addPartitionsVersion   = 3
	addOffsetsVersion      = 3
	endTxnVersion          = 3
	txnOffsetCommitVersion = 3
)

// txnTimeout is the transaction timeout asked for: long enough that no
// test transaction expires, within Kafka's default maximum of 15 minutes.
const txnTimeout = time.Minute

// Txn is a transactional producer's identity: its transactional id and
// the producer id and epoch InitProducerID gave it.
type Txn struct {
	ID       string // the transactional id
	Producer Producer
}

// InitTxn asks the broker at addr for a producer id and epoch for the
// transactional id txnID.
func InitTxn(ctx context.Context, addr, txnID string) (Txn, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = initProducerIDVersion
	req.TransactionalID = kmsg.StringPtr(txnID)
	req.TransactionTimeoutMillis = int32(txnTimeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	kresp, err := Do(ctx, addr, req)
	if err != nil {
		return Txn{}, fmt.Errorf("pipeprobe: init producer id for %q: %w", txnID, err)
	}
	resp := kresp.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return Txn{}, fmt.Errorf("pipeprobe: init producer id for %q: %w", txnID, err)
	}
	return Txn{ID: txnID, Producer: Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}}, nil
}

// AddPartitions adds topic's partitions to the open transaction through
// the broker at addr, starting it if none is open. Transactional batches
// to a partition are accepted only after this.
func (x Txn) AddPartitions(ctx context.Context, addr, topic string, partitions ...int32) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = addPartitionsVersion
	req.TransactionalID = x.ID
	req.ProducerID, req.ProducerEpoch = x.Producer.ID, x.Producer.Epoch
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = topic, partitions
	req.Topics = append(req.Topics, t)
	kresp, err := Do(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("pipeprobe: adding partitions to %q: %w", x.ID, err)
	}
	for _, rt := range kresp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("pipeprobe: adding %s/%d to %q: %w", rt.Topic, rp.Partition, x.ID, err)
			}
		}
	}
	return nil
}

// AddOffsets adds group to the open transaction through the broker at
// addr, starting it if none is open. TxnOffsetCommit for the group is
// accepted only after this.
func (x Txn) AddOffsets(ctx context.Context, addr, group string) error {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = addOffsetsVersion
	req.TransactionalID, req.Group = x.ID, group
	req.ProducerID, req.ProducerEpoch = x.Producer.ID, x.Producer.Epoch
	kresp, err := Do(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("pipeprobe: adding group %q to %q: %w", group, x.ID, err)
	}
	if err := kerr.ErrorForCode(kresp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode); err != nil {
		return fmt.Errorf("pipeprobe: adding group %q to %q: %w", group, x.ID, err)
	}
	return nil
}

// EndTxn builds the request that commits (or aborts) the open
// transaction.
func (x Txn) EndTxn(commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = endTxnVersion
	req.TransactionalID = x.ID
	req.ProducerID, req.ProducerEpoch = x.Producer.ID, x.Producer.Epoch
	req.Commit = commit
	return req
}

// TxnOffsetCommit builds the request that commits offset for
// group/topic/partition within the open transaction, as a producer outside
// any consumer group generation does.
func (x Txn) TxnOffsetCommit(group, topic string, partition int32, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = txnOffsetCommitVersion
	req.TransactionalID, req.Group = x.ID, group
	req.ProducerID, req.ProducerEpoch = x.Producer.ID, x.Producer.Epoch
	req.Generation = -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}
