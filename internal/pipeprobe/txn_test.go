package pipeprobe_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// TestTransactionalProduce commits, aborts and commits a transaction of
// one transactional batch each, sent one request at a time: a
// read_committed consumer sees the committed values only, which it can
// only do if the batches carry the transactional bit and a valid CRC.
func TestTransactionalProduce(t *testing.T) {
	ctx := testCtx(t)
	addr := newKfake(t, kfake.SeedTopics(1, "t"))
	x, err := pipeprobe.InitTxn(ctx, addr, "probe")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a", "b", "c"} {
		if err := x.AddPartitions(ctx, addr, "t", 0); err != nil {
			t.Fatal(err)
		}
		kresp, err := pipeprobe.Do(ctx, addr, pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: "t", Value: []byte(v), Timestamp: time.Now().UnixMilli(),
			Version: 9, Acks: -1, Timeout: 5 * time.Second,
			Producer: &x.Producer, Sequence: int32(i), Transactional: true,
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
		kresp, err = pipeprobe.Do(ctx, addr, x.EndTxn(v != "b"))
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(kresp.(*kmsg.EndTxnResponse).ErrorCode); err != nil {
			t.Fatalf("end txn after %q: %v", v, err)
		}
	}
	got, err := pipeprobe.ReadCommitted(ctx, addr, "t", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %v, want %v", got, want)
	}
}
