package proxy_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// reordersDirectly pipelines reqs straight to fresh backends from
// newBackend until one answers out of order (a few bounded attempts: the
// delays are random), so that the same run through the proxy proves
// something; it fails t if none does.
func reordersDirectly(t *testing.T, ctx context.Context, newBackend func() *hostile.Reorderer, reqs []kmsg.Request) {
	t.Helper()
	for range 5 {
		direct := newBackend()
		res, err := pipeprobe.Pipeline(ctx, direct.Addr(), reqs, pipeprobe.PipelineOptions{})
		direct.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(res.Arrived) {
			return
		}
	}
	t.Fatal("the reordering backend never answered out of order directly: the run through the proxy proves nothing")
}

// inOrderNoErrors fails t unless the pipelined responses arrived in request
// order and no Produce or OffsetCommit partition in them reports an error.
func inOrderNoErrors(t *testing.T, res pipeprobe.PipelineResult) {
	t.Helper()
	for i, at := range res.Arrived {
		if at != i {
			t.Fatalf("response %d arrived in place %d", at, i)
		}
	}
	for i, ex := range res.Exchanges {
		switch resp := ex.Resp.(type) {
		case *kmsg.ProduceResponse:
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						t.Fatalf("request %d: produce to %d: %v", i, rp.Partition, err)
					}
				}
			}
		case *kmsg.OffsetCommitResponse:
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						t.Fatalf("request %d: commit to %d: %v", i, rp.Partition, err)
					}
				}
			}
		}
	}
}

// produceOn writes frame, a Produce v9 request with correlation id corr, on
// a new connection to addr, and returns the response after checking that
// no partition in it reports an error.
func produceOn(t *testing.T, addr string, frame []byte, corr int32) *kmsg.ProduceResponse {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp := produceExchange(t, c, frame, corr)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("produce to %s/%d: error %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
	}
	return resp
}

// produceExchange writes the Produce v9 frame numbered corr on c and
// returns its answer.
func produceExchange(t *testing.T, c net.Conn, frame []byte, corr int32) *kmsg.ProduceResponse {
	t.Helper()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(readResponse(t, c, corr)[1:]); err != nil {
		t.Fatal(err)
	}
	return resp
}
