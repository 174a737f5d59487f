package hostile

import (
	"errors"
	"net"
	"time"
)

// Blackhole makes the relay's address a black hole, as a broker's host
// that went down without a word: every connection it carries is reset,
// and it accepts nothing and refuses nothing, so that a dial to it waits
// until its own timeout. The returned function relays again, at the same
// address. It fails where the system cannot make a listener without room
// for a connection it does not accept (errors.ErrUnsupported).
func (r *Relay) Blackhole() (restore func() error, err error) {
	r.mu.Lock()
	ln := r.ln
	r.ln = nil
	closed := r.closed
	r.mu.Unlock()
	if closed || ln == nil {
		return nil, errors.New("hostile: relay closed or already a black hole")
	}
	ln.Close()
	r.Cut()
	h, err := newHole(r.addr)
	if err != nil {
		r.relisten()
		return nil, err
	}
	r.mu.Lock()
	r.hole = h
	r.mu.Unlock()
	return func() error {
		r.mu.Lock()
		h := r.hole
		r.hole = nil
		r.mu.Unlock()
		if h == nil {
			return errors.New("hostile: relay not a black hole")
		}
		h.close()
		return r.relisten()
	}, nil
}

// relisten relays again at r's address.
func (r *Relay) relisten() error {
	var (
		ln  net.Listener
		err error
	)
	// The port was just closed; another socket may take it for a moment.
	for range 50 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		ln.Close()
		return nil
	}
	r.ln = ln
	r.wg.Add(1)
	r.mu.Unlock()
	go r.serve(ln)
	return nil
}

// hole is a listener that is never accepted from, with its queue of
// connections waiting for an accept filled by its own: the kernel then
// drops every connection attempt, which the dialler retries until its
// timeout.
type hole struct {
	fd    int
	fills []net.Conn
}

// newHole listens at addr with the least queue there is and fills it.
func newHole(addr string) (*hole, error) {
	fd, err := listenNoRoom(addr)
	if err != nil {
		return nil, err
	}
	h := &hole{fd: fd}
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			// The queue is full: this dial got no answer.
			return h, nil
		}
		h.fills = append(h.fills, c)
	}
	h.close()
	return nil, errors.New("hostile: a black hole's queue did not fill")
}

func (h *hole) close() {
	closeFD(h.fd)
	for _, c := range h.fills {
		c.Close()
	}
}
