package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// txnReorderer starts a reordering backend with topic of partitions
// partitions. The delays are wide enough that a request sent last often
// completes first.
func txnReorderer(t *testing.T, topic string, partitions int32) *hostile.Reorderer {
	t.Helper()
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MaxDelay:  5 * time.Millisecond,
		KfakeOpts: []kfake.Opt{kfake.SeedTopics(partitions, topic)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// txnProduceRun is one transaction of single-record Produce requests over
// several partitions, pipelined with the EndTxn that commits it.
type txnProduceRun struct {
	res  pipeprobe.PipelineResult
	sent map[int32][]string // values per partition, in send order
}

// endTxnOvertook reports whether the EndTxn, sent last, was answered
// before some Produce.
func (r txnProduceRun) endTxnOvertook() bool {
	return r.res.Arrived[len(r.res.Arrived)-1] != len(r.res.Exchanges)-1
}

// failedProduces counts the Produce requests the broker refused: a write
// that reaches it after the commit no longer belongs to the transaction,
// and one that overtakes an earlier write breaks the sequence.
func (r txnProduceRun) failedProduces() int {
	n := 0
	for _, x := range r.res.Exchanges {
		if p, ok := x.Resp.(*kmsg.ProduceResponse); ok && p.Topics[0].Partitions[0].ErrorCode != 0 {
			n++
		}
	}
	return n
}

// runTxnProduce initialises transactional id txnID through addr, adds the
// partitions, waiting for each answer, and then pipelines perPart Produce
// requests to each partition of topic, interleaved, followed by the EndTxn
// that commits them, all on one connection.
func runTxnProduce(ctx context.Context, addr, clientID, txnID, topic string, partitions int32, perPart int) (txnProduceRun, error) {
	run := txnProduceRun{sent: map[int32][]string{}}
	x, err := pipeprobe.InitTxn(ctx, addr, txnID)
	if err != nil {
		return run, err
	}
	all := make([]int32, partitions)
	for p := range partitions {
		all[p] = p
	}
	if err := x.AddPartitions(ctx, addr, topic, all...); err != nil {
		return run, err
	}
	var reqs []kmsg.Request
	for i := range perPart * int(partitions) {
		part := int32(i) % partitions
		v := fmt.Sprintf("%s-%d-%d", txnID, part, len(run.sent[part]))
		reqs = append(reqs, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: part, Value: []byte(v), Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: -1, Timeout: 5 * time.Second,
			Producer: &x.Producer, Sequence: int32(len(run.sent[part])), Transactional: true,
		}))
		run.sent[part] = append(run.sent[part], v)
	}
	reqs = append(reqs, x.EndTxn(true))
	run.res, err = pipeprobe.Pipeline(ctx, addr, reqs, pipeprobe.PipelineOptions{ClientID: clientID})
	return run, err
}

// TestTxnProduceThenEndTxnInOrder pipelines a transaction's Produce
// requests and the EndTxn that commits them on one connection, through the
// proxy in none mode, to a backend that handles requests concurrently. The
// commit must not overtake a write: every response comes back in order and
// without error, and a read_committed consumer reading kfake directly sees
// every record of the transaction, in send order, and nothing else.
func TestTxnProduceThenEndTxnInOrder(t *testing.T) {
	const partitions, perPart = 2, 4
	b := txnReorderer(t, "tx", partitions)
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, nil)
	ctx := testContext(t, 60*time.Second)

	run, err := runTxnProduce(ctx, p.Addr(), "txn-proxy", "txn-proxy", "tx", partitions, perPart)
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range run.res.Arrived {
		if at != i {
			t.Fatalf("response %d arrived in place %d: arrival order %v", at, i, run.res.Arrived)
		}
	}
	for i, x := range run.res.Exchanges {
		var code int16
		switch resp := x.Resp.(type) {
		case *kmsg.ProduceResponse:
			code = resp.Topics[0].Partitions[0].ErrorCode
		case *kmsg.EndTxnResponse:
			code = resp.ErrorCode
		}
		if err := kerr.ErrorForCode(code); err != nil {
			t.Fatalf("request %d (%s): %v", i, kmsg.NameForKey(x.Req.Key()), err)
		}
	}
	for part := range int32(partitions) {
		want := run.sent[part]
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := pipeprobe.ReadCommitted(readCtx, b.KfakeAddr(), "tx", part, len(want), pipeprobe.PinTo(b.KfakeAddr()))
		cancel()
		if err != nil {
			t.Fatalf("partition %d: %v (read %v, sent %v)", part, err, got, want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d: read_committed sees %v, sent %v", part, got, want)
		}
		// The log holds the records and one commit marker, nothing a
		// read_committed consumer could have skipped unseen.
		hwm, err := highWatermark(ctx, b.KfakeAddr(), "tx", part)
		if err != nil {
			t.Fatal(err)
		}
		if hwm != int64(len(want))+1 {
			t.Fatalf("partition %d: high watermark %d, want %d records and a commit marker", part, hwm, len(want))
		}
	}
}

// highWatermark asks the broker at addr for topic/partition's high
// watermark.
func highWatermark(ctx context.Context, addr, topic string, partition int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := pipeprobe.Do(ctx, addr, req)
	if err != nil {
		return 0, err
	}
	p := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	return p.Offset, kerr.ErrorForCode(p.ErrorCode)
}

// TestTxnEndTxnOvertakesProduceDirectly runs the transaction of
// TestTxnProduceThenEndTxnInOrder straight to the reordering backend, with
// no proxy, and requires that the backend at least once answers the
// EndTxn before a Produce sent ahead of it, so that the in-order result
// through the proxy is not something the backend gives anyway.
func TestTxnEndTxnOvertakesProduceDirectly(t *testing.T) {
	const partitions, perPart, attempts = 2, 4, 20
	b := txnReorderer(t, "tx", partitions)
	ctx := testContext(t, 60*time.Second)

	var overtook, broken, failed int
	for i := range attempts {
		run, err := runTxnProduce(ctx, b.Addr(), "txn-direct", fmt.Sprintf("txn-direct-%d", i), "tx", partitions, perPart)
		if err != nil {
			t.Fatal(err)
		}
		if run.endTxnOvertook() {
			overtook++
		}
		if n := run.failedProduces(); n > 0 {
			broken++
			failed += n
		}
	}
	t.Logf("directly, %d of %d transactions had EndTxn answered before a Produce; %d lost writes (%d refused Produce requests of %d); seed %d",
		overtook, attempts, broken, failed, attempts*partitions*perPart, b.Seed())
	if overtook == 0 {
		t.Fatalf("the EndTxn never overtook a Produce in %d direct runs: the proxy test proves nothing", attempts)
	}
	if b.ReorderedFor("txn-direct") == 0 {
		t.Fatal("the backend counted no reordered response although the EndTxn overtook a Produce")
	}
}
