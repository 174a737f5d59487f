package clientauth

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// Advertise makes av, an ApiVersions answer, list the SaslHandshake and
// SaslAuthenticate versions a Session answers, whatever the upstream
// serves: clients choose the SASL flow by them (no SaslHandshake v1 or no
// SaslAuthenticate means the raw v0 tokens), and the upstream never sees
// those requests. An answer in error is left as it is.
func Advertise(av *kmsg.ApiVersionsResponse) {
	if av.ErrorCode != 0 {
		return
	}
	for _, key := range []int16{keySaslHandshake, keySaslAuthenticate} {
		max, _ := wire.MaxVersion(key)
		i := slices.IndexFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
		if i < 0 {
			av.ApiKeys = append(av.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: key})
			i = len(av.ApiKeys) - 1
		}
		av.ApiKeys[i].MinVersion, av.ApiKeys[i].MaxVersion = 0, max
	}
	slices.SortFunc(av.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
}
