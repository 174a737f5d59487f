package proxy

import (
	"errors"
	"testing"

	"github.com/inorder-proxy/inorder/wire"
)

// TestStrangerFromUpstream: an upstream that answers TLS or HTTP is said
// to, with what to set, and the error still matches wire.ErrNotKafka.
func TestStrangerFromUpstream(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   string
	}{
		{"\x15\x03\x03\x00", "the upstream answered with a TLS alert: it speaks TLS; dial it with --upstream-tls"},
		{"\x16\x03\x03\x00", "the upstream answered with a TLS handshake record: it speaks TLS; dial it with --upstream-tls"},
		{"HTTP", "the upstream answered HTTP: the address is not a Kafka listener"},
	} {
		_, err := wire.CheckLength(new([4]byte([]byte(tc.prefix))), wire.MinResponseFrame, 256<<20)
		got := (&conn{}).upstreamReadError(err)
		if !errors.Is(got, ErrUpstreamProtocol) || !errors.Is(got, wire.ErrNotKafka) || got.Error() != "upstream protocol violation: "+tc.want {
			t.Errorf("%q: %v, want %q", tc.prefix, got, tc.want)
		}
	}
}
