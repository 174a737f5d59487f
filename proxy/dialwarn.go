package proxy

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/inorder-proxy/inorder/upauth"
)

// dialWarnInterval is the least time between two warnings about the same
// upstream address.
const dialWarnInterval = 10 * time.Second

// dialFailures turns upstream dial failures into warnings: the first
// failure to reach an address is logged at once, later ones at most once
// per dialWarnInterval with how many failed since, and the first success
// after failures says the address is back. An unreachable upstream thus
// shows in the log without a line per client connection. The zero value
// is ready to use; it holds only addresses that are failing.
type dialFailures struct {
	now func() time.Time // nil means time.Now

	mu     sync.Mutex
	byAddr map[string]*dialFailure
}

type dialFailure struct {
	warned time.Time // when the last warning was logged
	since  int       // failures since that warning, not yet logged
	total  int       // failures since the address last answered
}

func (d *dialFailures) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// failed records a failed dial of addr and warns if the address has not
// been warned about within the interval.
func (d *dialFailures) failed(log *slog.Logger, addr string, err error) {
	now := d.clock()
	d.mu.Lock()
	if d.byAddr == nil {
		d.byAddr = make(map[string]*dialFailure)
	}
	f := d.byAddr[addr]
	if f == nil {
		f = &dialFailure{}
		d.byAddr[addr] = f
	}
	f.since++
	f.total++
	warn := f.total == 1 || now.Sub(f.warned) >= dialWarnInterval
	n, total := f.since, f.total
	if warn {
		f.warned, f.since = now, 0
	}
	d.mu.Unlock()
	if warn {
		msg := "upstream unreachable; client connections to it are closed"
		if _, ok := errors.AsType[*upauth.ClosedError](err); ok {
			// It answered, so "unreachable" would send the reader to
			// the network; the error says what to check instead.
			msg = "upstream closed the connection during SASL authentication; client connections to it are closed"
		}
		log.Warn(msg, "upstream", addr, "failures", n, "failures_total", total, "err", err)
	}
}

// succeeded records a dial of addr that worked, logging that it is back
// if it had been failing.
func (d *dialFailures) succeeded(log *slog.Logger, addr string) {
	d.mu.Lock()
	f := d.byAddr[addr]
	delete(d.byAddr, addr)
	d.mu.Unlock()
	if f != nil {
		log.Info("upstream reachable again", "upstream", addr, "failures_total", f.total)
	}
}
