package single_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// readParkedFrame sends frame, a Fetch answer at v, over a socket and
// reads it with ReadParked, checking that the stream goes on behind it.
func readParkedFrame(t *testing.T, frame []byte, v int16, from int) (*wire.Buf, int, *testAccount, error) {
	t.Helper()
	trailer := []byte("next")
	rd, sock, head := answerSocket(t, append(append([]byte(nil), frame...), trailer...), false, 64)
	acct := &testAccount{}
	acct.Reserve(wire.FineCap(len(frame)))
	buf, spans, err := single.ReadParked(rd, sock, head, len(frame), v, acct, from)
	if err == nil {
		next := make([]byte, len(trailer))
		if _, err := io.ReadFull(rd, next); err != nil || !bytes.Equal(next, trailer) {
			t.Fatalf("v%d: the stream does not go on behind the frame: %q, %v", v, next, err)
		}
	}
	return buf, spans, acct, err
}

// answerSocket writes data to a socket, and closes it after when
// closing, and returns a reader of bufSize bytes over the socket's other
// end and the first 8 bytes it read: an answer's length prefix and
// correlation id, as a broker's reader takes them.
func answerSocket(t *testing.T, data []byte, closing bool, bufSize int) (*bufio.Reader, *net.TCPConn, []byte) {
	t.Helper()
	peer, sock := sockiotest.Pair(t)
	go func() {
		peer.Write(data)
		if closing {
			peer.Close()
		}
	}()
	rd := bufio.NewReaderSize(sock, bufSize)
	head := make([]byte, 8)
	if _, err := io.ReadFull(rd, head); err != nil {
		t.Fatal(err)
	}
	return rd, sock, head
}

// At every version, an answer with record sets of many sizes, those of
// 16 KiB or more parked, is the answer sent once filled.
func TestReadParked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for v := int16(4); v <= 18; v++ {
		fr := kmsg.NewPtrFetchResponse()
		fr.Version = v
		for ti, sizes := range [][]int{{70000, 10, 20000}, {-1, 300000, 16384}} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID[0] = "t", byte(ti)
			for pi, n := range sizes {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(pi)
				if n >= 0 {
					p.RecordBatches = make([]byte, n)
					for i := range p.RecordBatches {
						p.RecordBatches[i] = byte(rng.IntN(256))
					}
				}
				rt.Partitions = append(rt.Partitions, p)
			}
			fr.Topics = append(fr.Topics, rt)
		}
		frame := wire.AppendResponse(nil, 1, v >= 12, fr.AppendTo)
		buf, spans, _, err := readParkedFrame(t, frame, v, 16384)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if spans < 4 || !bytes.Equal(buf.B, frame) {
			t.Fatalf("v%d: %d spans parked, the frame filled the one sent: %v", v, spans, bytes.Equal(buf.B, frame))
		}
		wire.Put(buf)
	}
}

// FuzzReadParked: any frame, at any version, sent over a socket, is read
// with its record sets of at least from bytes parked in pipes; once
// filled from them it is the frame sent, byte for byte, and the stream
// goes on right behind it. Where kmsg reads the body the read succeeds;
// a failed read holds no memory.
func FuzzReadParked(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for v := int16(0); v <= 18; v++ {
		fr := randomFetchResponse(rng, v)
		f.Add(uint8(v), uint16(1+rng.IntN(2000)), fr.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version uint8, from uint16, body []byte) {
		v := int16(version % 19)
		frame := wire.AppendResponse(nil, 1, v >= 12, func(b []byte) []byte { return append(b, body...) })
		buf, spans, room, err := readParkedFrame(t, frame, v, 1+int(from))
		orig := kmsg.NewPtrFetchResponse()
		orig.Version = v
		origErr := orig.ReadFrom(body)
		if err != nil {
			if room.held != 0 {
				t.Fatalf("a failed read holds %d", room.held)
			}
			if origErr == nil {
				t.Fatalf("v%d: kmsg reads it, the parked read fails: %v", v, err)
			}
			if !errors.Is(err, single.ErrParkMalformed) && !errors.Is(err, wire.ErrTruncated) {
				t.Fatalf("v%d: a failed read says %v", v, err)
			}
			return
		}
		if !bytes.Equal(buf.B, frame) {
			t.Fatalf("v%d: %d spans parked: the frame filled is not the frame sent", v, spans)
		}
		wire.Put(buf)
	})
}

// testAccount counts what is reserved in it.
type testAccount struct{ testRoom }

func (a *testAccount) Reserve(n int) error {
	a.held += n
	return nil
}
