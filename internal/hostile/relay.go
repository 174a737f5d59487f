package hostile

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Relay is a TCP relay that fails on command, to put between a proxy and
// a real broker: it copies bytes between each accepted connection and a
// fresh connection to its target, knowing nothing of Kafka, until told to
// cut every connection it carries (both sides get a reset), to hold every
// byte for a while (a network that stalls without closing), or to delay
// every chunk it forwards, or to become a black hole (Blackhole). Close
// stops it and leaves nothing running.
type Relay struct {
	target string
	addr   string

	delay atomic.Int64 // nanoseconds added before forwarding each chunk
	gate  atomic.Pointer[chan struct{}]

	mu     sync.Mutex
	ln     net.Listener // nil while a black hole
	hole   *hole
	pairs  map[*relayPair]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted atomic.Int64
	cut      atomic.Int64
}

// relayPair is one relayed connection: the accepted side and the dialled
// side, closed together exactly once.
type relayPair struct {
	client, upstream net.Conn
	once             sync.Once
	// done is closed with the sockets; it wakes a direction waiting out
	// a hold.
	done chan struct{}
}

// close ends both sides; with reset, linger 0 makes the kernel send RST
// instead of FIN.
func (p *relayPair) close(reset bool) {
	p.once.Do(func() {
		close(p.done)
		for _, c := range []net.Conn{p.client, p.upstream} {
			if tc, ok := c.(*net.TCPConn); ok && reset {
				tc.SetLinger(0)
			}
			c.Close()
		}
	})
}

// NewRelay listens on listen and relays every accepted connection to
// target; it serves until Close.
func NewRelay(listen, target string) (*Relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, addr: ln.Addr().String(), pairs: make(map[*relayPair]struct{})}
	r.wg.Add(1)
	go r.serve(ln)
	return r, nil
}

// Addr is the address the relay listens on.
func (r *Relay) Addr() string { return r.addr }

// RelayStats counts what a Relay has done.
type RelayStats struct {
	Accepted int64 // connections accepted
	Cut      int64 // connections reset by Cut
	Open     int   // connections carried now
}

// Stats returns the counts so far.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	open := len(r.pairs)
	r.mu.Unlock()
	return RelayStats{Accepted: r.accepted.Load(), Cut: r.cut.Load(), Open: open}
}

// Cut resets every connection the relay carries now and returns how many
// it cut. New connections are relayed as before.
func (r *Relay) Cut() int {
	r.mu.Lock()
	pairs := make([]*relayPair, 0, len(r.pairs))
	for p := range r.pairs {
		pairs = append(pairs, p)
	}
	r.mu.Unlock()
	for _, p := range pairs {
		p.close(true)
	}
	r.cut.Add(int64(len(pairs)))
	return len(pairs)
}

// Hold stops forwarding in both directions, on every connection, new ones
// included, until the returned function is called (or Close); the
// connections stay open, as behind a network that drops every packet for
// a while. A second Hold while one is in force releases the first.
func (r *Relay) Hold() (release func()) {
	g := make(chan struct{})
	if old := r.gate.Swap(&g); old != nil {
		close(*old)
	}
	return func() {
		// whoever swaps the gate out closes it: this release, a later
		// Hold or Close, exactly once.
		if r.gate.CompareAndSwap(&g, nil) {
			close(g)
		}
	}
}

// SetDelay makes the relay wait d before forwarding each chunk it reads;
// zero forwards at once.
func (r *Relay) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// Close stops accepting, closes every connection and waits for every
// goroutine of the relay to end.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	pairs := make([]*relayPair, 0, len(r.pairs))
	for p := range r.pairs {
		pairs = append(pairs, p)
	}
	ln, h := r.ln, r.hole
	r.ln, r.hole = nil, nil
	r.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	if h != nil {
		h.close()
	}
	for _, p := range pairs {
		p.close(false)
	}
	if g := r.gate.Swap(nil); g != nil {
		close(*g)
	}
	r.wg.Wait()
	return err
}

func (r *Relay) serve(ln net.Listener) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		r.accepted.Add(1)
		r.wg.Add(1)
		go r.relay(c)
	}
}

// relay dials the target for c and copies both ways until either side
// ends; both then close together.
func (r *Relay) relay(c net.Conn) {
	defer r.wg.Done()
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p := &relayPair{client: c, upstream: up, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		p.close(false)
		return
	}
	r.pairs[p] = struct{}{}
	r.mu.Unlock()

	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.copy(p, up, c)
	}()
	r.copy(p, c, up)
	r.mu.Lock()
	delete(r.pairs, p)
	r.mu.Unlock()
}

// copy forwards from src to dst until either fails, then closes the pair.
func (r *Relay) copy(p *relayPair, dst, src net.Conn) {
	defer p.close(false)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(r.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if g := r.gate.Load(); g != nil {
				select {
				case <-*g:
				case <-p.done:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
