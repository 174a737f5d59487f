package single

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/splitmerge"
)

// Learn feeds the view what the answers to a whole request teach (req,
// split by plan, answered part by part in results), before Merge takes
// them apart: a client's Metadata answer is the topics it lists as its
// broker saw them; a partition answered as moved, unknown or fenced, or a
// part that failed, makes the view stale (and a KIP-951 leader is taken
// at once); a coordinator that says it is not one, or whose part failed,
// is forgotten, so that the next request for its key looks it up again.
func (v *View) Learn(req kmsg.Request, plan *splitmerge.Plan, results []splitmerge.Result) {
	class := splitmerge.ClassOf(plan.Key)
	stale := false
	var moves []leaderMove
	for i, res := range results {
		if res.Err != nil {
			switch class {
			case splitmerge.ByLeader:
				stale = true
			case splitmerge.ByCoordinator:
				splitmerge.Coordinators(plan.Parts[i].Request, v.coords.forget)
			}
			continue
		}
		switch resp := res.Response.(type) {
		case *kmsg.MetadataResponse:
			// Never as an answer for every topic, even to a request
			// for all: the client's upstream identity may not be
			// allowed to describe every topic, and the answer then
			// leaves them out. A topic deleted is forgotten at the
			// view's own next refresh, which its partitions' errors
			// call for.
			v.applyMetadata(resp, false)
		case *kmsg.ProduceResponse:
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					stale = stale || movedCode(p.ErrorCode)
					moves = moved(moves, t.Topic, t.TopicID, p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID)
				}
			}
		case *kmsg.FetchResponse:
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					stale = stale || movedCode(p.ErrorCode)
					moves = moved(moves, t.Topic, t.TopicID, p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID)
				}
			}
		case *kmsg.ListOffsetsResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.ListOffsetsResponseTopic) []int16 {
				return codes(t.Partitions, func(p *kmsg.ListOffsetsResponseTopicPartition) int16 { return p.ErrorCode })
			}, movedCode)
		case *kmsg.OffsetForLeaderEpochResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.OffsetForLeaderEpochResponseTopic) []int16 {
				return codes(t.Partitions, func(p *kmsg.OffsetForLeaderEpochResponseTopicPartition) int16 { return p.ErrorCode })
			}, movedCode)
		case *kmsg.DeleteRecordsResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.DeleteRecordsResponseTopic) []int16 {
				return codes(t.Partitions, func(p *kmsg.DeleteRecordsResponseTopicPartition) int16 { return p.ErrorCode })
			}, movedCode)
		case *kmsg.CreateTopicsResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.CreateTopicsResponseTopic) []int16 { return []int16{t.ErrorCode} }, notController)
		case *kmsg.DeleteTopicsResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.DeleteTopicsResponseTopic) []int16 { return []int16{t.ErrorCode} }, notController)
		case *kmsg.CreatePartitionsResponse:
			stale = stale || anyCode(resp.Topics, func(t *kmsg.CreatePartitionsResponseTopic) []int16 { return []int16{t.ErrorCode} }, notController)
		default:
			if class == splitmerge.ByCoordinator {
				v.forgetCoordinators(plan.Parts[i].Request, res.Response)
			}
		}
	}
	v.setLeaders(moves)
	if stale {
		v.Stale()
	}
}

// moved adds the leader a KIP-951 answer names for a partition it
// answered with an error.
func moved(moves []leaderMove, topic string, id [16]byte, partition int32, code int16, leader int32) []leaderMove {
	if code != 0 && leader >= 0 {
		return append(moves, leaderMove{topic, id, partition, leader})
	}
	return moves
}

// anyCode reports whether bad holds for a code of any entry of items.
func anyCode[T any](items []T, entryCodes func(*T) []int16, bad func(int16) bool) bool {
	for i := range items {
		for _, c := range entryCodes(&items[i]) {
			if bad(c) {
				return true
			}
		}
	}
	return false
}

// codes lists the error codes of items.
func codes[T any](items []T, code func(*T) int16) []int16 {
	out := make([]int16, len(items))
	for i := range items {
		out[i] = code(&items[i])
	}
	return out
}

// notController reports whether a code says the broker asked is not the
// controller.
func notController(code int16) bool { return code == kerr.NotController.Code }

// movedCode reports whether a partition's error says the view placed it
// wrongly.
func movedCode(code int16) bool {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code, kerr.FencedLeaderEpoch.Code:
		return true
	}
	return false
}

// notCoordinator reports whether an error says the broker asked is not
// the key's coordinator (any more).
func notCoordinator(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code
}

// forgetCoordinators forgets the coordinators that resp, the answer to a
// part sent to them, says are not: a key of a batched answer when its
// entry says so, every key of the part when the answer as a whole does.
func (v *View) forgetCoordinators(part kmsg.Request, resp kmsg.Response) {
	all := false
	one := func(typ int8, key string, code int16) {
		if notCoordinator(code) {
			v.coords.forget(typ, key)
		}
	}
	const g, t = splitmerge.CoordinatorGroup, splitmerge.CoordinatorTransaction
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				all = all || notCoordinator(p.ErrorCode)
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				all = all || notCoordinator(p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		all = notCoordinator(r.ErrorCode)
		for _, gr := range r.Groups {
			one(g, gr.Group, gr.ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.OffsetDeleteResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.ConsumerGroupHeartbeatResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.InitProducerIDResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.AddOffsetsToTxnResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.EndTxnResponse:
		all = notCoordinator(r.ErrorCode)
	case *kmsg.AddPartitionsToTxnResponse:
		all = notCoordinator(r.ErrorCode)
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				all = all || notCoordinator(p.ErrorCode)
			}
		}
		for _, tx := range r.Transactions {
			for _, tp := range tx.Topics {
				for _, p := range tp.Partitions {
					one(t, tx.TransactionalID, p.ErrorCode)
				}
			}
		}
	case *kmsg.DescribeGroupsResponse:
		for _, gr := range r.Groups {
			one(g, gr.Group, gr.ErrorCode)
		}
	case *kmsg.DeleteGroupsResponse:
		for _, gr := range r.Groups {
			one(g, gr.Group, gr.ErrorCode)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, gr := range r.Groups {
			one(g, gr.Group, gr.ErrorCode)
		}
	case *kmsg.DescribeTransactionsResponse:
		for _, tx := range r.TransactionStates {
			one(t, tx.TransactionalID, tx.ErrorCode)
		}
	}
	if all {
		splitmerge.Coordinators(part, v.coords.forget)
	}
}
