package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/inorder-proxy/inorder/quota"
)

// KeyQuotas is the config file key of the quotas list. It is the one
// setting with no flag: a list of entries, each a mapping, has no sensible
// spelling on a command line.
const KeyQuotas = "quotas"

// fileOnly are the keys a config file may hold that no flag binds.
var fileOnly = []string{KeyQuotas}

func bindQuotaFlags(fs *pflag.FlagSet, c *Config) {
	fs.IntVar(&c.MaxConnectionsPerIP, "max-connections-per-ip", c.MaxConnectionsPerIP, "client connections one address may have open at once, as Kafka's max.connections.per.ip (0: no cap)")
	fs.Var((*ipCapsValue)(&c.MaxConnectionsPerIPOverrides), "max-connections-per-ip-overrides", "a cap per address in place of --max-connections-per-ip, as Kafka's max.connections.per.ip.overrides: IP=COUNT[,IP=COUNT...] (0 refuses every connection from it)")
}

// IPCaps are connection caps by address.
type IPCaps map[netip.Addr]int

// String writes the caps as the flag takes them, in address order:
// "10.0.0.1=5,10.0.0.2=0".
func (v IPCaps) String() string {
	addrs := make([]netip.Addr, 0, len(v))
	for a := range v {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.String() + "=" + strconv.Itoa(v[a])
	}
	return strings.Join(parts, ",")
}

type ipCapsValue IPCaps

func (v *ipCapsValue) String() string { return IPCaps(*v).String() }
func (v *ipCapsValue) Type() string   { return "IP=COUNT,..." }
func (v *ipCapsValue) Set(s string) error {
	caps := IPCaps{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		ip, n, ok := strings.Cut(part, "=")
		if !ok {
			return expectation(fmt.Sprintf("must be IP=COUNT pairs, like 10.0.0.1=50 (%q has no =)", part))
		}
		a, err := netip.ParseAddr(strings.TrimSpace(ip))
		if err != nil || a.Zone() != "" {
			return expectation(fmt.Sprintf("names no IP address in %q (addresses only, no host names)", part))
		}
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || count < 0 {
			return expectation(fmt.Sprintf("has no count in %q (a whole number from 0)", part))
		}
		a = a.Unmap()
		if _, dup := caps[a]; dup {
			return expectation(fmt.Sprintf("names %s twice", a))
		}
		caps[a] = count
	}
	if len(caps) == 0 {
		caps = nil
	}
	*v = ipCapsValue(caps)
	return nil
}

// quotasError is a fault in the quotas list.
type quotasError struct{ reason string }

func (e *quotasError) Error() string { return KeyQuotas + ": " + e.reason }
func (e *quotasError) Unwrap() error { return ErrInvalid }

// loadQuotas reads the value of the quotas key, which starts on line of
// the file at path, into c.
func loadQuotas(path string, line int, node *yaml.Node, c *Config) error {
	q, err := quota.ParseNode(node)
	if err != nil {
		reason := err.Error()
		var pe *quota.ParseError
		if errors.As(err, &pe) {
			reason = pe.Reason
			if pe.Line > 0 {
				line = pe.Line
			}
		}
		return fmt.Errorf("config file %s:%d: %w", path, line, &quotasError{reason: reason})
	}
	if q.Empty() {
		q = nil
	}
	c.Quotas = q
	return nil
}

// ConnLimits returns the caps on connections by address of c.
func (c *Config) ConnLimits() quota.ConnLimits {
	return quota.ConnLimits{PerIP: c.MaxConnectionsPerIP, PerIPOverrides: c.MaxConnectionsPerIPOverrides}
}
