package quota

import (
	"net/netip"
	"testing"
)

// FuzzQuotaConfig: the parser never panics, whatever the document; a list
// it accepts, written back, parses to the same entries; and resolving any
// client against it stays within its entries.
func FuzzQuotaConfig(f *testing.F) {
	f.Add([]byte(sampleList))
	f.Add([]byte("- user: a\n  client-id: b\n  producer_byte_rate: 1\n"))
	f.Add([]byte("- client-id: <default>\n  consumer_byte_rate: 9223372036854775807\n"))
	f.Add([]byte("- ip: ::1\n  connection_creation_rate: 1\n"))
	f.Add([]byte("- {user: '<default>', request_percentage: 1e-300}\n"))
	f.Add([]byte("- &a {user: x, producer_byte_rate: 1}\n- *a\n"))
	f.Add([]byte("[{user: \"\\u0000\", max_connections: 2147483647}]"))
	f.Add([]byte("- {user: \"\\n\", client-id: \"\\t\\n\", producer_byte_rate: 1}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		if err != nil {
			return
		}
		assertRoundTrip(t, c)
		r := NewResolver(c)
		for _, e := range c.Entries {
			for k := Kind(0); k < kinds; k++ {
				if res, ok := r.Resolve(k, e.Entity.User, e.Entity.ClientID); ok && res.Bound <= 0 {
					t.Fatalf("%s resolved to bound %v", e.Entity, res.Bound)
				}
			}
			if e.IP != "" && e.IP != DefaultName {
				if r.ConnectionRate(netip.MustParseAddr(e.IP)) != e.Limits.ConnectionCreationRate {
					t.Fatalf("ip %s: rate %d, want %d", e.IP, r.ConnectionRate(netip.MustParseAddr(e.IP)), e.Limits.ConnectionCreationRate)
				}
			}
		}
	})
}
