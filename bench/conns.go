package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsFrame is one ApiVersions v3 request, framed, with correlation
// id 1: the request every Kafka client sends first, and the cheapest one a
// proxy must parse and answer.
var apiVersionsFrame = func() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "inorder-bench"
	req.ClientSoftwareVersion = "1"
	b := []byte{0, 0, 0, 0} // length, set below
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.Version))
	b = binary.BigEndian.AppendUint32(b, 1)      // correlation id
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	b = append(b, 0)                             // no tagged fields
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}()

// errBadResponse means a response did not carry our correlation id.
var errBadResponse = errors.New("bench: response with the wrong correlation id")

// ApiVersionsOn sends one ApiVersions request on c and reads its response,
// checking that the response answers it and that the broker raised no
// error.
func ApiVersionsOn(c net.Conn) error {
	if _, err := c.Write(apiVersionsFrame); err != nil {
		return err
	}
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(head[:4])
	if size < 4 || size > 1<<20 {
		return fmt.Errorf("bench: ApiVersions response of %d bytes", size)
	}
	if binary.BigEndian.Uint32(head[4:]) != 1 {
		return errBadResponse
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if len(body) < 2 || body[0] != 0 || body[1] != 0 {
		return fmt.Errorf("bench: ApiVersions answered with error code %d", binary.BigEndian.Uint16(body))
	}
	return nil
}

// IdleConns are open connections that each completed one ApiVersions
// exchange and now sit idle.
type IdleConns struct {
	conns []net.Conn
}

// OpenIdle opens n connections to addr, parallel connections at a time, and
// completes one ApiVersions exchange on each.
func OpenIdle(ctx context.Context, addr string, n, parallel int) (*IdleConns, error) {
	ic := &IdleConns{conns: make([]net.Conn, n)}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	d := net.Dialer{Timeout: 10 * time.Second}
	for w := 0; w < max(1, parallel); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					_ = c.SetDeadline(time.Now().Add(10 * time.Second))
					err = ApiVersionsOn(c)
					_ = c.SetDeadline(time.Time{})
					ic.conns[i] = c
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err) })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		ic.Close()
		return nil, firstErr
	}
	return ic, nil
}

// Len is the number of open connections.
func (ic *IdleConns) Len() int { return len(ic.conns) }

// Close closes every connection.
func (ic *IdleConns) Close() {
	for _, c := range ic.conns {
		if c != nil {
			c.Close()
		}
	}
}

// Churn opens a connection, completes one ApiVersions exchange and closes it,
// over and over on parallel goroutines for d, and returns the connections
// completed per second.
func Churn(ctx context.Context, addr string, d time.Duration, parallel int) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	dialer := net.Dialer{Timeout: 10 * time.Second}
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < max(1, parallel); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The deadline is checked between connections, never inside
			// one, so that no exchange is cut short and counted as an
			// error.
			for ctx.Err() == nil && time.Now().Before(end) {
				c, err := dialer.DialContext(ctx, "tcp", addr)
				if err == nil {
					_ = c.SetDeadline(time.Now().Add(10 * time.Second))
					err = ApiVersionsOn(c)
					// Reset rather than close politely: a churn of
					// thousands a second would otherwise park every
					// local port in TIME_WAIT within seconds.
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					c.Close()
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	rate := float64(done.Load()) / time.Since(start).Seconds()
	return rate, firstErr
}

// ProcessRSS reads the resident set size of process pid, in bytes, from
// /proc.
func ProcessRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: VmRSS line %q: %w", sc.Text(), err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("bench: no VmRSS for process %d", pid)
}
