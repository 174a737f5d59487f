package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Readiness: the proxy can serve when it accepts clients (Start or Serve
// runs) and is not draining, its listeners are open, and the upstream
// answered recently. "Answered" means a broker
// discovery (a Metadata round trip, as at start) succeeded; when the last
// one is older than probeEvery, Ready starts another in the background, so
// an idle proxy probed by an orchestrator costs the upstream one Metadata
// request per probeEvery and the hot path nothing.
const (
	probeEvery   = 10 * time.Second
	probeTimeout = 10 * time.Second
)

// ErrNotReady is wrapped by every reason Ready gives.
var ErrNotReady = errors.New("not ready")

// health holds the outcome of the last upstream discoveries.
type health struct {
	mu       sync.Mutex
	answered time.Time // last successful discovery
	failed   time.Time // last failed discovery
	lastErr  error     // its error
	probing  bool
	probeAt  time.Time // start of the last probe
}

func (h *health) record(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.answered = time.Now()
		return
	}
	h.failed, h.lastErr = time.Now(), err
}

// everAnswered reports whether a discovery ever succeeded.
func (h *health) everAnswered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.answered.IsZero()
}

// noteReady logs "proxy ready" once, when the proxy first accepts
// clients, has reached an upstream and has its node listeners open: Start
// and every successful discovery call it, so the line comes with the last
// of these, as Ready's first yes does, and an upstream that cannot be
// reached at start delays it.
func (p *Proxy) noteReady() {
	p.mu.Lock()
	serving := p.serving && !p.closing
	p.mu.Unlock()
	if !serving || !p.health.everAnswered() || p.nodes.openErr() != nil || !p.readyLogged.CompareAndSwap(false, true) {
		return
	}
	cfg := p.current()
	p.log.Info("proxy ready", "listen", p.Addr(), "upstream", cfg.Upstreams, "ordering", cfg.Ordering())
}

// Ready returns nil when the proxy should be sent new clients, and otherwise
// an error wrapping ErrNotReady that says why.
func (p *Proxy) Ready() error {
	p.mu.Lock()
	closing, serving := p.closing, p.serving
	p.mu.Unlock()
	if closing {
		return fmt.Errorf("%w: draining", ErrNotReady)
	}
	if !serving {
		return fmt.Errorf("%w: not accepting clients yet", ErrNotReady)
	}
	if err := p.nodes.openErr(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if err := p.sec.gate.Refusing(p.current().Upstreams); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	h := &p.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if now.Sub(h.answered) > probeEvery && !h.probing && now.Sub(h.probeAt) > time.Second {
		h.probing, h.probeAt = p.startProbe(), now
	}
	switch {
	case h.answered.IsZero() && h.lastErr == nil:
		return fmt.Errorf("%w: upstream discovery has not completed yet", ErrNotReady)
	case h.answered.IsZero():
		return fmt.Errorf("%w: upstream discovery has not succeeded: %v", ErrNotReady, h.lastErr)
	case h.failed.After(h.answered):
		return fmt.Errorf("%w: upstream not answering since %s: %v", ErrNotReady, h.failed.UTC().Format(time.RFC3339), h.lastErr)
	}
	return nil
}

// startProbe runs a discovery on a tracked goroutine unless the proxy is
// closing, and reports whether it started.
func (p *Proxy) startProbe() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.wg.Add(1)
	go p.probe()
	return true
}

// probe runs one discovery, bounded in time and by the proxy closing.
func (p *Proxy) probe() {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, probeTimeout)
	defer cancel()
	err := p.Discover(ctx)
	p.health.mu.Lock()
	p.health.probing = false
	p.health.mu.Unlock()
	if err != nil && p.ctx.Err() == nil && !errors.Is(err, ErrUpstreamNeedsCredentials) {
		p.log.Warn("upstream readiness probe failed", "err", err)
	}
}
