package proxy

import (
	"net"
	"strings"
)

// allowList is the operator's list of upstream addresses the proxy may
// dial or open listeners for when the upstream advertises them. Entries
// match the advertised host as written: a name matches a host entry
// (case-insensitive) or a "*.domain" entry (any name ending in ".domain",
// not the domain itself); an IP literal matches an IP entry or a CIDR
// range. Names are not resolved to be checked against ranges: what is
// checked is what the upstream said. The zero value allows everything.
type allowList struct {
	any     bool
	hosts   map[string]struct{}
	domains []string // ".domain"
	nets    []*net.IPNet
}

// newAllowList reads entries checked by config.Validate; an entry it cannot
// read matches nothing.
func newAllowList(entries []string) allowList {
	a := allowList{any: len(entries) == 0, hosts: make(map[string]struct{})}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSuffix(e, "."))
		switch {
		case strings.Contains(e, "/"):
			if _, n, err := net.ParseCIDR(e); err == nil {
				a.nets = append(a.nets, n)
			}
		case strings.HasPrefix(e, "*."):
			a.domains = append(a.domains, e[1:])
		default:
			if ip := net.ParseIP(e); ip != nil {
				e = ip.String()
			}
			a.hosts[e] = struct{}{}
		}
	}
	return a
}

// allows reports whether the advertised host may be dialed.
func (a allowList) allows(host string) bool {
	if a.any {
		return true
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(h); ip != nil {
		if _, ok := a.hosts[ip.String()]; ok {
			return true
		}
		for _, n := range a.nets {
			if n.Contains(ip) {
				return true
			}
		}
		return false
	}
	if _, ok := a.hosts[h]; ok {
		return true
	}
	for _, d := range a.domains {
		if strings.HasSuffix(h, d) && len(h) > len(d) {
			return true
		}
	}
	return false
}
