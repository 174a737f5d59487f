package single

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// TestStalledBrokerStaysSuspect: a broker that stalled is down and stays
// suspect through a successful dial (its host accepts them) and further
// failures, until it answers; a broker whose dial failed is up again at
// its next successful dial, as before.
func TestStalledBrokerStaysSuspect(t *testing.T) {
	v := &View{down: make(map[int32]downState)}
	if !v.Stalled(1) {
		t.Fatal("the first stall is not news")
	}
	if !v.IsDown(1) || !v.Suspect(1) {
		t.Fatal("a stalled broker is not down and suspect")
	}
	if v.Stalled(1) {
		t.Fatal("a second stall is news")
	}
	v.Dialed(1)
	v.DialFailed(1)
	if !v.Suspect(1) {
		t.Fatal("a dial, then a failed one, ended the suspicion")
	}
	if got := v.down[1].fails; got != 3 {
		t.Fatalf("%d failures counted, want 3: the backoff grows with each", got)
	}
	v.Answered(1)
	if v.IsDown(1) || v.Suspect(1) {
		t.Fatal("a broker that answered is still down or suspect")
	}

	v.DialFailed(2)
	if !v.IsDown(2) || v.Suspect(2) {
		t.Fatal("a failed dial: want down, not suspect")
	}
	v.Dialed(2)
	if v.IsDown(2) {
		t.Fatal("a broker dialled again is still down")
	}
}

// TestHeadLockedAcrossWrap: the oldest part in flight is found by its
// correlation id's age, also when the ids wrapped.
func TestHeadLockedAcrossWrap(t *testing.T) {
	u := &upstream{pending: map[int32]*partRef{}}
	refs := map[int32]*partRef{}
	for _, corr := range []int32{corrMask - 1, corrMask, 0, 1} {
		refs[corr] = &partRef{}
		u.pending[corr] = refs[corr]
	}
	u.corr = 1
	if got := u.headLocked(); got != refs[corrMask-1] {
		t.Fatal("the head is not the oldest part, written before the ids wrapped")
	}
	delete(u.pending, corrMask-1)
	delete(u.pending, corrMask)
	if got := u.headLocked(); got != refs[0] {
		t.Fatal("the head is not the oldest part left")
	}
	clear(u.pending)
	if u.headLocked() != nil {
		t.Fatal("a head with nothing in flight")
	}
}

// TestProbe: a broker that answers the ApiVersions passes; one that
// answers another correlation id, closes, or says nothing within the
// timeout does not, nor one still silent when the client connection
// ends (the context), which ends the probe before its timeout.
func TestProbe(t *testing.T) {
	answer := func(corr int32) func(net.Conn) {
		return func(c net.Conn) {
			var lb [4]byte
			if _, err := io.ReadFull(c, lb[:]); err != nil {
				return
			}
			req := make([]byte, int(lb[0])<<24|int(lb[1])<<16|int(lb[2])<<8|int(lb[3]))
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			frame := resp.AppendTo(make([]byte, 8))
			wire.SetResponseCorrelation(frame, corr)
			wire.SetLength(frame)
			c.Write(frame)
		}
	}
	for _, tc := range []struct {
		name    string
		serve   func(net.Conn)
		want    func(error) bool
		timeout time.Duration
		cancel  bool
	}{
		{"answers", answer(1), func(err error) bool { return err == nil }, 200 * time.Millisecond, false},
		{"another id", answer(7), func(err error) bool { return errors.Is(err, errProbe) }, 200 * time.Millisecond, false},
		{"closes", func(c net.Conn) { c.Close() }, func(err error) bool { return err != nil }, 200 * time.Millisecond, false},
		{"silent", func(net.Conn) {}, func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }, 200 * time.Millisecond, false},
		{"silent, canceled", func(net.Conn) {}, func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				tc.serve(c)
				time.Sleep(300 * time.Millisecond)
				c.Close()
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			if err := probe(ctx, nc, tc.timeout); !tc.want(err) {
				t.Fatalf("probe: %v", err)
			}
			<-done
		})
	}
}
