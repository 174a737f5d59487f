package single_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// testRoom is memory of at most limit bytes (0: unbounded) that counts
// what is reserved, and how many reservations it granted.
type testRoom struct{ held, limit, reserved int }

func (r *testRoom) TryReserve(n int) bool {
	if r.limit > 0 && r.held+n > r.limit {
		return false
	}
	r.held += n
	r.reserved++
	return true
}

func (r *testRoom) Release(n int) {
	r.held -= n
	if r.held < 0 {
		panic("released more than reserved")
	}
}

// fetchOf returns a flexible Fetch answer of version v with one topic of
// n partitions, each a record set of size bytes, and its frame.
func fetchOf(v int16, n int32, size int) (*kmsg.FetchResponse, []byte) {
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = v
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	for p := range n {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = p
		rp.RecordBatches = bytes.Repeat([]byte{byte(p)}, size)
		rt.Partitions = append(rt.Partitions, rp)
	}
	fr.Topics = append(fr.Topics, rt)
	return fr, wire.AppendResponse(nil, 3, true, fr.AppendTo)
}

// cutFrame cuts frame, a Fetch answer of version v, to most bytes in room.
func cutFrame(frame []byte, v int16, most int, room *testRoom) (*wire.Buf, int, error) {
	return single.CutFetchAnswer(bytes.NewReader(frame[8:]), frame[:8], len(frame), v, most, room)
}

// checkCut checks that cut, orig cut, is orig but for the record sets of
// its partitions from the first dropped on, each emptied (a null one
// stays null), and that dropped of them were. It returns how many
// partitions were kept whole before the first dropped.
func checkCut(t *testing.T, orig, cut *kmsg.FetchResponse, dropped int) int {
	t.Helper()
	want := deepCopyFetch(orig)
	got := deepCopyFetch(cut)
	kept, seen, cutting := 0, 0, false
	for ti := range want.Topics {
		if ti >= len(got.Topics) || len(got.Topics[ti].Partitions) != len(want.Topics[ti].Partitions) {
			t.Fatalf("v%d: topic %d's partitions differ", orig.Version, ti)
		}
		for pi := range want.Topics[ti].Partitions {
			w, g := &want.Topics[ti].Partitions[pi], &got.Topics[ti].Partitions[pi]
			switch {
			case !cutting && bytes.Equal(w.RecordBatches, g.RecordBatches) && (w.RecordBatches == nil) == (g.RecordBatches == nil):
				if len(w.RecordBatches) > 0 {
					kept++
				}
			case len(w.RecordBatches) > 0 && g.RecordBatches != nil && len(g.RecordBatches) == 0:
				cutting = true
				seen++
			case cutting && len(w.RecordBatches) == 0 && bytes.Equal(w.RecordBatches, g.RecordBatches) && (w.RecordBatches == nil) == (g.RecordBatches == nil):
			default:
				t.Fatalf("v%d: partition %d/%d: records of %d bytes (null %v) answered as %d bytes (null %v), cutting %v",
					orig.Version, ti, pi, len(w.RecordBatches), w.RecordBatches == nil, len(g.RecordBatches), g.RecordBatches == nil, cutting)
			}
			w.RecordBatches, g.RecordBatches = nil, nil
		}
	}
	if seen != dropped {
		t.Fatalf("v%d: %d partitions emptied, the cutter says %d", orig.Version, seen, dropped)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("v%d: fields other than records changed:\nwant %+v\ngot  %+v", orig.Version, want, got)
	}
	return kept
}

// deepCopyFetch copies fr through its encoding, so that its record sets
// can be cleared without touching fr.
func deepCopyFetch(fr *kmsg.FetchResponse) *kmsg.FetchResponse {
	c := kmsg.NewPtrFetchResponse()
	c.Version = fr.Version
	if err := c.ReadFrom(fr.AppendTo(nil)); err != nil {
		panic(err)
	}
	return c
}

// TestCutFetchAnswer: at every Fetch version, random answers cut at every
// size from nothing to the whole answer decode to the answer with the
// partitions that fit kept whole, byte for byte, and the rest emptied
// with every other field unchanged; the frame is what kmsg encodes of
// that, and its capacity is what the room holds.
func TestCutFetchAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for v := int16(0); v <= (*kmsg.FetchResponse)(nil).MaxVersion(); v++ {
		for range 60 {
			orig := randomFetchResponse(rng, v)
			frame := wire.AppendResponse(nil, 7, v >= 12, orig.AppendTo)
			lastKept := -1
			for _, most := range []int{0, 8, len(frame) / 8, len(frame) / 4, len(frame) / 2, len(frame) - 1, len(frame), 1 << 30} {
				room := &testRoom{}
				buf, dropped, err := cutFrame(frame, v, most, room)
				if err != nil {
					t.Fatalf("v%d cut to %d: %v", v, most, err)
				}
				if room.held != cap(buf.B) {
					t.Fatalf("v%d: the room holds %d, the frame %d", v, room.held, cap(buf.B))
				}
				if len(buf.B) > len(frame) || int(binary.BigEndian.Uint32(buf.B)) != len(buf.B)-4 {
					t.Fatalf("v%d: a frame of %d bytes, length prefix %d, from %d", v, len(buf.B), binary.BigEndian.Uint32(buf.B), len(frame))
				}
				resp, err := single.DecodeAnswer(1, v, buf.B)
				if err != nil {
					t.Fatalf("v%d cut to %d: %v", v, most, err)
				}
				cut := resp.(*kmsg.FetchResponse)
				kept := checkCut(t, orig, cut, dropped)
				if kept < lastKept {
					t.Fatalf("v%d: %d bytes kept %d partitions, fewer bytes %d", v, most, kept, lastKept)
				}
				lastKept = kept
				if want := wire.AppendResponse(nil, 7, v >= 12, cut.AppendTo); !bytes.Equal(buf.B, want) {
					t.Fatalf("v%d cut to %d: the frame is not what kmsg encodes of it", v, most)
				}
				if most >= len(frame) && !bytes.Equal(buf.B, frame) {
					t.Fatalf("v%d: an answer within %d bytes was changed", v, most)
				}
				if most == 0 && kept != 0 {
					t.Fatalf("v%d: nothing fits, yet %d partitions kept", v, kept)
				}
			}
		}
	}
}

// TestCutFetchAnswerRoom: a cut keeps records only while the room has
// memory, fails without holding any when not even the fields fit, and
// fails on a frame that ends early or does not parse.
func TestCutFetchAnswerRoom(t *testing.T) {
	const v = 12
	fr, frame := fetchOf(v, 4, 100<<10)

	room := &testRoom{limit: 250 << 10}
	buf, dropped, err := cutFrame(frame, v, 1<<30, room)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := single.DecodeAnswer(1, v, buf.B)
	if err != nil {
		t.Fatal(err)
	}
	if kept := checkCut(t, fr, resp.(*kmsg.FetchResponse), dropped); kept != 1 || dropped != 3 || room.held != cap(buf.B) || room.held > room.limit {
		t.Fatalf("a room of 250 KiB kept %d partitions of 100 KiB, emptied %d, holds %d for a frame of %d", kept, dropped, room.held, cap(buf.B))
	}

	room = &testRoom{limit: 4}
	if _, _, err := cutFrame(frame, v, 1<<30, room); err == nil || room.held != 0 {
		t.Fatalf("a room of 4 bytes: %v, holding %d", err, room.held)
	}
	room = &testRoom{}
	short := frame[:len(frame)-10]
	if _, _, err := single.CutFetchAnswer(bytes.NewReader(short[8:]), short[:8], len(frame), v, 1<<30, room); !errors.Is(err, wire.ErrTruncated) || room.held != 0 {
		t.Fatalf("a frame ending early: %v, holding %d", err, room.held)
	}
	bad := bytes.Clone(frame)
	at := 8 + 1 + 4 + 2 + 4 // the topic count, made larger than the frame
	bad[at], bad[at+1], bad[at+2] = 0xff, 0xff, 0x7f
	room = &testRoom{}
	if _, _, err := cutFrame(bad, v, 1<<30, room); err == nil || room.held != 0 {
		t.Fatalf("a malformed frame: %v, holding %d", err, room.held)
	}
}

// FuzzCutFetchAnswer: any frame, at any version and size, is cut without
// a panic and without holding memory it does not give back; one whose
// body kmsg reads is cut into an answer kmsg reads, which is the answer
// with only record sets emptied from some partition on.
func FuzzCutFetchAnswer(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for v := int16(0); v <= 18; v++ {
		fr := randomFetchResponse(rng, v)
		f.Add(uint8(v), uint32(len(fr.AppendTo(nil))/2), fr.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version uint8, most uint32, body []byte) {
		v := int16(version % 19)
		frame := wire.AppendResponse(nil, 1, v >= 12, func(b []byte) []byte { return append(b, body...) })
		room := &testRoom{}
		buf, dropped, err := cutFrame(frame, v, int(most%(1<<24)), room)
		orig := kmsg.NewPtrFetchResponse()
		orig.Version = v
		origErr := orig.ReadFrom(body)
		if err != nil {
			if room.held != 0 {
				t.Fatalf("a failed cut holds %d", room.held)
			}
			if origErr == nil {
				t.Fatalf("v%d: kmsg reads it, the cutter fails: %v", v, err)
			}
			return
		}
		if room.held != cap(buf.B) || len(buf.B) > len(frame) {
			t.Fatalf("v%d: the room holds %d for a frame of %d (cap %d) from %d", v, room.held, len(buf.B), cap(buf.B), len(frame))
		}
		if origErr != nil {
			return
		}
		resp, err := single.DecodeAnswer(1, v, buf.B)
		if err != nil {
			t.Fatalf("v%d: kmsg reads the answer, not its cut: %v", v, err)
		}
		checkCut(t, orig, resp.(*kmsg.FetchResponse), dropped)
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestCutFetchAnswerDropsInKernel: an answer cut as it comes from a
// broker's socket is the answer cut from memory, byte for byte, the
// stream is left just past it, and the record sets it drops are never
// read into the proxy: what is read through the socket's reader is what
// the cut keeps, and at most a buffer more for each partition emptied
// (the reader fills its buffer when it reads the fields that follow
// one). A socket closed
// mid-answer fails the cut with nothing held.
func TestCutFetchAnswerDropsInKernel(t *testing.T) {
	const v = 16
	_, frame := bigFetch(v, 9)
	const most = 3 << 20
	want, wantDropped, err := cutFrame(frame, v, most, &testRoom{})
	if err != nil {
		t.Fatal(err)
	}
	if wantDropped == 0 {
		t.Fatal("the answer is not cut")
	}

	peer, sock := sockiotest.Pair(t)
	go func() {
		peer.Write(frame)
		peer.Write([]byte("next"))
	}()
	counted := &countingReader{r: sock}
	const bufSize = 64 << 10
	rd := bufio.NewReaderSize(counted, bufSize)
	var head [8]byte
	if _, err := io.ReadFull(rd, head[:]); err != nil {
		t.Fatal(err)
	}
	room := &testRoom{}
	got, dropped, err := single.CutFetchAnswerFrom(rd, sock, head[:], len(frame), v, most, room)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.B, want.B) || dropped != wantDropped || room.held != cap(got.B) {
		t.Fatalf("cut from the socket: %d bytes, %d partitions emptied, the room holding %d; from memory: %d bytes, %d emptied",
			len(got.B), dropped, room.held, len(want.B), wantDropped)
	}
	var next [4]byte
	if _, err := io.ReadFull(rd, next[:]); err != nil || string(next[:]) != "next" {
		t.Fatalf("after the answer the stream reads %q, %v", next, err)
	}
	if sockio.CanDiscard && counted.n > len(got.B)+len(next)+(dropped+1)*bufSize {
		t.Fatalf("%d bytes read into the proxy for a cut answer of %d (of %d): the dropped record sets were copied", counted.n, len(got.B), len(frame))
	}

	peer, sock = sockiotest.Pair(t)
	go func() {
		peer.Write(frame[:len(frame)-(1<<20)])
		peer.Close()
	}()
	rd = bufio.NewReaderSize(sock, bufSize)
	if _, err := io.ReadFull(rd, head[:]); err != nil {
		t.Fatal(err)
	}
	room = &testRoom{}
	if _, _, err := single.CutFetchAnswerFrom(rd, sock, head[:], len(frame), v, most, room); !errors.Is(err, wire.ErrTruncated) || room.held != 0 {
		t.Fatalf("a socket closed mid-answer: %v, holding %d", err, room.held)
	}
}

// TestCutFetchAnswerMakesItsFrameOnce: a cut answer's frame is made once,
// at the size it will reach, not grown a piece at a time, which made and
// zeroed twice its bytes and copied them at each step: each frame the
// cut makes is reserved in its room first, so the room counts them.
func TestCutFetchAnswerMakesItsFrameOnce(t *testing.T) {
	const v, most = 12, 1 << 20
	_, frame := fetchOf(v, 12, 100<<10)
	for _, limit := range []int{0, 2 << 20} {
		room := &testRoom{limit: limit}
		buf, dropped, err := cutFrame(frame, v, most, room)
		if err != nil || dropped == 0 || len(buf.B) > most {
			t.Fatalf("cut: %v, %d partitions emptied, a frame of %d", err, dropped, len(buf.B))
		}
		if room.reserved != 1 {
			t.Fatalf("a room of %d: a cut answer made %d frames", limit, room.reserved)
		}
	}
	// A room that cannot hold the frame's full size at once: grown as
	// the room allows (by doubling, each step reserved), keeping record
	// sets while it can.
	limit := most * 3 / 4
	room := &testRoom{limit: limit}
	buf, dropped, err := cutFrame(frame, v, most, room)
	if err != nil || dropped == 0 || len(buf.B) < most/4 || room.reserved < 2 || room.held != cap(buf.B) {
		t.Fatalf("cut in a room of %d: %v, %d partitions emptied, a frame of %d, %d frames made, %d held",
			limit, err, dropped, len(buf.B), room.reserved, room.held)
	}
}

// TestCutFetchAnswerHoldsWhatItKept: a cut that could keep no record set
// (each larger than what it may keep) holds a frame of the fields it
// kept, not of what it was made for.
func TestCutFetchAnswerHoldsWhatItKept(t *testing.T) {
	const v, most = 12, 1 << 20
	_, frame := fetchOf(v, 4, 2<<20)
	room := &testRoom{}
	buf, dropped, err := cutFrame(frame, v, most, room)
	if err != nil || dropped != 4 {
		t.Fatalf("cut: %v, %d partitions emptied, want 4", err, dropped)
	}
	if room.held != cap(buf.B) || room.held > 4<<10 {
		t.Fatalf("a cut answer of %d bytes holds %d (the room %d)", len(buf.B), cap(buf.B), room.held)
	}
}
