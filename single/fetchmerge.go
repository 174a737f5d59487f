package single

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// A large merged Fetch answer is written as a vector rather than encoded
// whole: its record sets, which alias its parts' answer frames, are
// written from those frames, and only what the proxy encodes itself (the
// head: header, counts, every partition's fields, its endpoints) is made
// and reserved (AppendFetchVector, byte for byte what encode
// writes). The parts' frames are then held until the answer is written
// instead of the answer's copy of them, so a merged answer of S bytes
// holds S and its head, not 2S, and its records are not copied.
//
// The rule: a merged Fetch answer of at least fetchVecFrom bytes, to a
// request that is not audited (the audit reads the answer's body whole).
// Its record sets of at least fetchPassFrom bytes are pieces when they
// make at least half of it; otherwise every record set is, since its
// Fetch's room holds no copy of them (memory.go, partRoom). Others are
// encoded as before: a small answer's copy costs less than its pieces,
// and a quota'd answer is empty.
const (
	// fetchVecFrom is exactBufFrom: below it the merged frame is a
	// pooled buffer, its copy a few microseconds.
	fetchVecFrom = exactBufFrom
	// fetchPassFrom: a smaller record set is copied into the head, which
	// keeps the vector short (a piece costs a writev entry) for less
	// copying than the head's own fields.
	fetchPassFrom = 1 << 10
)

// encodeMerged is encode, but for a Fetch answer the rule above takes,
// which goes to the client in pieces (Request.SetPieces), its head in the
// frame returned and the parts' frames handed from st to the request.
func (s *Conn) encodeMerged(st *Split, resp kmsg.Response, size int) (*wire.Buf, charge, error) {
	c, r := s.c, st.r
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok || !r.Pieces() {
		return s.encode(st, resp, size)
	}
	hdr := r.Header()
	flexible := hdr.ResponseFlexible()
	if size == 0 {
		size = EncodedSize(fr, hdr.Correlation, flexible)
	}
	if size < fetchVecFrom {
		return s.encode(st, resp, size)
	}
	least := fetchPassFrom
	passed := FetchPassed(fr, least)
	if passed < size/2 {
		// Mostly small record sets: each is a piece all the same,
		// the head the fields alone.
		least = 1
		passed = FetchPassed(fr, least)
	}
	parkedOrder(fr, st.frames)
	head := size - passed
	held := head + c.PiecesHold()
	b := s.env.Budget
	acct := c.UpAccount(0)
	got := st.room.take(int64(held))
	if rest := int64(held) - got; rest > 0 && !b.TryReserveResponse(rest) {
		if err := acct.Reserve(int(rest)); err != nil {
			st.room.give(got)
			return nil, charge{}, c.TimedOut(err)
		}
	}
	out := exactBuf(head)
	var pieces [][]byte
	out.B, pieces = AppendFetchVector(out.B[:0], nil, fr, hdr.Correlation, flexible, least)
	pieces, from, ok := pipedPieces(st.frames, pieces)
	if !ok {
		if err := fillAll(st.frames); err != nil {
			wire.Put(out)
			ch := acct.Charge(held)
			ch.Release(b)
			return nil, charge{}, err
		}
	}
	frames, charges := slices.Clone(st.frames), slices.Clone(st.charges)
	clear(st.frames)
	clear(st.charges)
	r.SetPieces(pieces, from, size, func() {
		for i, f := range frames {
			wire.Put(f)
			charges[i].Release(b)
		}
	})
	if n := s.env.FetchVectors; n != nil {
		n.Add(1)
	}
	if n := s.env.FetchPiped; n != nil && from != nil {
		n.Add(1)
	}
	return s.charged(acct, out, held)
}
