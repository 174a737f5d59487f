package proxy

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/single"
)

// quotaAnswer applies the client's quotas to the merged answer of r in
// the single topology, as response and quotaResponse do to a broker's
// answer in the others (quota.go): a throttled Produce's answer carries
// the larger of the brokers' and the proxy's throttle_time_ms; a Fetch
// answer is counted against the fetch quota, whole, as it goes to the
// client, and over the quota it is replaced by an empty one with the
// throttle set (Kafka's throttled fetch, its records dropped: the
// single topology's fetches are sessionless, so the client asks again
// from the same offsets) and the client reader is muted for the throttle.
// size is the frame size of a Fetch answer returned as it came, measured
// here for the quota and again needed to encode it; 0 otherwise.
func (c *conn) quotaAnswer(r *request, resp kmsg.Response) (_ kmsg.Response, size int) {
	switch resp := resp.(type) {
	case *kmsg.ProduceResponse:
		if r.throttle > 0 {
			resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(r.throttle))
		}
	case *kmsg.FetchResponse:
		if r.quota == nil {
			return resp, 0
		}
		now := time.Now()
		size := single.EncodedSize(resp, r.hdr.Correlation, r.hdr.ResponseFlexible())
		d := r.quota.RecordFetch(now, size-4)
		if d <= 0 {
			return resp, size
		}
		r.throttle = d
		c.mute(now, d)
		empty := kmsg.NewPtrFetchResponse()
		empty.Version = resp.Version
		empty.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(d))
		empty.ErrorCode, empty.SessionID = resp.ErrorCode, resp.SessionID
		return empty, 0
	}
	return resp, 0
}
