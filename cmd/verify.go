package cmd

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
)

// exitViolationSeen is the exit status of serve and dev with
// --fail-on-violation when the verifier saw a violation.
const exitViolationSeen = 3

// openReport creates the --report file at start, so that a path that
// cannot be written fails before any traffic instead of at exit. It
// returns nil when no report is asked for.
func openReport(cfg config.Config) (*os.File, error) {
	if cfg.Report == "" {
		return nil, nil
	}
	f, err := os.Create(cfg.Report)
	if err != nil {
		return nil, config.Explain(err, fmt.Sprintf("--report %q cannot be created: %s (is its directory there and writable?)", cfg.Report, config.FileReason(err)))
	}
	return f, nil
}

// finishVerify logs and writes what the verifier saw, once the proxy has
// stopped, and turns a violation into exit status 3 with
// --fail-on-violation. err is what serving returned; it wins.
func finishVerify(p *proxy.Proxy, cfg config.Config, report *os.File, log *slog.Logger, err error) error {
	v := p.Verifier()
	if v == nil {
		return err
	}
	rep := v.Report()
	attrs := []any{"violations", rep.Total()}
	for _, k := range rep.Violations {
		attrs = append(attrs, string(k.Kind), k.Count)
	}
	if rep.Total() > 0 {
		log.Warn("verify: the upstream broke ordering", attrs...)
	} else {
		log.Info("verify: no ordering violation seen", attrs...)
	}
	if report != nil {
		werr := rep.Write(report, cfg.Report)
		if cerr := report.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil && err == nil {
			err = fmt.Errorf("--report %q: %w", cfg.Report, werr)
		}
	}
	if err == nil && cfg.FailOnViolation && rep.Total() > 0 {
		err = &exitError{code: exitViolationSeen, err: fmt.Errorf("verify: %d ordering violations seen (--fail-on-violation)", rep.Total())}
	}
	return err
}
