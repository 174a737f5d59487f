package clientauth

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

func TestAdvertise(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	// The upstream serves SaslHandshake v0 only and no SaslAuthenticate.
	av.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MaxVersion: 11},
		{ApiKey: keySaslHandshake, MinVersion: 0, MaxVersion: 0},
		{ApiKey: 60, MaxVersion: 1},
	}
	Advertise(av)
	var keys []int16
	for _, k := range av.ApiKeys {
		keys = append(keys, k.ApiKey)
		if k.ApiKey == keySaslHandshake || k.ApiKey == keySaslAuthenticate {
			max, _ := wire.MaxVersion(k.ApiKey)
			if k.MinVersion != 0 || k.MaxVersion != max {
				t.Errorf("key %d advertised v%d-v%d, want v0-v%d", k.ApiKey, k.MinVersion, k.MaxVersion, max)
			}
		}
	}
	if want := []int16{0, keySaslHandshake, keySaslAuthenticate, 60}; !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v in order", keys, want)
	}

	refused := kmsg.NewPtrApiVersionsResponse()
	refused.ErrorCode = kerr.UnsupportedVersion.Code
	Advertise(refused)
	if len(refused.ApiKeys) != 0 {
		t.Fatalf("an answer in error changed: %v", refused.ApiKeys)
	}
}
