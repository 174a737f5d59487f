package single

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// sockUnread is a frame still in a TCP socket, as the client reader's
// peeked frame is, taken by the Unread methods spliceVectors calls.
type sockUnread struct {
	c    *net.TCPConn
	left int
}

func (u *sockUnread) Len() int { return u.left }

func (u *sockUnread) Take([]byte) error { return errors.New("not taken here") }

func (u *sockUnread) Discard(n int) error {
	k, err := io.CopyN(io.Discard, u.c, int64(n))
	u.left -= int(k)
	return err
}

func (u *sockUnread) SpliceTo(nc net.Conn, n int) error {
	b := make([]byte, n)
	k, err := io.ReadFull(u.c, b)
	u.left -= k
	if err != nil {
		return err
	}
	if _, err := nc.Write(b); err != nil {
		return fmt.Errorf("%w: %v", ErrPartWrite, err)
	}
	return nil
}

func (u *sockUnread) ParkTo(p *sockio.Pipe, n int) (int, error) {
	got, err := p.From(u.c, n)
	u.left -= got
	return got, err
}

// bigProduce makes a Produce over 12 partitions of three topics, led by
// the three brokers of hashView, with record sets of sizes taken from
// sizes in turn, random bytes each.
func bigProduce(rng *rand.Rand, sizes ...int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	k := 0
	for ti := range 3 {
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = fmt.Sprintf("topic-%d", ti)
		for p := range int32(4) {
			part := kmsg.NewProduceRequestTopicPartition()
			part.Partition = p
			part.Records = make([]byte, sizes[k%len(sizes)])
			rng.Read(part.Records)
			tp.Partitions = append(tp.Partitions, part)
			k++
		}
		req.Topics = append(req.Topics, tp)
	}
	return req
}

// TestSpliceVectorsParked: a Produce over three brokers, its record sets
// of a few bytes to 1.5 MiB (more than a pipe holds), taken from a client
// socket and written to three broker sockets: each broker gets its part
// byte for byte as kmsg encodes it, the client stream is left just past
// the frame, and every pipe is given back. So too when pipes run short
// (every third, or every one, refused: the pieces then go straight to
// their sockets), when the window of pipes fills before the frame is
// taken, and when one broker's socket is closed (that part fails, the
// others arrive whole).
func TestSpliceVectorsParked(t *testing.T) {
	if p, err := sockio.GetPipe(); err != nil {
		t.Skip("no pipes here:", err)
	} else {
		p.Put()
	}
	sizes := [][]int{
		{100, 20 << 10, 300 << 10, 3 << 19},
		{SpliceFrom, SpliceFrom - 1, 700 << 10, 2 << 20},
	}
	cases := []struct {
		name   string
		refuse func(n int) bool // whether getPipe's nth call fails
		window int
		closed int // the part whose socket is closed; -1: none
	}{
		{"pipes", nil, 16, -1},
		{"every third pipe refused", func(n int) bool { return n%3 == 2 }, 16, -1},
		{"no pipe", func(int) bool { return true }, 16, -1},
		{"windows of two pipes", nil, 2, -1},
		{"a broker gone", nil, 16, 1},
		{"a broker gone, no pipe", func(int) bool { return true }, 16, 0},
	}
	rng := rand.New(rand.NewSource(1))
	for _, tc := range cases {
		for si, sz := range sizes {
			t.Run(fmt.Sprintf("%s/%d", tc.name, si), func(t *testing.T) {
				calls := 0
				getPipe = func() (*sockio.Pipe, error) {
					calls++
					if tc.refuse != nil && tc.refuse(calls-1) {
						return nil, errors.New("no pipe")
					}
					return sockio.GetPipe()
				}
				defer func() { getPipe = sockio.GetPipe }()
				defer func(w int) { parkWindow = w }(parkWindow)
				parkWindow = tc.window
				out := sockio.PipesOut()

				frame := produceFrame(bigProduce(rng, sz...), false)
				r, dec, plan := splitForTest(t, frame)
				if len(plan.Parts) != 3 {
					t.Fatalf("%d parts, want 3", len(plan.Parts))
				}
				s := &Conn{}
				vecs := s.vecFrametors(r, dec, plan.Parts)
				if vecs == nil {
					t.Fatal("the request does not lay out")
				}
				want := make([][]byte, len(vecs))
				for k := range vecs {
					want[k] = bytes.Join(vecs[k].vec, nil)
				}
				// The peek's copy lacks what is spliced, as the
				// proxy's sparse copy does.
				sent := bytes.Clone(frame)
				for _, v := range vecs {
					for j, off := range v.at {
						if off >= 0 && len(v.vec[j]) >= SpliceFrom {
							clear(v.vec[j])
						}
					}
				}

				client, cs := sockiotest.Pair(t)
				trailer := []byte("the next frame")
				go func() {
					client.Write(sent)
					client.Write(trailer)
				}()
				ups := make([]*upstream, len(vecs))
				got := make([]chan []byte, len(vecs))
				for k := range ups {
					w, rd := sockiotest.Pair(t)
					ups[k] = &upstream{nc: w}
					got[k] = make(chan []byte, 1)
					go func() {
						b, _ := io.ReadAll(rd)
						got[k] <- b
					}()
					if k == tc.closed {
						w.Close()
					}
				}
				un := &sockUnread{c: cs, left: len(frame)}
				werr, err := spliceVectors(vecs, ups, make([]bool, len(vecs)), un)
				if err != nil {
					t.Fatal(err)
				}
				for k, u := range ups {
					u.nc.Close()
					b := <-got[k]
					if k == tc.closed {
						if werr[k] == nil {
							t.Fatalf("part %d: its socket closed, and no failure", k)
						}
						continue
					}
					if werr[k] != nil {
						t.Fatalf("part %d: %v", k, werr[k])
					}
					if !bytes.Equal(b, want[k]) {
						t.Fatalf("part %d: %d bytes arrived, not the %d of its frame", k, len(b), len(want[k]))
					}
				}
				if un.left != 0 {
					t.Fatalf("%d bytes of the frame left in the socket", un.left)
				}
				next := make([]byte, len(trailer))
				if _, err := io.ReadFull(cs, next); err != nil || !bytes.Equal(next, trailer) {
					t.Fatalf("the client stream goes on with %q (%v), want %q", next, err, trailer)
				}
				if n := sockio.PipesOut(); n != out {
					t.Fatalf("%d pipes out after, %d before", n, out)
				}
				if tc.refuse == nil && calls == 0 {
					t.Fatal("no piece was parked")
				}
			})
		}
	}
}
