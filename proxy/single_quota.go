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
func (s *singleConn) quotaAnswer(r *request, resp kmsg.Response) kmsg.Response {
	switch resp := resp.(type) {
	case *kmsg.ProduceResponse:
		if r.throttle > 0 {
			resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(r.throttle))
		}
	case *kmsg.FetchResponse:
		if r.quota == nil {
			return resp
		}
		now := time.Now()
		size := single.EncodedSize(resp, r.hdr.Correlation, r.hdr.ResponseFlexible()) - 4
		d := r.quota.RecordFetch(now, size)
		if d <= 0 {
			return resp
		}
		r.throttle = d
		s.c.mute(now, d)
		empty := kmsg.NewPtrFetchResponse()
		empty.Version = resp.Version
		empty.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(d))
		empty.ErrorCode, empty.SessionID = resp.ErrorCode, resp.SessionID
		return empty
	}
	return resp
}
