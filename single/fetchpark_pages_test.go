package single_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pages"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/single"
	"github.com/inorder-proxy/inorder/wire"
)

// A large answer read with its record sets parked is read into a mapped
// frame in which only the pages its fields are written to are resident:
// eight record sets of 1 MiB in pipes, a frame of 8 MiB, a few pages of
// it in memory. Filled, it is the answer sent; put, its memory is
// unmapped.
func TestReadParkedHolesCostNothing(t *testing.T) {
	if !sockio.CanDiscard {
		t.Skip("no splicing here")
	}
	if p, err := sockio.GetPipe(); err != nil {
		t.Skip("no pipes here:", err)
	} else {
		p.Put()
	}
	const sets = 8
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = 13
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID[0] = 1
	for i := range sets {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(i)
		p.RecordBatches = bytes.Repeat([]byte{byte(i + 1)}, 1<<20)
		rt.Partitions = append(rt.Partitions, p)
	}
	fr.Topics = append(fr.Topics, rt)
	frame := wire.AppendResponse(nil, 1, true, fr.AppendTo)

	pages.Trim() // a new mapping, none of whose pages a reuse wrote
	before := pages.Live()
	rd, sock, head := answerSocket(t, frame, false, 64)
	acct := &testAccount{}
	acct.Reserve(wire.FineCap(len(frame)))
	buf, err := single.ReadParkedHoled(rd, sock, head, len(frame), fr.Version, acct, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	if buf.Free == nil || buf.Out == nil {
		t.Fatalf("an answer of %d bytes was read into the heap (mapped %v, parked %v)", len(frame), buf.Free != nil, buf.Out != nil)
	}
	if cap(buf.B) != wire.FineCap(len(frame)) {
		t.Fatalf("the frame's capacity is %d, its reservation %d", cap(buf.B), wire.FineCap(len(frame)))
	}
	if got := pages.Live() - before; got != int64(cap(buf.B)) {
		t.Fatalf("%d bytes mapped for a frame of %d", got, cap(buf.B))
	}
	n, err := pages.Resident(buf.B[:cap(buf.B)])
	if err != nil {
		t.Fatal(err)
	}
	// Each partition's fields, and the bytes read with them ahead of
	// its record set, take a page or two; the header, one.
	if most := 2*sets + 2; n > most {
		t.Fatalf("%d of the frame's %d pages are resident, its fields need at most %d", n, cap(buf.B)/os.Getpagesize(), most)
	}
	if err := single.Fill(buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.B, frame) {
		t.Fatal("the frame filled is not the answer sent")
	}
	wire.Put(buf)
	if got := pages.Live() - before; got != 0 {
		t.Fatalf("%d bytes still mapped after the frame was put", got)
	}
}
