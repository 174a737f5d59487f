package single_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pages"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// bigFetch returns an answer at v of two topics of six partitions, each a
// random record set of about 1 MiB, and its frame.
func bigFetch(v int16, seed uint64) (*kmsg.FetchResponse, []byte) {
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = v
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for ti := range 2 {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID[0] = "t"+string(rune('a'+ti)), byte(ti+1)
		for p := range int32(6) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark = p, int64(p)*100
			rp.RecordBatches = make([]byte, 1<<20+int(p)*4099)
			for i := range rp.RecordBatches {
				rp.RecordBatches[i] = byte(rng.Uint32())
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		fr.Topics = append(fr.Topics, rt)
	}
	return fr, wire.AppendResponse(nil, 11, v >= 12, fr.AppendTo)
}

// cutParked sends frame over a socket, followed by "next", and cuts it
// as it comes with the record sets it keeps parked, read through a
// reader of 4 KiB.
func cutParked(t *testing.T, frame []byte, v int16, most int, room *testRoom, sent int) (*wire.Buf, int, *bufio.Reader, error) {
	t.Helper()
	data, closing := frame[:sent], true
	if sent >= len(frame) {
		data, closing = append(append([]byte(nil), frame...), "next"...), false
	}
	rd, sock, head := answerSocket(t, data, closing, 4<<10)
	buf, dropped, err := single.CutFetchAnswerParked(rd, sock, head, len(frame), v, most, 16<<10, room)
	return buf, dropped, rd, err
}

func skipWithoutPipes(t *testing.T) {
	t.Helper()
	if !sockio.CanDiscard {
		t.Skip("no splicing here")
	}
	p, err := sockio.GetPipe()
	if err != nil {
		t.Skip("no pipes here:", err)
	}
	p.Put()
}

// TestCutFetchAnswerParks: an answer cut as it comes from a broker's
// socket, where the client's answer may go in pieces, keeps its record
// sets in pipes: its frame is mapped, and only the pages its fields are
// written to are in memory, where the cut from memory holds every kept
// byte. Filled from the pipes it is the cut from memory, byte for byte;
// the stream is left just past the answer; its memory, reserved in the
// room as its capacity, and its pipes go back when it is put.
func TestCutFetchAnswerParks(t *testing.T) {
	skipWithoutPipes(t)
	for _, v := range []int16{4, 12, 16} {
		_, frame := bigFetch(v, uint64(v))
		const most = 3 << 20
		want, wantDropped, err := cutFrame(frame, v, most, &testRoom{})
		if err != nil {
			t.Fatal(err)
		}
		pages.Trim() // a new mapping, none of whose pages a reuse wrote
		pipes, live := sockio.PipesOut(), pages.Live()
		room := &testRoom{}
		got, dropped, rd, err := cutParked(t, frame, v, most, room, len(frame))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if got.Free == nil || got.Out == nil {
			t.Fatalf("v%d: the cut is not parked (mapped %v, parked %v)", v, got.Free != nil, got.Out != nil)
		}
		if dropped != wantDropped || room.held != cap(got.B) || len(got.B) != len(want.B) {
			t.Fatalf("v%d: %d bytes, %d partitions emptied, the room holding %d for %d; from memory: %d bytes, %d emptied",
				v, len(got.B), dropped, room.held, cap(got.B), len(want.B), wantDropped)
		}
		resident, err := pages.Resident(got.B[:cap(got.B)])
		if err != nil {
			t.Fatal(err)
		}
		// A page or two for each partition's fields and what the
		// reader held with them, and the header's.
		if most := 2*12 + 2; resident > most {
			t.Fatalf("v%d: %d pages of the cut's frame resident for %d kept bytes: the record sets were copied", v, resident, len(got.B))
		}
		var next [4]byte
		if _, err := io.ReadFull(rd, next[:]); err != nil || string(next[:]) != "next" {
			t.Fatalf("v%d: after the answer the stream reads %q, %v", v, next, err)
		}
		if err := single.Fill(got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.B, want.B) {
			t.Fatalf("v%d: the parked cut, filled, is not the cut from memory", v)
		}
		room.Release(cap(got.B))
		wire.Put(got)
		wire.Put(want)
		if sockio.PipesOut() != pipes || pages.Live() != live {
			t.Fatalf("v%d: %d pipes and %d bytes mapped left after the cut was put", v, sockio.PipesOut()-pipes, pages.Live()-live)
		}
	}
}

// A parked cut's reservation grows in the room as it keeps more, up to
// what the room has, and its frame never moves; a socket closed in the
// middle of a parked record set fails the cut with nothing reserved,
// mapped or piped.
func TestCutFetchAnswerParkedRoom(t *testing.T) {
	skipWithoutPipes(t)
	const v = 16
	orig, frame := bigFetch(v, 3)
	room := &testRoom{limit: 5 << 19}
	got, dropped, _, err := cutParked(t, frame, v, 4<<20, room, len(frame))
	if err != nil {
		t.Fatal(err)
	}
	if room.held != cap(got.B) || room.held > room.limit {
		t.Fatalf("the room holds %d of %d for a frame of capacity %d", room.held, room.limit, cap(got.B))
	}
	if err := single.Fill(got); err != nil {
		t.Fatal(err)
	}
	resp, err := single.DecodeAnswer(1, v, got.B)
	if err != nil {
		t.Fatal(err)
	}
	if kept := checkCut(t, orig, resp.(*kmsg.FetchResponse), dropped); kept != 2 {
		t.Fatalf("a room of 2.5 MiB kept %d record sets of 1 MiB", kept)
	}
	room.Release(cap(got.B))
	wire.Put(got)

	pipes, live := sockio.PipesOut(), pages.Live()
	room = &testRoom{}
	if _, _, _, err := cutParked(t, frame, v, 3<<20, room, 2<<20); !errors.Is(err, wire.ErrTruncated) || room.held != 0 {
		t.Fatalf("a socket closed mid-answer: %v, holding %d", err, room.held)
	}
	if sockio.PipesOut() != pipes || pages.Live() != live {
		t.Fatalf("%d pipes and %d bytes mapped left after a failed cut", sockio.PipesOut()-pipes, pages.Live()-live)
	}
}
