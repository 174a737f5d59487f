package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
)

// TestWholeName: a refusal of a whole request names the group or the
// transactional id the request gives, its only one when it lists them,
// and none when it lists several or the type does not apply.
func TestWholeName(t *testing.T) {
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group = "g1"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g2"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g3"
	fetch8 := kmsg.NewPtrOffsetFetchRequest()
	fetch8.Version = 8
	fetch8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g4"}}
	describe2 := kmsg.NewPtrDescribeGroupsRequest()
	describe2.Groups = []string{"a", "b"}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "t1"
	add3 := kmsg.NewPtrAddPartitionsToTxnRequest()
	add3.Version, add3.TransactionalID = 3, "t2"
	add4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	add4.Version = 4
	add4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "t3"}}
	produce := kmsg.NewPtrProduceRequest()
	produce.TransactionID = kmsg.StringPtr("t4")
	findTxn := kmsg.NewPtrFindCoordinatorRequest()
	findTxn.Version, findTxn.CoordinatorType, findTxn.CoordinatorKeys = 4, 1, []string{"t5"}
	offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	offsets.TransactionalID, offsets.Group = "t6", "g5"
	for _, tc := range []struct {
		req  kmsg.Request
		rt   acl.ResourceType
		want string
	}{
		{sync, acl.Group, "g1"},
		{hb, acl.Group, "g2"},
		{commit, acl.Group, "g3"},
		{fetch8, acl.Group, "g4"},
		{describe2, acl.Group, ""},
		{end, acl.TransactionalID, "t1"},
		{add3, acl.TransactionalID, "t2"},
		{add4, acl.TransactionalID, "t3"},
		{produce, acl.TransactionalID, "t4"},
		{findTxn, acl.TransactionalID, "t5"},
		{findTxn, acl.Group, ""},
		{offsets, acl.TransactionalID, "t6"},
		{offsets, acl.Group, "g5"},
		{commit, acl.Topic, ""},
	} {
		if got := wholeName(tc.req, tc.rt); got != tc.want {
			t.Errorf("%s v%d, %v: %q, want %q", kmsg.NameForKey(tc.req.Key()), tc.req.GetVersion(), tc.rt, got, tc.want)
		}
	}
}
