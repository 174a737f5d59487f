package splitmerge

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// findCoordinator answers that the proxy coordinates every group and
// transactional id. The real coordinator is the proxy's business: it
// finds it when a request for the key comes (Coordinators). Key types
// other than groups and transactions (share-partition keys are a
// broker's own) are INVALID_REQUEST, as Kafka answers a type it does not
// know.
func findCoordinator(r *kmsg.FindCoordinatorRequest, self Self) *kmsg.FindCoordinatorResponse {
	out := kmsg.NewPtrFindCoordinatorResponse()
	out.Version = r.Version
	known := r.CoordinatorType == CoordinatorGroup || r.CoordinatorType == CoordinatorTransaction
	msg := "the single endpoint coordinates groups (key type 0) and transactions (key type 1)"
	if r.Version < 4 {
		if !known {
			out.ErrorCode, out.ErrorMessage, out.NodeID, out.Port = kerr.InvalidRequest.Code, &msg, -1, -1
			return out
		}
		out.NodeID, out.Host, out.Port = self.NodeID, self.Host, self.Port
		return out
	}
	for _, k := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = k
		if known {
			c.NodeID, c.Host, c.Port = self.NodeID, self.Host, self.Port
		} else {
			c.NodeID, c.Port, c.ErrorCode, c.ErrorMessage = -1, -1, kerr.InvalidRequest.Code, &msg
		}
		out.Coordinators = append(out.Coordinators, c)
	}
	return out
}
