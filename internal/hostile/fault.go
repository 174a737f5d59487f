package hostile

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// FaultKind names the way a Fault backend fails.
type FaultKind int

const (
	// FaultClose closes the connection with a clean FIN on request n+1,
	// without answering it.
	FaultClose FaultKind = iota + 1
	// FaultReset resets the connection (RST) on request n+1.
	FaultReset
	// FaultTruncate answers request n+1 with its length prefix and half
	// of its body, then closes the connection with a FIN.
	FaultTruncate
	// FaultWrongCorrelation writes response n+1 with the bitwise
	// complement of its correlation id and keeps serving.
	FaultWrongCorrelation
)

func (k FaultKind) String() string {
	switch k {
	case FaultClose:
		return "close"
	case FaultReset:
		return "reset"
	case FaultTruncate:
		return "truncate"
	case FaultWrongCorrelation:
		return "wrong-correlation"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// drainTimeout bounds how long a closing connection reads what the client
// already pipelined; see closeWithFIN.
const drainTimeout = 2 * time.Second

// Fault is a Kafka backend that serves each client connection in order,
// over a kfake connection of its own, until the connection's (n+1)th
// request (or, for FaultWrongCorrelation, response), where it fails as
// its kind says. Counts are per connection: every new connection gets n
// good exchanges. An acks=0 Produce counts as a request but not as a
// response.
//
// What reaches kfake matters to a test of write failures: FaultClose and
// FaultReset drop request n+1 unsent, so it is not applied; FaultTruncate
// and FaultWrongCorrelation forward it, so it is applied and only its
// answer is lost or mislabeled. An acks=0 request n+1 under FaultTruncate
// is applied and then the connection closes. With a large n a Fault is an
// honest in-order pass-through.
type Fault struct {
	base
	kind FaultKind
	n    int

	conns     atomic.Int64
	requests  atomic.Int64
	responses atomic.Int64
	faults    atomic.Int64
}

// CloseAfter answers n requests per connection and closes the connection
// (FIN) on request n+1 without answering it.
func CloseAfter(n int, opts ...kfake.Opt) (*Fault, error) { return NewFault(FaultClose, n, opts...) }

// ResetAfter answers n requests per connection and resets the connection
// (RST) on request n+1.
func ResetAfter(n int, opts ...kfake.Opt) (*Fault, error) { return NewFault(FaultReset, n, opts...) }

// TruncateAfter answers n requests per connection and writes only part of
// the response to request n+1 before closing.
func TruncateAfter(n int, opts ...kfake.Opt) (*Fault, error) {
	return NewFault(FaultTruncate, n, opts...)
}

// WrongCorrelation answers n requests per connection correctly and gives
// response n+1 a wrong correlation id.
func WrongCorrelation(n int, opts ...kfake.Opt) (*Fault, error) {
	return NewFault(FaultWrongCorrelation, n, opts...)
}

// NewFault starts a Fault backend of the given kind and the kfake cluster
// behind it; opts go to kfake.NewCluster.
func NewFault(kind FaultKind, n int, opts ...kfake.Opt) (*Fault, error) {
	if kind < FaultClose || kind > FaultWrongCorrelation {
		return nil, fmt.Errorf("hostile: unknown fault kind %d", int(kind))
	}
	if n < 0 {
		return nil, fmt.Errorf("hostile: fault after %d requests: must be at least 0", n)
	}
	b, err := newBase("", opts)
	if err != nil {
		return nil, err
	}
	f := &Fault{base: b, kind: kind, n: n}
	b.srv.start(f.serveClient)
	return f, nil
}

// FaultStats counts what a Fault backend has seen, over all connections.
type FaultStats struct {
	Conns     int64 // client connections accepted
	Requests  int64 // request frames read, including the failing ones
	Responses int64 // responses written whole, with a right or wrong id
	Faults    int64 // faults injected
}

// Stats returns the counts so far.
func (f *Fault) Stats() FaultStats {
	return FaultStats{
		Conns:     f.conns.Load(),
		Requests:  f.requests.Load(),
		Responses: f.responses.Load(),
		Faults:    f.faults.Load(),
	}
}

// Kind returns the backend's kind.
func (f *Fault) Kind() FaultKind { return f.kind }

func (f *Fault) serveClient(c net.Conn) {
	f.conns.Add(1)
	up, err := f.srv.dial(f.kfakeAddr)
	if err != nil {
		return
	}
	defer f.srv.release(up)
	var requests, responses int
	for {
		req, err := readRequest(c)
		if err != nil {
			return
		}
		f.requests.Add(1)
		requests++
		if requests == f.n+1 {
			switch f.kind {
			case FaultClose:
				f.faults.Add(1)
				f.closeWithFIN(c)
				return
			case FaultReset:
				f.faults.Add(1)
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				c.Close()
				return
			}
		}
		if _, err := up.Write(req.frame); err != nil {
			return
		}
		if req.noResponse {
			if f.kind == FaultTruncate && requests == f.n+1 {
				f.faults.Add(1)
				f.closeWithFIN(c)
				return
			}
			continue
		}
		resp, err := readFrame(up, minResponse)
		if err != nil {
			return
		}
		if f.kind == FaultTruncate && requests == f.n+1 {
			f.faults.Add(1)
			body := len(resp) - 4
			if _, err := c.Write(resp[:4+body/2]); err != nil {
				return
			}
			f.closeWithFIN(c)
			return
		}
		responses++
		if f.kind == FaultWrongCorrelation && responses == f.n+1 {
			f.faults.Add(1)
			binary.BigEndian.PutUint32(resp[4:8], ^binary.BigEndian.Uint32(resp[4:8]))
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
		f.responses.Add(1)
	}
}

// closeWithFIN closes c so the client sees a clean end of stream. Closing
// a socket whose receive buffer still holds pipelined requests makes the
// kernel send RST, and the client would then see a reset (and may lose
// bytes already written to it), so it shuts down writes first and reads
// until the client closes or drainTimeout passes.
func (f *Fault) closeWithFIN(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return
	}
	tc.CloseWrite()
	tc.SetReadDeadline(time.Now().Add(drainTimeout))
	buf := make([]byte, 4096)
	for {
		if _, err := tc.Read(buf); err != nil {
			break
		}
	}
	tc.Close()
}

// RefusedAddr returns a loopback address on which nothing listens: it
// binds a port and releases it, so a dial there is refused unless another
// process grabs the port in between.
func RefusedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", err
	}
	return addr, nil
}
