package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
		req := pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: part, Value: []byte(v), Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: -1, Timeout: 5 * time.Second,
			Producer: &x.Producer, Sequence: int32(len(run.sent[part])), Transactional: true,
		})
		req.TransactionID = kmsg.StringPtr(txnID) // as Kafka's clients name it
		reqs = append(reqs, req)
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
	requireInOrder(t, run.res)
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

// responseErrors lists the requests of res answered with an error code.
func responseErrors(res pipeprobe.PipelineResult) []string {
	var out []string
	for i, x := range res.Exchanges {
		var code int16
		switch resp := x.Resp.(type) {
		case *kmsg.ProduceResponse:
			code = resp.Topics[0].Partitions[0].ErrorCode
		case *kmsg.OffsetCommitResponse:
			code = resp.Topics[0].Partitions[0].ErrorCode
		case *kmsg.TxnOffsetCommitResponse:
			code = resp.Topics[0].Partitions[0].ErrorCode
		case *kmsg.EndTxnResponse:
			code = resp.ErrorCode
		}
		if err := kerr.ErrorForCode(code); err != nil {
			out = append(out, fmt.Sprintf("request %d (%s): %v", i, kmsg.NameForKey(x.Req.Key()), err))
		}
	}
	return out
}

// requireInOrder fails t unless res's responses all came back, in request
// order, and without an error code.
func requireInOrder(t *testing.T, res pipeprobe.PipelineResult) {
	t.Helper()
	for i, at := range res.Arrived {
		if at != i {
			t.Fatalf("response %d arrived in place %d: arrival order %v", at, i, res.Arrived)
		}
	}
	if len(res.Arrived) != len(res.Exchanges) {
		t.Fatalf("%d responses to %d requests", len(res.Arrived), len(res.Exchanges))
	}
	if errs := responseErrors(res); len(errs) > 0 {
		t.Fatalf("%d requests failed: %v", len(errs), errs)
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
		// A write that reaches the broker after the commit no longer
		// belongs to the transaction, and one that overtakes an earlier
		// write to its partition breaks the sequence: both are refused.
		if n := len(responseErrors(run.res)); n > 0 {
			broken++
			failed += n
		}
	}
	t.Logf("directly, %d of %d transactions had the EndTxn answered before a Produce; %d had requests refused (%d of %d requests in all); seed %d",
		overtook, attempts, broken, failed, attempts*(partitions*perPart+1), b.Seed())
	if overtook == 0 {
		t.Fatalf("the EndTxn never overtook a Produce in %d direct runs: the proxy test proves nothing", attempts)
	}
	if b.ReorderedFor("txn-direct") == 0 {
		t.Fatal("the backend counted no reordered response although the EndTxn overtook a Produce")
	}
}

// commitMixRun is one pipelined run of plain Produce requests with
// OffsetCommits and TxnOffsetCommits to the same partitions interleaved,
// closed by the EndTxn that commits the transactional offsets.
type commitMixRun struct {
	res        pipeprobe.PipelineResult
	sent       map[int32][]string // values per partition, in send order
	group      string             // the group of the OffsetCommits
	txnGroup   string             // the group of the TxnOffsetCommits
	lastCommit map[int32]int64    // per partition, the last OffsetCommit sent
	lastTxn    map[int32]int64    // per partition, the last TxnOffsetCommit sent
}

// runCommitMix initialises a transaction for txnGroup through addr, waits
// for the group to be added to it, and then pipelines on one connection n
// rounds, round i writing one record to a partition of topic and, every
// other round, committing offset i for that partition in group (plain) and
// in txnGroup (transactional, every third round), followed by the EndTxn
// that commits the transaction.
func runCommitMix(ctx context.Context, addr, clientID, name, topic string, partitions int32, n int) (commitMixRun, error) {
	run := commitMixRun{
		sent: map[int32][]string{}, group: name + "-g", txnGroup: name + "-tg",
		lastCommit: map[int32]int64{}, lastTxn: map[int32]int64{},
	}
	x, err := pipeprobe.InitTxn(ctx, addr, name)
	if err != nil {
		return run, err
	}
	if err := x.AddOffsets(ctx, addr, run.txnGroup); err != nil {
		return run, err
	}
	var reqs []kmsg.Request
	for i := range n {
		part := int32(i*7%int(partitions)+i/int(partitions)) % partitions
		v := fmt.Sprintf("%s-%d-%d", name, part, len(run.sent[part]))
		run.sent[part] = append(run.sent[part], v)
		reqs = append(reqs, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: part, Value: []byte(v), Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: 1, Timeout: 5 * time.Second,
		}))
		if i%2 == 0 {
			commit := kmsg.NewPtrOffsetCommitRequest()
			commit.Version, commit.Group, commit.Generation = 8, run.group, -1
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = topic
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = part, int64(i)
			ct.Partitions = append(ct.Partitions, cp)
			commit.Topics = append(commit.Topics, ct)
			reqs = append(reqs, commit)
			run.lastCommit[part] = int64(i)
		}
		if i%3 == 0 {
			reqs = append(reqs, x.TxnOffsetCommit(run.txnGroup, topic, part, int64(i)))
			run.lastTxn[part] = int64(i)
		}
	}
	reqs = append(reqs, x.EndTxn(true))
	run.res, err = pipeprobe.Pipeline(ctx, addr, reqs, pipeprobe.PipelineOptions{ClientID: clientID})
	return run, err
}

// standing lists the group partitions, read from the broker at addr,
// whose committed offset is not the last one sent.
func (r commitMixRun) standing(ctx context.Context, addr, topic string, partitions int32) ([]string, error) {
	var out []string
	for _, g := range []struct {
		group string
		last  map[int32]int64
	}{{r.group, r.lastCommit}, {r.txnGroup, r.lastTxn}} {
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version, fetch.Group = 7, g.group
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic = topic
		for part := range partitions {
			ft.Partitions = append(ft.Partitions, part)
		}
		fetch.Topics = append(fetch.Topics, ft)
		kresp, err := pipeprobe.Do(ctx, addr, fetch)
		if err != nil {
			return nil, err
		}
		resp := kresp.(*kmsg.OffsetFetchResponse)
		err = kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.GroupIDNotFound) {
			// No commit of the group stood: a transactional one
			// reordered past its EndTxn leaves no group at all.
			for part := range partitions {
				out = append(out, fmt.Sprintf("%s/%d: the group does not exist, the last commit sent was %d", g.group, part, g.last[part]))
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("offset fetch %s: %w", g.group, err)
		}
		for _, fp := range resp.Topics[0].Partitions {
			if fp.Offset != g.last[fp.Partition] {
				out = append(out, fmt.Sprintf("%s/%d holds %d, the last commit sent was %d", g.group, fp.Partition, fp.Offset, g.last[fp.Partition]))
			}
		}
	}
	return out, nil
}

// TestTxnOffsetCommitsInOrder pipelines Produce requests over four
// partitions with OffsetCommits and TxnOffsetCommits to the same
// partitions interleaved, and the EndTxn after them, on one connection
// through the proxy in none mode to a backend that handles requests
// concurrently. The responses come back in request order, each with the
// client's correlation id, every request succeeds, each partition's log
// holds its records in send order, and in both groups each partition's
// committed offset is the last one sent.
func TestTxnOffsetCommitsInOrder(t *testing.T) {
	const partitions, n = 4, 120
	b := txnReorderer(t, "m", partitions)
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, nil)
	ctx := testContext(t, 60*time.Second)

	run, err := runCommitMix(ctx, p.Addr(), "mix-proxy", "mix-proxy", "m", partitions, n)
	if err != nil {
		t.Fatal(err)
	}
	requireInOrder(t, run.res)
	for part := range int32(partitions) {
		got, err := pipeprobe.ReadPartition(ctx, b.KfakeAddr(), "m", part, pipeprobe.PinTo(b.KfakeAddr()))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, run.sent[part]) {
			t.Fatalf("partition %d holds %v, sent %v", part, got, run.sent[part])
		}
	}
	wrong, err := run.standing(ctx, b.KfakeAddr(), "m", partitions)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Fatalf("commits that do not stand: %v", wrong)
	}
}

// TestTxnOffsetCommitsOutOfOrderDirectly runs the requests of
// TestTxnOffsetCommitsInOrder straight to the reordering backend, with no
// proxy, and requires that its checks fail at least once: responses out of
// order, a request refused, or a commit that does not stand.
func TestTxnOffsetCommitsOutOfOrderDirectly(t *testing.T) {
	const partitions, n, attempts = 4, 120, 10
	b := txnReorderer(t, "m", partitions)
	ctx := testContext(t, 60*time.Second)

	var outOfOrder, refused, notStanding, txnNotStanding, endOvertook int
	for i := range attempts {
		run, err := runCommitMix(ctx, b.Addr(), "mix-direct", fmt.Sprintf("mix-direct-%d", i), "m", partitions, n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(run.res.Arrived) {
			outOfOrder++
		}
		if run.res.Arrived[len(run.res.Arrived)-1] != len(run.res.Exchanges)-1 {
			endOvertook++
		}
		if len(responseErrors(run.res)) > 0 {
			refused++
		}
		wrong, err := run.standing(ctx, b.KfakeAddr(), "m", partitions)
		if err != nil {
			t.Fatal(err)
		}
		if len(wrong) > 0 {
			notStanding++
		}
		if slices.ContainsFunc(wrong, func(w string) bool { return strings.HasPrefix(w, run.txnGroup+"/") }) {
			txnNotStanding++
		}
	}
	t.Logf("directly, of %d runs: %d answered out of order, %d had the EndTxn answered before an earlier request, %d had requests refused, %d left a commit that was not the last sent (%d in the transactional group); seed %d",
		attempts, outOfOrder, endOvertook, refused, notStanding, txnNotStanding, b.Seed())
	if outOfOrder == 0 || txnNotStanding == 0 {
		t.Fatalf("the reordering backend never broke the run directly (%d out of order, %d with a wrong transactional commit): the proxy test proves nothing", outOfOrder, txnNotStanding)
	}
	if b.ReorderedFor("mix-direct") == 0 {
		t.Fatal("the backend counted no reordered response")
	}
}
