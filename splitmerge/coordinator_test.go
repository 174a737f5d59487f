package splitmerge

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// echoCoordinator answers a part as its coordinator would: a response
// that names every entry, each with a code that says which broker
// answered (1000 + node).
func echoCoordinator(node int32, req kmsg.Request) kmsg.Response {
	return ErrorResponse(req, marker(node), "")
}

// TestSingleCoordinator: a request keyed by one group or transactional
// id goes whole to its coordinator at every version, and the answer is
// the coordinator's; a coordinator the view lacks is answered
// COORDINATOR_NOT_AVAILABLE and marks the view stale; a coordinator that
// fails, NOT_COORDINATOR.
func TestSingleCoordinator(t *testing.T) {
	cluster := testCluster()
	reqs := map[string]func(key string) kmsg.Request{
		"OffsetCommit": func(k string) kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group = k
			r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 5}}}}
			return r
		},
		"JoinGroup":  func(k string) kmsg.Request { r := kmsg.NewPtrJoinGroupRequest(); r.Group = k; return r },
		"Heartbeat":  func(k string) kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = k; return r },
		"LeaveGroup": func(k string) kmsg.Request { r := kmsg.NewPtrLeaveGroupRequest(); r.Group = k; return r },
		"SyncGroup":  func(k string) kmsg.Request { r := kmsg.NewPtrSyncGroupRequest(); r.Group = k; return r },
		"OffsetFetch": func(k string) kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Group = k
			r.Version = 7
			return r
		},
		"TxnOffsetCommit": func(k string) kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.Group, r.TransactionalID = k, "t1"
			r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 2}}}}
			return r
		},
		"OffsetDelete":           func(k string) kmsg.Request { r := kmsg.NewPtrOffsetDeleteRequest(); r.Group = k; return r },
		"ConsumerGroupHeartbeat": func(k string) kmsg.Request { r := kmsg.NewPtrConsumerGroupHeartbeatRequest(); r.Group = k; return r },
		"StreamsGroupHeartbeat":  func(k string) kmsg.Request { r := kmsg.NewPtrStreamsGroupHeartbeatRequest(); r.Group = k; return r },
		"AlterShareGroupOffsets": func(k string) kmsg.Request { r := kmsg.NewPtrAlterShareGroupOffsetsRequest(); r.GroupID = k; return r },
		"DeleteShareGroupOffsets": func(k string) kmsg.Request {
			r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
			r.GroupID = k
			return r
		},
		"StreamsGroupTopologyDescriptionUpdate": func(k string) kmsg.Request {
			r := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
			r.Group = k
			return r
		},
	}
	txn := map[string]func(key string) kmsg.Request{
		"InitProducerID": func(k string) kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID = kmsg.StringPtr(k)
			return r
		},
		"AddPartitionsToTxn": func(k string) kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.Version = k, 3
			r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "orders", Partitions: []int32{0, 4}}}
			return r
		},
		"AddOffsetsToTxn": func(k string) kmsg.Request { r := kmsg.NewPtrAddOffsetsToTxnRequest(); r.TransactionalID = k; return r },
		"EndTxn":          func(k string) kmsg.Request { r := kmsg.NewPtrEndTxnRequest(); r.TransactionalID = k; return r },
	}
	run := func(name string, build func(string) kmsg.Request, known, unknown string, node int32) {
		proto := build(known)
		last := proto.MaxVersion()
		if fixed := proto.GetVersion(); fixed != 0 {
			last = fixed // the single-key versions of a batched request
		}
		for v := range last + 1 {
			req := build(known)
			req.SetVersion(v)
			plan, got := splitAndMerge(t, req, cluster, nil, echoCoordinator)
			if len(plan.Parts) != 1 || plan.Parts[0].Node != node || plan.Parts[0].Any {
				t.Fatalf("%s v%d: parts %+v, want one to %d", name, v, plan.Parts, node)
			}
			want := roundTripResponse(ErrorResponse(roundTripRequest(req), marker(node), ""))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d: got %+v, want the coordinator's %+v", name, v, got, want)
			}

			req = build(unknown)
			req.SetVersion(v)
			plan, got = splitAndMerge(t, req, cluster, nil, echoCoordinator)
			want = roundTripResponse(ErrorResponse(roundTripRequest(req), kerr.CoordinatorNotAvailable.Code, ""))
			if len(plan.Parts) != 0 || !plan.Stale || !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d, coordinator unknown: %d parts, stale %v, got %+v", name, v, len(plan.Parts), plan.Stale, got)
			}

			req = build(known)
			req.SetVersion(v)
			_, got = splitAndMerge(t, req, cluster, map[int32]bool{node: true}, echoCoordinator)
			want = roundTripResponse(ErrorResponse(roundTripRequest(req), kerr.NotCoordinator.Code, ""))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d, coordinator failed: got %+v", name, v, got)
			}
		}
	}
	for name, build := range reqs {
		run(name, build, "g2", "g3", 3)
	}
	for name, build := range txn {
		run(name, build, "t2", "t9", 3)
	}
}

// TestCoordinatorFacts: what the sequencer needs of commits and EndTxn.
func TestCoordinatorFacts(t *testing.T) {
	cluster := testCluster()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "g1"
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.Group, toc.TransactionalID = "g2", "t1"
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "t2"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g1"
	for _, c := range []struct {
		req         kmsg.Request
		write, ends bool
		group, txn  string
	}{
		{oc, true, false, "g1", ""},
		{toc, true, false, "g2", "t1"},
		{end, false, true, "", "t2"},
		{hb, false, false, "", ""},
	} {
		p, err := Split(c.req, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if p.Write != c.write || p.EndTxn != c.ends || p.Group != c.group || p.TransactionalID != c.txn {
			t.Errorf("%s: write %v endtxn %v group %q txn %q", kmsg.NameForKey(c.req.Key()), p.Write, p.EndTxn, p.Group, p.TransactionalID)
		}
	}
}

// TestInitProducerIDWithoutTransaction: an idempotent producer's id comes
// from any broker.
func TestInitProducerIDWithoutTransaction(t *testing.T) {
	for _, v := range versions(kmsg.NewPtrInitProducerIDRequest()) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		plan, got := splitAndMerge(t, req, testCluster(), nil, func(node int32, r kmsg.Request) kmsg.Response {
			out := r.ResponseKind().(*kmsg.InitProducerIDResponse)
			out.ProducerID, out.ProducerEpoch = 4000+int64(node), 0
			return out
		})
		if len(plan.Parts) != 1 || !plan.Parts[0].Any {
			t.Fatalf("v%d: parts %+v, want one to any broker", v, plan.Parts)
		}
		if id := got.(*kmsg.InitProducerIDResponse).ProducerID; id != 4001 {
			t.Errorf("v%d: producer id %d", v, id)
		}
	}
}

// TestBatchedCoordinators: a request naming several groups or
// transactional ids is split by coordinator at every batched version, and
// the client reads one answer per key in its order: the coordinator's,
// COORDINATOR_NOT_AVAILABLE where none is known, NOT_COORDINATOR where
// the coordinator failed (broker 3 here).
func TestBatchedCoordinators(t *testing.T) {
	cluster := testCluster()
	groups := []string{"g2", "g1", "g3", "g2", "g1"}
	txns := []string{"t2", "t1", "t9", "t1"}
	cases := []struct {
		build func() kmsg.Request
		from  int16
		typ   int8
		keys  []string
	}{
		{func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			for _, g := range groups {
				r.Groups = append(r.Groups, kmsg.OffsetFetchRequestGroup{Group: g, MemberEpoch: -1})
			}
			return r
		}, 8, CoordinatorGroup, groups},
		{func() kmsg.Request { r := kmsg.NewPtrDescribeGroupsRequest(); r.Groups = groups; return r }, 0, CoordinatorGroup, groups},
		{func() kmsg.Request { r := kmsg.NewPtrDeleteGroupsRequest(); r.Groups = groups; return r }, 0, CoordinatorGroup, groups},
		{func() kmsg.Request { r := kmsg.NewPtrConsumerGroupDescribeRequest(); r.Groups = groups; return r }, 0, CoordinatorGroup, groups},
		{func() kmsg.Request { r := kmsg.NewPtrShareGroupDescribeRequest(); r.GroupIDs = groups; return r }, 0, CoordinatorGroup, groups},
		{func() kmsg.Request { r := kmsg.NewPtrStreamsGroupDescribeRequest(); r.Groups = groups; return r }, 0, CoordinatorGroup, groups},
		{func() kmsg.Request {
			r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			for _, g := range groups {
				r.Groups = append(r.Groups, kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: g})
			}
			return r
		}, 0, CoordinatorGroup, groups},
		{func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = txns
			return r
		}, 0, CoordinatorTransaction, txns},
		{func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			for _, id := range txns {
				r.Transactions = append(r.Transactions, kmsg.AddPartitionsToTxnRequestTransaction{
					TransactionalID: id, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "orders", Partitions: []int32{1}}}})
			}
			return r
		}, 4, CoordinatorTransaction, txns},
	}
	for _, c := range cases {
		proto := c.build()
		for v := c.from; v <= proto.MaxVersion(); v++ {
			req := c.build()
			req.SetVersion(v)
			name := kmsg.NameForKey(req.Key())
			plan, got := splitAndMerge(t, req, cluster, map[int32]bool{3: true}, echoCoordinator)
			var gotKeys []string
			var gotCodes []int16
			eachKeyed(reflect.ValueOf(got), func(_ int8, k string, codes []int16) {
				gotKeys = append(gotKeys, k)
				gotCodes = append(gotCodes, codes[0])
			})
			var wantCodes []int16
			for _, k := range c.keys {
				switch node := cluster.Coordinator(c.typ, k); {
				case node < 0:
					wantCodes = append(wantCodes, kerr.CoordinatorNotAvailable.Code)
				case node == 3:
					wantCodes = append(wantCodes, kerr.NotCoordinator.Code)
				default:
					wantCodes = append(wantCodes, marker(node))
				}
			}
			if !reflect.DeepEqual(gotKeys, c.keys) || !reflect.DeepEqual(gotCodes, wantCodes) {
				t.Errorf("%s v%d: answered %v %v, want %v %v", name, v, gotKeys, gotCodes, c.keys, wantCodes)
			}
			if len(plan.Parts) != 2 {
				t.Errorf("%s v%d: %d parts, want one per known coordinator", name, v, len(plan.Parts))
			}
		}
	}
}

// TestCoordinatorsLists gives the proxy the keys to look up before it
// splits, batched or not.
func TestCoordinatorsLists(t *testing.T) {
	var got []string
	collect := func(typ int8, k string) { got = append(got, string('0'+rune(typ))+k) }
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a"}, {Group: "b"}}
	Coordinators(of, collect)
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "t"
	Coordinators(end, collect)
	Coordinators(kmsg.NewPtrProduceRequest(), collect)
	ip := kmsg.NewPtrInitProducerIDRequest()
	Coordinators(ip, collect)
	if want := []string{"0a", "0b", "1t"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
}
