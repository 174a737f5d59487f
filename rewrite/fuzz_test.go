package rewrite

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzResponse decodes arbitrary bytes as each rewritten response type and
// checks that whatever kmsg accepts, Response rewrites without panicking and
// leaves no upstream address behind once re-encoded, not even where the
// response names no node.
func FuzzResponse(f *testing.F) {
	for _, c := range apiCases {
		for _, v := range c.versions {
			r := c.build(v)
			f.Add(r.AppendTo(nil), keyIndex(r.Key()), v)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, sel uint8, version int16) {
		key := rewrittenKeys[int(sel)%len(rewrittenKeys)]
		resp := kmsg.ResponseForKey(key)
		version = int16(uint16(version) % uint16(resp.MaxVersion()+1))
		resp.SetVersion(version)
		if resp.ReadFrom(data) != nil {
			return
		}
		if err := Response(resp, newFakeMapper()); err != nil {
			t.Fatalf("Response: %v", err)
		}
		out, err := roundtrip(resp)
		if err != nil {
			t.Fatalf("re-encoding a rewritten response: %v", err)
		}
		for _, a := range addrs(out) {
			if a.mustMap && (a.host != proxyHost(a.id) || a.port != proxyPort(a.id)) {
				t.Fatalf("%s v%d: node %d left at %s:%d", kmsg.NameForKey(key), version, a.id, a.host, a.port)
			}
			if !a.mustMap && !a.cleared() {
				t.Fatalf("%s v%d: an address naming no node (id %d) left at %s:%d", kmsg.NameForKey(key), version, a.id, a.host, a.port)
			}
		}
	})
}

func keyIndex(key int16) uint8 {
	for i, k := range rewrittenKeys {
		if k == key {
			return uint8(i)
		}
	}
	panic("not a rewritten key")
}
