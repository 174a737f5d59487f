package hostile

import (
	"errors"
	"net"
	"sync"
	"time"
)

// server owns a listener and every connection and goroutine that hangs off
// it, so that close leaves no file descriptor open and no goroutine
// running: tests that start hundreds of these must not leak.
type server struct {
	ln     net.Listener
	handle func(net.Conn)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// newServer listens on listen, a free loopback port if it is empty.
func newServer(listen string) (*server, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return &server{
		ln:    ln,
		conns: make(map[net.Conn]struct{}),
		done:  make(chan struct{}),
	}, nil
}

// start begins accepting; it is separate from newServer because the
// backend must know the listener's address before the handler exists.
func (s *server) start(handle func(net.Conn)) {
	s.handle = handle
	if !s.spawn(s.acceptLoop) {
		s.ln.Close()
	}
}

// spawn runs fn on a tracked goroutine, refusing once close has begun so
// that close's Wait cannot race with a late Add.
func (s *server) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// track registers c so that close can unblock whoever is using it. It
// closes c and reports false if the server is already closing.
func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// release closes c and forgets it; every tracked connection ends here.
func (s *server) release(c net.Conn) {
	s.untrack(c)
	c.Close()
}

func (s *server) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Accept fails transiently under fd exhaustion; dying here
			// would turn a hiccup into a hung test.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
			continue
		}
		backoff = 0
		if !s.track(c) {
			return
		}
		if !s.spawn(func() { s.serveConn(c) }) {
			s.release(c)
			return
		}
	}
}

func (s *server) serveConn(c net.Conn) {
	defer s.release(c)
	s.handle(c)
}

func (s *server) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// sleep waits for d or until close begins, reporting whether d elapsed.
func (s *server) sleep(d time.Duration) bool {
	if d <= 0 {
		return !s.isClosed()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// dial opens a tracked connection to addr.
func (s *server) dial(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if !s.track(c) {
		return nil, net.ErrClosed
	}
	return c, nil
}

// close stops accepting, closes every tracked connection, and waits for
// every goroutine. It is idempotent.
func (s *server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	close(s.done)
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
