package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
)

// wholeName is the name of the resource of type rt that a refusal of the
// whole request req speaks of, so that the audit trail names the group or
// transactional id refused: the request's own, or its only one when it
// names a list. Empty when it names none, or several.
func wholeName(req kmsg.Request, rt acl.ResourceType) string {
	switch rt {
	case acl.Group:
		return groupOf(req)
	case acl.TransactionalID:
		return transactionalIDOf(req)
	}
	return ""
}

func groupOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return r.Group
	case *kmsg.SyncGroupRequest:
		return r.Group
	case *kmsg.HeartbeatRequest:
		return r.Group
	case *kmsg.LeaveGroupRequest:
		return r.Group
	case *kmsg.OffsetCommitRequest:
		return r.Group
	case *kmsg.TxnOffsetCommitRequest:
		return r.Group
	case *kmsg.AddOffsetsToTxnRequest:
		return r.Group
	case *kmsg.OffsetDeleteRequest:
		return r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return r.Group
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			return r.Group
		}
		if len(r.Groups) == 1 {
			return r.Groups[0].Group
		}
	case *kmsg.DescribeGroupsRequest:
		return soleName(r.Groups)
	case *kmsg.DeleteGroupsRequest:
		return soleName(r.Groups)
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType == 0 {
			return coordinatorKey(r)
		}
	}
	return ""
}

func transactionalIDOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return *r.TransactionalID
		}
	case *kmsg.ProduceRequest:
		if r.TransactionID != nil {
			return *r.TransactionID
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version < 4 {
			return r.TransactionalID
		}
		if len(r.Transactions) == 1 {
			return r.Transactions[0].TransactionalID
		}
	case *kmsg.AddOffsetsToTxnRequest:
		return r.TransactionalID
	case *kmsg.EndTxnRequest:
		return r.TransactionalID
	case *kmsg.TxnOffsetCommitRequest:
		return r.TransactionalID
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType == 1 {
			return coordinatorKey(r)
		}
	}
	return ""
}

// coordinatorKey is a FindCoordinator's key: its only one from v4 on.
func coordinatorKey(r *kmsg.FindCoordinatorRequest) string {
	if r.Version < 4 {
		return r.CoordinatorKey
	}
	return soleName(r.CoordinatorKeys)
}

// soleName is the one name of names, empty unless there is exactly one.
func soleName(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return ""
}
