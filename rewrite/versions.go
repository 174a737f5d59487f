package rewrite

import "github.com/twmb/franz-go/pkg/kmsg"

// ClampVersions limits an ApiVersionsResponse to what the proxy can parse,
// so a client never picks a key or version the proxy cannot decode
// (kafka-proxy #177). It drops keys for which kmsg.RequestForKey(key) is
// nil, clamps MaxVersion to min(upstream max, kmsg max for that key), and
// drops a key whose clamped range is empty. allow, if non-nil, drops every
// key for which it returns false. The remaining keys keep their order.
//
// Features and the error code are left alone: a v0 UNSUPPORTED_VERSION
// answer (kroxylicious #2450) still lists ApiVersions itself and is clamped
// the same way.
func ClampVersions(resp *kmsg.ApiVersionsResponse, allow func(key int16) bool) {
	kept := resp.ApiKeys[:0]
	for _, k := range resp.ApiKeys {
		req := kmsg.RequestForKey(k.ApiKey)
		if req == nil {
			continue
		}
		if allow != nil && !allow(k.ApiKey) {
			continue
		}
		k.MaxVersion = min(k.MaxVersion, req.MaxVersion())
		if k.MinVersion > k.MaxVersion {
			continue
		}
		kept = append(kept, k)
	}
	// Zero the tail so dropped entries do not keep their tags alive.
	clear(resp.ApiKeys[len(kept):])
	resp.ApiKeys = kept
}

// CapVersions lowers MaxVersion of every key in caps to at most its cap,
// after ClampVersions, so that clients pick an older version (Fetch below
// v16 carries no broker addresses). A key whose range the cap empties is
// dropped. Nil caps nothing.
func CapVersions(resp *kmsg.ApiVersionsResponse, caps map[int16]int16) {
	if len(caps) == 0 {
		return
	}
	kept := resp.ApiKeys[:0]
	for _, k := range resp.ApiKeys {
		if c, ok := caps[k.ApiKey]; ok {
			k.MaxVersion = min(k.MaxVersion, c)
			if k.MinVersion > k.MaxVersion {
				continue
			}
		}
		kept = append(kept, k)
	}
	clear(resp.ApiKeys[len(kept):])
	resp.ApiKeys = kept
}
