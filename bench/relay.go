package bench

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Relay is the ideal proxy: it copies bytes between a client connection and
// a fresh connection to its target, one goroutine per direction, and knows
// nothing of Kafka. Whatever a Kafka proxy loses against the relay is its own
// cost; whatever the relay loses against a direct connection is the price of
// any extra hop on the same machine.
type Relay struct {
	ln     net.Listener
	target string
	// bufSize, when positive, copies through a buffer of this size with
	// plain reads and writes instead of letting io.Copy splice.
	bufSize int
	// listenTLS and dialTLS, when set, terminate TLS from clients and
	// originate it to the target: the floor for a proxy that speaks TLS
	// on both sides.
	listenTLS, dialTLS *tls.Config

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewRelay listens on listen and relays every accepted connection to target.
// Call Serve to start accepting.
func NewRelay(listen, target string) (*Relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return newRelayOn(ln, target), nil
}

// SetBuffer makes the relay copy through a buffer of size bytes per
// direction with plain reads and writes; zero, the default, lets io.Copy
// splice between the sockets. Call it before Serve.
func (r *Relay) SetBuffer(size int) { r.bufSize = size }

func newRelayOn(ln net.Listener, target string) *Relay {
	return &Relay{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
}

// SetTLS makes the relay accept TLS with listen and dial its target with
// TLS configured by dial; either may be nil for plaintext. Call it before
// Serve.
func (r *Relay) SetTLS(listen, dial *tls.Config) {
	r.listenTLS, r.dialTLS = listen, dial
	if listen != nil {
		r.ln = tls.NewListener(r.ln, listen)
	}
}

// Addr is the address clients connect to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Serve accepts until Close and returns nil once closed. It backs off and
// keeps accepting when it runs out of descriptors, as net/http does: a
// relay that splices holds six per connection (two sockets and a pipe per
// direction), so thousands of connections reach the limit.
func (r *Relay) Serve() error {
	var backoff time.Duration
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if r.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !r.track(c, true) {
			c.Close()
			return nil
		}
		go r.relayConn(c)
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// track registers c unless the relay is closing; with goroutine it also
// counts the goroutine that will serve c, under the same lock, so that Close
// never waits on a group that grows after it looked.
func (r *Relay) track(c net.Conn, goroutine bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	if goroutine {
		r.wg.Add(1)
	}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

func (r *Relay) relayConn(client net.Conn) {
	defer r.wg.Done()
	defer r.untrack(client)
	defer client.Close()
	upstream, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	if r.dialTLS != nil {
		upstream = tls.Client(upstream, r.dialTLS)
	}
	if !r.track(upstream, false) {
		upstream.Close()
		return
	}
	defer r.untrack(upstream)
	defer upstream.Close()

	done := make(chan struct{})
	go func() {
		defer close(done)
		r.copyHalf(client, upstream)
	}()
	r.copyHalf(upstream, client)
	<-done
}

// plainReader hides the socket's WriteTo and the destination's ReadFrom from
// io.CopyBuffer, so that it really uses the buffer.
type plainReader struct{ io.Reader }

type plainWriter struct{ io.Writer }

// copyHalf copies one direction and then closes the whole of dst, so that
// the other direction's copy ends too: Kafka has no half-closed
// conversations.
func (r *Relay) copyHalf(dst, src net.Conn) {
	if r.bufSize > 0 {
		_, _ = io.CopyBuffer(plainWriter{dst}, plainReader{src}, make([]byte, r.bufSize))
	} else {
		_, _ = io.Copy(dst, src)
	}
	dst.Close()
	src.Close()
}

// Close stops accepting, closes every relayed connection and waits for their
// goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}
