package proxy

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/single"
)

// quotaAnswer applies the client's quotas to the merged answer of r in
// the single topology, as response, quotaResponse and throttledResponse
// do to a broker's answer in the others (quota.go): a throttled answer
// (over a byte rate or its request_percentage) carries the larger of the
// brokers' and the proxy's throttle_time_ms; a Fetch answer is counted
// against the fetch quota, whole, as it goes to the client, and when
// throttled it is replaced by an empty one with the throttle set (Kafka's
// throttled fetch, its records dropped: the single topology's fetches are
// sessionless, so the client asks again from the same offsets) and the
// client reader is muted for the throttle. size is the frame size of a
// Fetch answer returned as it came, measured here for the quota and again
// needed to encode it; 0 otherwise.
func (c *conn) quotaAnswer(r *request, resp kmsg.Response) (_ kmsg.Response, size int) {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		if r.throttle > 0 {
			setThrottle(resp, r.throttle)
		}
		return resp, 0
	}
	if r.quota == nil && r.throttle <= 0 {
		return resp, 0
	}
	now := time.Now()
	if r.quota != nil {
		size = single.EncodedSize(fr, r.hdr.Correlation, r.hdr.ResponseFlexible())
		if r.throttle > 0 {
			// Throttled for its request time: answered empty, its
			// bytes checked for the larger throttle and taken back,
			// as Kafka does.
			if d := r.quota.RecordThrottledFetch(now, size-4); d > r.throttle {
				r.throttle = d
				c.mute(now, d)
			}
		} else if d := r.quota.RecordFetch(now, size-4); d > 0 {
			r.throttle = d
			c.mute(now, d)
		}
	}
	if r.throttle <= 0 {
		return fr, size
	}
	empty := kmsg.NewPtrFetchResponse()
	empty.Version = fr.Version
	empty.ThrottleMillis = max(fr.ThrottleMillis, throttleMillis(r.throttle))
	empty.ErrorCode, empty.SessionID = fr.ErrorCode, fr.SessionID
	return empty, 0
}

// setThrottle sets resp's throttle_time_ms to the larger of its own and
// d, where the answer has the field at its version.
func setThrottle(resp kmsg.Response, d time.Duration) {
	t, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		ms, _ := t.Throttle()
		st.SetThrottle(max(ms, throttleMillis(d)))
	}
}
