package proxy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/ordering"
)

// ReloadableSettings are the settings Reload applies: each new connection
// reads them when it is accepted (limits, the ordering mode) or when it
// dials (the upstream list, the dial timeout); connections already open
// keep the values they started with. Every other setting is read once, at
// start.
var ReloadableSettings = []string{
	"upstream", "upstream-ordering", "max-in-flight", "max-buffered-bytes",
	"max-request-size", "max-response-size", "dial-timeout", "api-version-cap",
	"idle-timeout", "read-timeout", "write-timeout", "max-connections",
	config.KeyQuotas, "max-connections-per-ip", "max-connections-per-ip-overrides",
}

// startOnly are settings the proxy reads only in New; Reload refuses a
// change to them.
var startOnly = []string{"listen", "advertised-host", "node-port-base", "topology", "sni-bootstrap", "sni-node-pattern", "sni-controller-pattern", "advertised-port", "expose-controllers", "allow-upstream", "max-memory", "verify", "report", "fail-on-violation"}

// ErrRestartRequired is returned by Reload for a change to a setting that
// only a restart applies.
var ErrRestartRequired = errors.New("needs a restart")

// Reload validates cfg and makes it the configuration of every connection
// accepted from now on. A change to a setting read only at start (a listen
// address, say) is refused with ErrRestartRequired and nothing is applied;
// connections already open are never touched.
func (p *Proxy) Reload(cfg config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.Upstreams) == 0 {
		return &config.FieldError{Field: "upstream", Reason: "is required"}
	}
	var refused []string
	for _, name := range config.Changed(*p.live.Load(), cfg) {
		if slices.Contains(startOnly, name) {
			refused = append(refused, name)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s %w", strings.Join(refused, ", "), ErrRestartRequired)
	}
	p.live.Store(&cfg)
	p.reloadQuotas(&cfg)
	return nil
}

// current returns the configuration new connections and dials use.
func (p *Proxy) current() *config.Config { return p.live.Load() }

// modeOf returns the sequencer mode of cfg's ordering setting.
func modeOf(cfg *config.Config) ordering.Mode {
	if cfg.Ordering() == config.OrderingConnection {
		return ordering.Connection
	}
	return ordering.None
}
