package single

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pages"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/wire"
)

// A large Fetch answer from a plaintext broker, owed to a plaintext client
// whose answer may go in pieces, is read with its large record sets
// parked: spliced from the broker's socket into pipes (sockio.Pipe), the
// socket's own pages referenced there, not copied into the proxy. The
// answer's frame holds every other byte (the header, every partition's
// fields, the tail) and a hole of each parked record set's size, so it
// decodes and merges as a frame read whole does (kmsg never looks into
// record sets). When the merged answer is written as a vector
// (fetchmerge.go), a piece that is a parked record set is spliced from
// its pipe into the client's socket (sockio.WritePiped): its bytes never
// enter the proxy's memory. Whatever else needs the bytes (an answer
// encoded whole, a frame compacted) fills the holes from the pipes first
// (fill), which is the copy a read would have made.
//
// The frame reserves the answer's whole size, and the budget counts the
// pipes' bytes there. A frame of mapFrom bytes or more is mapped from the
// kernel (internal/pages), not made on the heap: its holes, most of its
// bytes, are then never zeroed, never resident and never the collector's
// work; only the pages the answer's fields are written to are given. On
// the heap, zeroing those frames and collecting them was a third of the
// proxy's CPU with the clients' default fetch sizes (BENCHMARKS.md).
const (
	// mapFrom: a smaller frame is taken from wire's pools; mapping and
	// unmapping costs two system calls where zeroing that much costs
	// less.
	mapFrom = 256 << 10
	// fetchParkFrom: a smaller record set is read; a splice in and out
	// costs two system calls where a copy of that much costs less.
	fetchParkFrom = SpliceFrom
	// parkPipesMost bounds the pipes one answer holds; past them the
	// rest is read.
	parkPipesMost = 16
	// parkRead is how much of the bytes between record sets is read at
	// a time: a partition's fields are some 50 bytes, so a read past
	// them takes a little of the next record set into memory, which is
	// then not parked.
	parkRead = 512
)

// parked is the Out of a frame read with record sets parked: the spans of
// its B that are in pipes, in the order they were spliced.
type parked struct {
	spans []parkedSpan
	pipes []*sockio.Pipe
	open  *sockio.Pipe // the last of pipes, while it may have room
}

// parkedSpan is a span of the frame, in pipe.
type parkedSpan struct {
	off, n int
	pipe   *sockio.Pipe
}

// Close gives the pipes back (closed if they still hold bytes).
func (h *parked) Close() error {
	for _, pipe := range h.pipes {
		pipe.Put()
	}
	h.spans, h.pipes, h.open = nil, nil, nil
	return nil
}

// fill reads the bytes b lacks back from their pipes, so that b holds its
// frame whole.
func fill(b *wire.Buf) error {
	h := parkedIn(b)
	if h == nil {
		return nil
	}
	var err error
	for _, sp := range h.spans {
		if err = sp.pipe.Read(b.B[sp.off : sp.off+sp.n]); err != nil {
			break
		}
	}
	h.Close()
	b.Out = nil
	if err != nil {
		return fmt.Errorf("%w: a record set parked in a pipe: %v", proxyerr.UpstreamFailed, err)
	}
	return nil
}

// parkedIn returns b's parked spans, or nil when b holds its frame whole.
func parkedIn(b *wire.Buf) *parked {
	if b == nil {
		return nil
	}
	h, _ := b.Out.(*parked)
	return h
}

// fillAll fills every frame of frames.
func fillAll(frames []*wire.Buf) error {
	for _, f := range frames {
		if err := fill(f); err != nil {
			return err
		}
	}
	return nil
}

// errParkMalformed wraps what does not parse in an answer being parked.
var errParkMalformed = errors.New("malformed Fetch answer")

// errParkCut wraps a read that failed with record sets already parked:
// what the pipes held is dropped with them.
var errParkCut = errors.New("the answer failed with record sets parked")

// parkable returns the broker socket an answer of total bytes to ref may
// be read from with its record sets parked, or nil: a Fetch answer read
// into a frame reserved whole (bigAnswer), over plaintext TCP on both
// sides, to a request whose answer may go in pieces (not audited), or
// one to be kept for the next (fetchkeep.go), which a request that
// cannot take pieces does not take.
func (s *Conn) parkable(u *upstream, ref *partRef, total int) *net.TCPConn {
	if !bigAnswer(ref.key == keyFetch, total) || !s.c.Splices() {
		return nil
	}
	nc, ok := u.nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	s.mu.Lock()
	st := ref.st
	keep := st == nil && u.poll == ref && ref.round == 1 && ref.pieces
	s.mu.Unlock()
	if !keep && (st == nil || !st.r.Pieces()) {
		return nil
	}
	return nc
}

// readParked reads a Fetch answer at version of total bytes, whose first
// bytes (head) are read, from rd over nc, its record sets of from bytes
// or more (fetchParkFrom) parked. The frame is reserved in acct as
// readAnswer's is, and given back on an error, which wraps
// errParkMalformed where the answer does not parse (rd then out of step).
func readParked(rd *bufio.Reader, nc *net.TCPConn, head []byte, total int, version int16, acct wire.Account, from int) (*wire.Buf, error) {
	b := parkFrame(total)
	p := parker{rd: rd, nc: nc, b: b.B, filled: copy(b.B, head), from: int64(from)}
	err := p.walk(version)
	held := len(p.h.pipes) > 0
	if held {
		b.Out = &p.h
	}
	if err != nil {
		err = readFailed(b, acct, total, err)
		if held {
			err = fmt.Errorf("%w: %w", errParkCut, err)
		}
		return nil, err
	}
	return b, nil
}

// parkFrame returns the frame an answer of total bytes is read into with
// its record sets parked, of capacity wire.FineCap(total), as GetFine's:
// mapped when it is large and the system can, else pooled.
func parkFrame(total int) *wire.Buf {
	if b := mappedFrame(total); b != nil {
		b.B = b.B[:total]
		return b
	}
	return wire.GetFine(total)
}

// mappedFrame returns a mapped frame of capacity wire.FineCap(total),
// empty, or nil when total is below mapFrom or the system cannot map.
func mappedFrame(total int) *wire.Buf {
	if total < mapFrom {
		return nil
	}
	m, err := pages.Map(wire.FineCap(total))
	if err != nil {
		return nil
	}
	return &wire.Buf{B: m.Bytes()[:0], Free: m.Unmap}
}

// parker is one answer's read.
type parker struct {
	rd     *bufio.Reader
	nc     *net.TCPConn
	b      []byte
	filled int // b[:filled] is read
	from   int64
	h      parked
}

// walk reads the answer's body, following its fields with a
// wire.FetchStream that stops where each partition's records begin.
func (p *parker) walk(version int16) error {
	var fs wire.FetchStream
	fs.Start(version, int64(len(p.b)-p.filled), true)
	fs.Report()
	scan := p.filled
	for {
		step, err := fs.Next(p.b[scan:p.filled])
		if errors.Is(err, wire.ErrNeedMore) {
			if p.filled == len(p.b) {
				return fmt.Errorf("%w: it ends inside a field", errParkMalformed)
			}
			if err := p.read(min(len(p.b), p.filled+parkRead)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errParkMalformed, err)
		}
		scan += step.Used
		if step.End {
			return p.readTo(len(p.b))
		}
		if step.Pass == 0 {
			continue
		}
		end := scan + int(step.Pass)
		if end > len(p.b) {
			return fmt.Errorf("%w: a field runs past the frame", errParkMalformed)
		}
		if step.Found == wire.FoundPartition && step.Pass >= p.from && p.filled < end {
			if err := p.park(end); err != nil {
				return err
			}
		}
		if err := p.readTo(end); err != nil {
			return err
		}
		scan = end
	}
}

// read reads at least one more byte, and up to b[:to]: what rd holds
// already, else from the socket itself, so that rd never reads ahead of
// a record set to be parked.
func (p *parker) read(to int) error {
	var n int
	var err error
	if p.rd.Buffered() > 0 {
		n, err = p.rd.Read(p.b[p.filled:to])
	} else {
		n, err = p.nc.Read(p.b[p.filled:to])
	}
	p.filled += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readTo reads b up to end.
func (p *parker) readTo(end int) error {
	if p.filled >= end {
		return nil
	}
	_, err := io.ReadFull(p.rd, p.b[p.filled:end])
	if err == nil {
		p.filled = end
	}
	return err
}

// park takes the record set ending at end: what rd holds of it into b,
// the rest spliced into pipes, as far as they take it (readTo reads what
// they did not).
func (p *parker) park(end int) error {
	var err error
	p.filled, err = p.h.take(p.rd, p.nc, p.b, p.filled, end)
	return err
}

// take takes b[filled:end], the bytes next read from rd over nc: what rd
// holds of them copied, the rest spliced into pipes as far as they take
// them, and returns how far it got.
func (h *parked) take(rd *bufio.Reader, nc *net.TCPConn, b []byte, filled, end int) (int, error) {
	if k := min(rd.Buffered(), end-filled); k > 0 {
		if _, err := io.ReadFull(rd, b[filled:filled+k]); err != nil {
			return filled, err
		}
		filled += k
	}
	return h.splice(nc, filled, end)
}

// splice splices the bytes of the frame from filled to end from nc into
// pipes, as far as they take them (parkPipesMost, and as many as there
// are), records their spans, and returns how far it got.
func (h *parked) splice(nc *net.TCPConn, filled, end int) (int, error) {
	for filled < end {
		if h.open == nil {
			if len(h.pipes) == parkPipesMost {
				return filled, nil
			}
			pipe, err := sockio.GetPipe()
			if err != nil {
				return filled, nil
			}
			h.open = pipe
			h.pipes = append(h.pipes, pipe)
		}
		got, err := h.open.From(nc, end-filled)
		if got > 0 {
			h.add(h.open, filled, got)
			filled += got
		}
		if err != nil {
			return filled, err
		}
		if filled < end {
			h.open = nil // full: the next one
		}
	}
	return filled, nil
}

// add records that out[off:off+n] is in pipe, joined to the span before
// it when that one ends there in the same pipe.
func (h *parked) add(pipe *sockio.Pipe, off, n int) {
	if k := len(h.spans); k > 0 && h.spans[k-1].pipe == pipe && h.spans[k-1].off+h.spans[k-1].n == off {
		h.spans[k-1].n += n
		return
	}
	h.spans = append(h.spans, parkedSpan{off: off, n: n, pipe: pipe})
}

// parkedOrder orders a merged answer's partitions, and then its topics,
// by where their record sets lie in frames, so that each frame's parked
// record sets are written in the order they were parked, which their
// pipes give them in. The merge follows the client's order, which is a
// part's answer's own, unless the answer was kept for this request from
// an earlier one (fetchkeep.go), whose order its client turned since: a
// response's order is not the request's to clients, which find each
// partition by its name. Topics whose partitions would have to interleave
// stay out of order, and are filled (pipedPieces).
func parkedOrder(fr *kmsg.FetchResponse, frames []*wire.Buf) {
	if !slices.ContainsFunc(frames, func(f *wire.Buf) bool { return parkedIn(f) != nil }) {
		return
	}
	at := func(p *kmsg.FetchResponseTopicPartition) int64 {
		for i, f := range frames {
			if parkedIn(f) == nil {
				continue
			}
			if off, ok := within(f.B, p.RecordBatches); ok {
				return int64(i)<<40 | int64(off)
			}
		}
		return -1
	}
	if parkedInOrder(fr, len(frames), at) {
		return
	}
	type keyed[T any] struct {
		key int64
		v   T
	}
	topics := make([]keyed[kmsg.FetchResponseTopic], len(fr.Topics))
	for i, t := range fr.Topics {
		ps := make([]keyed[kmsg.FetchResponseTopicPartition], len(t.Partitions))
		for j := range t.Partitions {
			ps[j] = keyed[kmsg.FetchResponseTopicPartition]{at(&t.Partitions[j]), t.Partitions[j]}
		}
		slices.SortStableFunc(ps, func(a, b keyed[kmsg.FetchResponseTopicPartition]) int { return cmp.Compare(a.key, b.key) })
		first := int64(-1)
		for j, p := range ps {
			t.Partitions[j] = p.v
			if first < 0 {
				first = p.key
			}
		}
		topics[i] = keyed[kmsg.FetchResponseTopic]{first, t}
	}
	slices.SortStableFunc(topics, func(a, b keyed[kmsg.FetchResponseTopic]) int { return cmp.Compare(a.key, b.key) })
	for i, t := range topics {
		fr.Topics[i] = t.v
	}
}

// parkedInOrder reports whether fr's record sets come in the order they
// lie in each of n frames, at saying where one lies (frame<<40 | offset,
// -1 outside every parked frame): the merge's order, unless a kept answer
// came from a request in another order.
func parkedInOrder(fr *kmsg.FetchResponse, n int, at func(*kmsg.FetchResponseTopicPartition) int64) bool {
	last := make([]int64, n)
	for i := range fr.Topics {
		ps := fr.Topics[i].Partitions
		for j := range ps {
			k := at(&ps[j])
			if k < 0 {
				continue
			}
			f := k >> 40
			if k < last[f] {
				return false
			}
			last[f] = k
		}
	}
	return true
}

// pipedPieces splits pieces, slices of frames among others, where they
// hold parked spans, and says the pipe each piece is spliced from (nil:
// written from memory; from is nil when no frame has a parked span). It
// reports false when the pieces do not take each frame's spans once
// each, whole, in the order they were parked (a merge that left a record
// set out or reordered them), which a pipe cannot give: the caller
// fills the frames and writes pieces as they are.
func pipedPieces(frames []*wire.Buf, pieces [][]byte) ([][]byte, []*sockio.Pipe, bool) {
	holed := 0
	for _, f := range frames {
		if parkedIn(f) != nil {
			holed++
		}
	}
	if holed == 0 {
		return pieces, nil, true
	}
	next := make([]int, len(frames))
	out := make([][]byte, 0, len(pieces)+2*holed)
	from := make([]*sockio.Pipe, 0, cap(out))
	for _, pc := range pieces {
		fi, off := -1, 0
		for i, f := range frames {
			if parkedIn(f) == nil {
				continue
			}
			if o, ok := within(f.B, pc); ok {
				fi, off = i, o
				break
			}
		}
		if fi < 0 {
			out, from = append(out, pc), append(from, nil)
			continue
		}
		h := parkedIn(frames[fi])
		end := off + len(pc)
		for ; next[fi] < len(h.spans) && h.spans[next[fi]].off < end; next[fi]++ {
			sp := h.spans[next[fi]]
			if sp.off < off || sp.off+sp.n > end {
				return pieces, nil, false
			}
			if sp.off > off {
				out, from = append(out, pc[:sp.off-off]), append(from, nil)
				pc, off = pc[sp.off-off:], sp.off
			}
			out, from = append(out, pc[:sp.n]), append(from, sp.pipe)
			pc, off = pc[sp.n:], off+sp.n
		}
		if len(pc) > 0 {
			out, from = append(out, pc), append(from, nil)
		}
	}
	for i, f := range frames {
		if h := parkedIn(f); h != nil && next[i] != len(h.spans) {
			return pieces, nil, false
		}
	}
	return out, from, true
}
