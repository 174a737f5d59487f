package single

import (
	"cmp"
	"errors"
	"net"
	"slices"
	"sync"

	"github.com/inorder-proxy/inorder/internal/sockio"
)

// A Produce whose frame the client reader peeked at instead of reading
// (Request.Unread) still has its bytes in the client socket. Its parts
// are then written as their vectors say (produce.go), but every large
// piece of the client's frame in them, a run of its partition entries,
// moves from the client socket to the part's upstream socket in the
// kernel, as a plain TCP relay moves bytes, instead of being written
// from the copy the peek made. The client socket gives its bytes in
// their order only, so the pieces are taken in the order they lie in
// the client's frame, each into a pipe of its part's, and what no part
// splices is dropped from the socket unread; then every part is written
// at once, its own bytes (its head, the small pieces) from memory
// between its pieces spliced out of its pipes.
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

// parkWindow bounds the pipes a Produce's pieces are parked in before
// its parts are written from them: with pipes of 1 MiB, 16 MiB of a
// frame and 32 descriptors per client connection at most. A larger frame
// goes in windows, one after another. Tests make it smaller.
var parkWindow = 16

// getPipe is sockio.GetPipe; tests make it fail.
var getPipe = sockio.GetPipe

// spliceVectors writes each part i's vector vecs[i] to ups[i] but where
// skip[i], taking the client frame's bytes from un in order: pieces of
// SpliceFrom bytes or more are moved from it into pipes, each part's
// into pipes of its own, the rest dropped from it. Once the frame is
// taken, or parkWindow pipes are full, the parts are written at once,
// each on its own goroutine: its own bytes from memory, its pieces
// spliced out of its pipes (sockio.WritePiped). So a part waits for its
// own broker's socket alone, where a frame's pieces written in their
// order, each as it is taken, made every part wait for every broker in
// turn. Where no pipe can be had, a piece is spliced straight to its
// part's socket (Unread.SpliceTo), after what its part had waiting.
// werr[i] is why part i's connection failed (its later pieces are then
// dropped); err ends everything: the client stream is lost.
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
	w := &parkedParts{ups: ups, werr: werr, win: make([]partWindow, len(vecs))}
	defer w.putPipes()
	next := make([]int, len(vecs)) // each vector's first piece not yet queued
	queue := func(i, upto int) {
		if werr[i] == nil {
			for _, b := range vecs[i].vec[next[i]:max(upto, next[i])] {
				w.win[i].add(b, nil)
			}
		}
		next[i] = max(upto, next[i])
	}
	for _, p := range pieces {
		queue(p.part, p.j)
		next[p.part] = p.j + 1
		if at := total - un.Len(); p.off > at {
			if err := un.Discard(p.off - at); err != nil {
				return werr, err
			}
		}
		if err := w.park(p.part, vecs[p.part].vec[p.j], un); err != nil {
			return werr, err
		}
	}
	if err := un.Discard(un.Len()); err != nil {
		return werr, err
	}
	for i, v := range vecs {
		if !skip[i] {
			queue(i, len(v.vec))
		}
	}
	w.write()
	return werr, nil
}

// parkedParts is what spliceVectors has taken of a frame and not yet
// written: each part's window, and the pipes they hold.
type parkedParts struct {
	ups   []*upstream
	werr  []error
	win   []partWindow
	pipes []*sockio.Pipe
}

// partWindow is one part's bytes taken and not yet written, in order:
// each buffer with the pipe it is moved out of (nil: written from
// memory), and the pipe being filled.
type partWindow struct {
	bufs [][]byte
	from []*sockio.Pipe
	pipe *sockio.Pipe
}

func (w *partWindow) add(b []byte, from *sockio.Pipe) {
	w.bufs = append(w.bufs, b)
	w.from = append(w.from, from)
}

// park takes piece b of part i from un: into the part's pipes, dropped
// when the part's connection failed, or spliced straight to it where no
// pipe can be had. An error is the client stream's.
func (w *parkedParts) park(i int, b []byte, un Unread) error {
	win := &w.win[i]
	for len(b) > 0 {
		if w.werr[i] != nil {
			return un.Discard(len(b))
		}
		if win.pipe == nil {
			if len(w.pipes) == parkWindow {
				w.write()
				continue
			}
			pipe, err := getPipe()
			if err != nil {
				if len(w.pipes) > 0 {
					w.write()
					continue
				}
				return w.spliceTo(i, b, un)
			}
			w.pipes = append(w.pipes, pipe)
			win.pipe = pipe
		}
		got, err := un.ParkTo(win.pipe, len(b))
		if got > 0 {
			win.add(b[:got], win.pipe)
			b = b[got:]
		}
		switch {
		case errors.Is(err, ErrNoPark):
			return w.spliceTo(i, b, un)
		case err != nil:
			return err
		case len(b) > 0:
			win.pipe = nil // full: the next one
		}
	}
	return nil
}

// spliceTo moves piece b of part i from un to the part's socket, once
// every part's window is written.
func (w *parkedParts) spliceTo(i int, b []byte, un Unread) error {
	w.write()
	if w.werr[i] != nil {
		return un.Discard(len(b))
	}
	err := un.SpliceTo(w.ups[i].nc, len(b))
	if errors.Is(err, ErrPartWrite) {
		w.werr[i], err = err, nil
	}
	return err
}

// write writes every part's window to its socket, each part on its own
// goroutine, waits for them, and empties the windows.
func (w *parkedParts) write() {
	var wg sync.WaitGroup
	inline := -1
	for i := range w.win {
		if len(w.win[i].bufs) == 0 || w.werr[i] != nil {
			continue
		}
		if inline < 0 {
			inline = i
			continue
		}
		wg.Go(func() { w.werr[i] = w.win[i].write(w.ups[i].nc) })
	}
	if inline >= 0 {
		w.werr[inline] = w.win[inline].write(w.ups[inline].nc)
	}
	wg.Wait()
	w.putPipes()
	for i := range w.win {
		win := &w.win[i]
		clear(win.bufs)
		clear(win.from)
		win.bufs, win.from, win.pipe = win.bufs[:0], win.from[:0], nil
	}
}

// write writes w's bytes to nc, a TCP socket (spliceParts sends on no
// other), spliced where they are parked.
func (w *partWindow) write(nc net.Conn) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return sockio.ErrSpliceClosed
	}
	return sockio.WritePiped(tc, w.bufs, w.from)
}

// putPipes gives the pipes back; one a failed write left bytes in is
// closed with them.
func (w *parkedParts) putPipes() {
	for _, p := range w.pipes {
		p.Put()
	}
	clear(w.pipes)
	w.pipes = w.pipes[:0]
}
