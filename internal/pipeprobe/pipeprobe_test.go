package pipeprobe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKfake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func TestInOrderBackendPasses(t *testing.T) {
	const n = 300
	for _, opts := range []pipeprobe.Options{
		{},
		{Window: 7, Acks: pipeprobe.AcksLeader, Version: 3},
		{Acks: pipeprobe.AcksNone, Version: 12, Seed: 42},
	} {
		t.Run(fmt.Sprintf("window=%d,acks=%v,v%d", opts.Window, opts.Acks, opts.Version), func(t *testing.T) {
			ctx := testCtx(t)
			addr := newKfake(t)
			if err := pipeprobe.CreateTopic(ctx, addr, "t", 2); err != nil {
				t.Fatal(err)
			}
			res, err := pipeprobe.ProducePipelined(ctx, addr, "t", 1, n, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Check(); err != nil {
				t.Fatal(err)
			}
			if opts.Acks != pipeprobe.AcksNone && len(res.Responses) != n {
				t.Fatalf("%d responses, want %d", len(res.Responses), n)
			}
			if slices.IsSorted(res.Sent) {
				t.Fatal("correlation ids were sent in increasing order")
			}
			// acks=0 writes are unacknowledged, so wait for them to land.
			var values []string
			for deadline := time.Now().Add(5 * time.Second); ; {
				values, err = pipeprobe.ReadPartition(ctx, addr, "t", 1)
				if err != nil {
					t.Fatal(err)
				}
				if len(values) >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := pipeprobe.CheckLogOrder(values, n); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReordererBreaksOrder proves that the probe catches the violation a
// proxy must hide, so a proxy test built on it can fail.
func TestReordererBreaksOrder(t *testing.T) {
	const n, attempts = 300, 5
	r, err := hostile.NewReorderer(hostile.ReordererConfig{MaxDelay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	for attempt := 1; attempt <= attempts; attempt++ {
		topic := "t" + strconv.Itoa(attempt)
		if err := pipeprobe.CreateTopic(ctx, r.Addr(), topic, 1); err != nil {
			t.Fatal(err)
		}
		res, err := pipeprobe.ProducePipelined(ctx, r.Addr(), topic, 0, n, pipeprobe.Options{Seed: uint64(attempt)})
		if err != nil {
			t.Fatal(err)
		}
		checkErr := res.Check()
		values, err := pipeprobe.ReadPartition(ctx, r.KfakeAddr(), topic, 0, pipeprobe.PinTo(r.KfakeAddr()))
		if err != nil {
			t.Fatal(err)
		}
		logErr := pipeprobe.CheckLogOrder(values, n)
		if checkErr != nil || logErr != nil {
			if checkErr != nil && !errors.Is(checkErr, pipeprobe.ErrReordered) && !errors.Is(checkErr, pipeprobe.ErrOffsetOrder) {
				t.Fatalf("Check failed for a reason other than order: %v", checkErr)
			}
			if logErr != nil && !errors.Is(logErr, pipeprobe.ErrLogOrder) {
				t.Fatalf("CheckLogOrder: %v", logErr)
			}
			t.Logf("attempt %d: Check: %v", attempt, checkErr)
			t.Logf("attempt %d: CheckLogOrder: %v", attempt, logErr)
			return
		}
	}
	t.Fatalf("%d attempts of %d pipelined produces through the Reorderer kept order (seed %d)", attempts, n, r.Seed())
}

func TestFaultIsAnErrorNotAHang(t *testing.T) {
	for _, mk := range []func(int, ...kfake.Opt) (*hostile.Fault, error){
		hostile.CloseAfter, hostile.ResetAfter, hostile.TruncateAfter, hostile.WrongCorrelation,
	} {
		f, err := mk(5, kfake.SeedTopics(1, "t"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(f.Kind().String(), func(t *testing.T) {
			defer f.Close()
			res, err := pipeprobe.ProducePipelined(testCtx(t), f.Addr(), "t", 0, 20, pipeprobe.Options{})
			if err == nil {
				t.Fatalf("no error; Check says %v", res.Check())
			}
			if f.Kind() == hostile.FaultWrongCorrelation && !errors.Is(err, pipeprobe.ErrUnknownCorrelation) {
				t.Fatalf("got %v, want ErrUnknownCorrelation", err)
			}
			if len(res.Responses) != 5 {
				t.Fatalf("recorded %d responses before the fault, want 5", len(res.Responses))
			}
		})
	}
}

func TestCanceledContextStopsProbe(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second, KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "t")}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = pipeprobe.ProducePipelined(ctx, r.Addr(), "t", 0, 10, pipeprobe.Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("probe took %v to notice cancellation", d)
	}
}

func TestCheck(t *testing.T) {
	ok := pipeprobe.Result{Acks: -1, Sent: []int32{30, 10, 20}, Responses: []pipeprobe.Response{
		{CorrID: 30, Seq: 0, BaseOffset: 0},
		{CorrID: 10, Seq: 1, BaseOffset: 1},
		{CorrID: 20, Seq: 2, BaseOffset: 5},
	}}
	if err := ok.Check(); err != nil {
		t.Fatalf("in-order result: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*pipeprobe.Result)
		want []error
	}{
		{"swapped responses", func(r *pipeprobe.Result) {
			r.Responses[0], r.Responses[1] = r.Responses[1], r.Responses[0]
		}, []error{pipeprobe.ErrReordered}},
		{"swapped appends", func(r *pipeprobe.Result) {
			r.Responses[1].BaseOffset, r.Responses[2].BaseOffset = 5, 1
		}, []error{pipeprobe.ErrOffsetOrder}},
		{"repeated offset", func(r *pipeprobe.Result) { r.Responses[1].BaseOffset = 0 }, []error{pipeprobe.ErrOffsetOrder}},
		{"error code", func(r *pipeprobe.Result) {
			r.Responses[2].ErrorCode = kerr.NotLeaderForPartition.Code
		}, []error{pipeprobe.ErrResponseError, kerr.NotLeaderForPartition}},
		{"missing", func(r *pipeprobe.Result) { r.Responses = r.Responses[:2] }, []error{pipeprobe.ErrMissingResponses}},
		{"both", func(r *pipeprobe.Result) {
			r.Responses[0], r.Responses[1] = r.Responses[1], r.Responses[0]
			r.Responses[0].BaseOffset, r.Responses[1].BaseOffset = 0, 1
		}, []error{pipeprobe.ErrReordered, pipeprobe.ErrOffsetOrder}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			r.Responses = slices.Clone(ok.Responses)
			tc.edit(&r)
			err := r.Check()
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Fatalf("got %v, want it to match %v", err, want)
				}
			}
		})
	}
}

func TestCheckLogOrder(t *testing.T) {
	for _, tc := range []struct {
		values []string
		n      int
		ok     bool
	}{
		{[]string{"0", "1", "2"}, 3, true},
		{nil, 0, true},
		{[]string{"0", "2", "1"}, 3, false},
		{[]string{"0", "1"}, 3, false},
		{[]string{"0", "1", "2", "2"}, 3, false},
	} {
		err := pipeprobe.CheckLogOrder(tc.values, tc.n)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, pipeprobe.ErrLogOrder)) {
			t.Errorf("CheckLogOrder(%q, %d) = %v", tc.values, tc.n, err)
		}
	}
}

func TestDoAndCreateTopic(t *testing.T) {
	ctx := testCtx(t)
	addr := newKfake(t)
	if err := pipeprobe.CreateTopic(ctx, addr, "t", 1); err != nil {
		t.Fatal(err)
	}
	if err := pipeprobe.CreateTopic(ctx, addr, "t", 1); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TopicAlreadyExists", err)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	kresp, err := pipeprobe.Do(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp := kresp.(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99: code %d, %d keys; want UNSUPPORTED_VERSION with the supported keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}
