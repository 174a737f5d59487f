package single

import (
	"cmp"
	"errors"
	"net"
	"slices"
)

// A Produce whose frame the client reader peeked at instead of reading
// (Request.Unread) still has its bytes in the client socket. Its parts
// are then written as their vectors say (produce.go), but every large
// piece of the client's frame in them, a run of its partition entries,
// moves from the client socket to the part's upstream socket in the
// kernel, as a plain TCP relay moves bytes, instead of being written
// from the copy the peek made. The client socket gives its bytes in
// their order only, so the parts are written together, in the order
// their pieces lie in the client's frame: each part's own bytes (its
// head, the small pieces) go out from memory just before its next
// spliced piece, and what no part splices is dropped from the socket
// unread.
//
// The copy may lack the record sets of SpliceFrom bytes or more, which
// only a spliced piece carries. The splice is done only when every part
// can go at once on a TCP connection already open; otherwise the frame
// is read into the copy (Unread.Take) and the parts are sent from it as
// any other request's.

// SpliceFrom is the smallest piece worth moving in the kernel: a splice
// costs two system calls, a smaller piece's copy less. Every piece of a
// part that holds a record set of SpliceFrom bytes or more is spliced,
// so the client's copy of the frame need not hold such a set.
const SpliceFrom = 16 << 10

// splicePiece is a piece of part's vector, at j, that lies at off in the
// client's frame.
type splicePiece struct {
	off, part, j int
}

// spliceParts sends st's parts, vecs, taking the frame's bytes from un,
// and reports whether it did: false, having taken and sent nothing, when
// not every part can go now on an open TCP connection. A part whose
// connection fails is failed as sendv fails it. err: the client stream
// was lost mid-frame, and the connections the parts were on with it;
// the client connection must end.
func (s *Conn) spliceParts(st *Split, vecs []vecFrame, un Unread, unanswered bool) (bool, error) {
	plan := st.plan
	if vecs == nil || len(vecs) != len(plan.Parts) {
		return false, nil
	}
	ups := make([]*upstream, len(plan.Parts))
	for i := range plan.Parts {
		part := &plan.Parts[i]
		if part.Any {
			return false, nil
		}
		u, err := s.upstream(part.Node, false)
		if err != nil || !u.open() {
			return false, nil
		}
		ups[i] = u
	}
	if n := s.env.ProduceSplices; n != nil {
		n.Add(1)
	}
	// Each part now goes on its own connection (a split makes one part
	// per broker) or fails.
	skip := make([]bool, len(ups))
	for i, u := range ups {
		var ref *partRef
		if !unanswered {
			ref = &partRef{st: st, i: i, key: plan.Key, version: plan.Version, node: u.key.node}
		}
		if u.prepare(vecs[i].vec[:1], []*partRef{ref}) != nil {
			skip[i] = true
			if ref == nil {
				s.unsent(st, plan.Parts[i].Request)
			}
		}
	}
	order := make([]int, 0, len(ups))
	for i := range ups {
		if !skip[i] {
			order = append(order, i)
		}
	}
	// Other goroutines write to these connections too (a part sent
	// again after its broker failed), one lock at a time; here the locks
	// are held together, taken in one order.
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ups[a].key.node, ups[b].key.node) })
	for _, i := range order {
		ups[i].wmu.Lock()
	}
	werr, err := spliceVectors(vecs, ups, skip, un)
	for _, i := range order {
		ups[i].wmu.Unlock()
	}
	for i, u := range ups {
		vecs[i].put()
		switch {
		case skip[i]:
		case err != nil:
			// Its frame may be cut short: nothing more can go on it.
			u.writeFailed(err)
		case werr[i] != nil:
			u.writeFailed(werr[i])
			if unanswered {
				s.unsent(st, plan.Parts[i].Request)
			}
		}
	}
	return true, err
}

// open reports whether parts go on u at once, on a TCP connection.
func (u *upstream) open() bool {
	s := u.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, tcp := u.nc.(*net.TCPConn)
	return !u.dialing && u.gone == nil && tcp
}

// spliceVectors writes each part i's vector vecs[i] to ups[i] but where
// skip[i], taking the client frame's bytes from un in order: pieces of
// SpliceFrom bytes or more are spliced from it, the rest dropped from it
// and written from memory. werr[i] is why part i's connection failed (its
// later pieces are then dropped); err ends everything: the client
// stream is lost.
func spliceVectors(vecs []vecFrame, ups []*upstream, skip []bool, un Unread) (werr []error, err error) {
	werr = make([]error, len(vecs))
	total := un.Len()
	var pieces []splicePiece
	for i, v := range vecs {
		if skip[i] {
			continue
		}
		for j, off := range v.at {
			if off >= 0 && len(v.vec[j]) >= SpliceFrom {
				pieces = append(pieces, splicePiece{off: off, part: i, j: j})
			}
		}
	}
	slices.SortFunc(pieces, func(a, b splicePiece) int { return cmp.Compare(a.off, b.off) })
	next := make([]int, len(vecs)) // each vector's first piece not yet written
	flush := func(i, upto int) {
		if werr[i] == nil && upto > next[i] {
			werr[i] = writeVector(ups[i].nc, vecs[i].vec[next[i]:upto], true)
		}
		next[i] = upto
	}
	for _, p := range pieces {
		flush(p.part, p.j)
		if at := total - un.Len(); p.off > at {
			if err := un.Discard(p.off - at); err != nil {
				return werr, err
			}
		}
		n := len(vecs[p.part].vec[p.j])
		if werr[p.part] != nil {
			err = un.Discard(n)
		} else if err = un.SpliceTo(ups[p.part].nc, n); errors.Is(err, ErrPartWrite) {
			werr[p.part], err = err, nil
		}
		if err != nil {
			return werr, err
		}
		next[p.part] = p.j + 1
	}
	if err := un.Discard(un.Len()); err != nil {
		return werr, err
	}
	for i, v := range vecs {
		if !skip[i] {
			flush(i, len(v.vec))
		}
	}
	return werr, nil
}
