package splitmerge

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests sent to a coordinator. A key whose coordinator the view does
// not know is answered COORDINATOR_NOT_AVAILABLE, what FindCoordinator
// would have said; a part that fails, or an entry its coordinator leaves
// out, NOT_COORDINATOR. Clients handle both by finding the coordinator
// again (the proxy, which answers FindCoordinator with itself) and
// retrying.
var (
	coordinatorUnknown = kerr.CoordinatorNotAvailable.Code
	notCoordinator     = kerr.NotCoordinator.Code
)

// Coordinators calls fn with each coordinator key req needs, in request
// order, duplicates included, so that the proxy can look up those its
// view lacks before it splits. Requests of other classes call fn never.
func Coordinators(req kmsg.Request, fn func(typ int8, key string)) {
	if typ, key, ok := singleKey(req); ok {
		fn(typ, key)
		return
	}
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		for i := range r.Groups {
			fn(CoordinatorGroup, r.Groups[i].Group)
		}
	case *kmsg.DescribeGroupsRequest:
		eachKey(CoordinatorGroup, r.Groups, fn)
	case *kmsg.DeleteGroupsRequest:
		eachKey(CoordinatorGroup, r.Groups, fn)
	case *kmsg.ConsumerGroupDescribeRequest:
		eachKey(CoordinatorGroup, r.Groups, fn)
	case *kmsg.ShareGroupDescribeRequest:
		eachKey(CoordinatorGroup, r.GroupIDs, fn)
	case *kmsg.StreamsGroupDescribeRequest:
		eachKey(CoordinatorGroup, r.Groups, fn)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for i := range r.Groups {
			fn(CoordinatorGroup, r.Groups[i].GroupID)
		}
	case *kmsg.DescribeTransactionsRequest:
		eachKey(CoordinatorTransaction, r.TransactionalIDs, fn)
	case *kmsg.AddPartitionsToTxnRequest:
		for i := range r.Transactions {
			fn(CoordinatorTransaction, r.Transactions[i].TransactionalID)
		}
	}
}

func eachKey(typ int8, keys []string, fn func(int8, string)) {
	for _, k := range keys {
		fn(typ, k)
	}
}

// singleKey returns the one coordinator key of a request that has one.
func singleKey(req kmsg.Request) (typ int8, key string, ok bool) {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			return CoordinatorGroup, r.Group, true
		}
	case *kmsg.JoinGroupRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.HeartbeatRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.LeaveGroupRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.SyncGroupRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.TxnOffsetCommitRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.OffsetDeleteRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.StreamsGroupHeartbeatRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
		return CoordinatorGroup, r.Group, true
	case *kmsg.AlterShareGroupOffsetsRequest:
		return CoordinatorGroup, r.GroupID, true
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return CoordinatorGroup, r.GroupID, true
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return CoordinatorTransaction, *r.TransactionalID, true
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version < 4 {
			return CoordinatorTransaction, r.TransactionalID, true
		}
	case *kmsg.AddOffsetsToTxnRequest:
		return CoordinatorTransaction, r.TransactionalID, true
	case *kmsg.EndTxnRequest:
		return CoordinatorTransaction, r.TransactionalID, true
	}
	return 0, "", false
}

// splitCoordinator splits the requests of the ByCoordinator class that
// Split does not route by a shape of their own.
func splitCoordinator(p *Plan, req kmsg.Request, v View) error {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		p.Write, p.Group = true, r.Group
	case *kmsg.TxnOffsetCommitRequest:
		p.Write, p.Group, p.TransactionalID = true, r.Group, r.TransactionalID
	case *kmsg.EndTxnRequest:
		p.EndTxn, p.TransactionalID = true, r.TransactionalID
	}
	if typ, key, ok := singleKey(req); ok {
		splitSingle(p, req, v, typ, key)
		return nil
	}
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		// No transactional id: any broker hands out an idempotent
		// producer id.
		return splitAny(p, req, v)
	case *kmsg.OffsetFetchRequest:
		splitGroups(p, &offsetFetchGroups, v, r.Version, CoordinatorGroup, r.Groups, func(es []kmsg.OffsetFetchRequestGroup) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.DescribeGroupsRequest:
		splitGroups(p, &describeGroups, v, r.Version, CoordinatorGroup, r.Groups, func(es []string) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.DeleteGroupsRequest:
		splitGroups(p, &deleteGroups, v, r.Version, CoordinatorGroup, r.Groups, func(es []string) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.ConsumerGroupDescribeRequest:
		splitGroups(p, &consumerGroupDescribe, v, r.Version, CoordinatorGroup, r.Groups, func(es []string) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.ShareGroupDescribeRequest:
		splitGroups(p, &shareGroupDescribe, v, r.Version, CoordinatorGroup, r.GroupIDs, func(es []string) kmsg.Request {
			q := *r
			q.GroupIDs = es
			return &q
		})
	case *kmsg.StreamsGroupDescribeRequest:
		splitGroups(p, &streamsGroupDescribe, v, r.Version, CoordinatorGroup, r.Groups, func(es []string) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.DescribeShareGroupOffsetsRequest:
		splitGroups(p, &describeShareGroupOffsets, v, r.Version, CoordinatorGroup, r.Groups, func(es []kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.Request {
			q := *r
			q.Groups = es
			return &q
		})
	case *kmsg.DescribeTransactionsRequest:
		splitGroups(p, &describeTransactions, v, r.Version, CoordinatorTransaction, r.TransactionalIDs, func(es []string) kmsg.Request {
			q := *r
			q.TransactionalIDs = es
			return &q
		})
	case *kmsg.AddPartitionsToTxnRequest:
		splitGroups(p, &addPartitionsTxns, v, r.Version, CoordinatorTransaction, r.Transactions, func(es []kmsg.AddPartitionsToTxnRequestTransaction) kmsg.Request {
			q := *r
			q.Transactions = es
			return &q
		})
	default:
		refuse(p, req)
	}
	return nil
}

// splitSingle sends req whole to the coordinator of key. Its response
// names no broker, so it is the client's as it comes.
func splitSingle(p *Plan, req kmsg.Request, v View, typ int8, key string) {
	node := v.Coordinator(typ, key)
	if node < 0 {
		p.Stale = true
		p.merge = func([]Result, Self) (kmsg.Response, error) {
			return ErrorResponse(req, coordinatorUnknown, ""), nil
		}
		return
	}
	p.addPart(node, req)
	p.merge = func(results []Result, _ Self) (kmsg.Response, error) {
		if results[0].Err != nil {
			return ErrorResponse(req, notCoordinator, ""), nil
		}
		return results[0].Response, nil
	}
}

// batch describes a request that names several keys in one list (E
// entries) and its response (RE entries), so that one split and one
// merge serve every such key.
type batch[E, RE any] struct {
	key      func(*E) string
	rKey     func(*RE) string
	errEntry func(e *E, code int16, msg *string) RE
	// failed answers the entries of a part that failed or left them
	// out; zero means NOT_COORDINATOR.
	failed int16

	// entries reads the entries of a part's response; top, if set, its
	// top-level error, which answers the entries the part left out.
	entries func(kmsg.Response) []RE
	top     func(kmsg.Response) int16
	// respond builds the merged response from its entries.
	respond func(version int16, results []Result, entries []RE) kmsg.Response
}

// byCoordinator routes an entry to the coordinator of its key.
func byCoordinator[E, RE any](b *batch[E, RE], v View, typ int8) func(*E) (int32, answer) {
	return func(e *E) (int32, answer) {
		node := v.Coordinator(typ, b.key(e))
		if node < 0 {
			return -1, answer{code: coordinatorUnknown, stale: true}
		}
		return node, answer{}
	}
}

// splitBatch makes p the plan of a batched request: each entry where
// route places it (a node, or, below zero, the proxy's answer), each part
// built by part from its entries, and a merge that answers every entry in
// the client's order.
func splitBatch[E, RE any](p *Plan, b *batch[E, RE], version int16, entries []E, route func(*E) (int32, answer), part func([]E) kmsg.Request) {
	rt := new(router)
	for k, es := range b.split(rt, entries, route) {
		p.addPart(rt.nodes[k], part(es))
	}
	p.Stale = rt.stale
	p.merge = func(results []Result, _ Self) (kmsg.Response, error) {
		return b.respond(version, results, b.merge(rt, entries, results)), nil
	}
}

// split places every entry where route says and returns the entries of
// each part, in part order.
func (b *batch[E, RE]) split(rt *router, entries []E, route func(*E) (int32, answer)) [][]E {
	var out [][]E
	for i := range entries {
		node, a := route(&entries[i])
		if node < 0 {
			rt.answered(a)
			continue
		}
		k, _, newPart, _ := rt.place(node, i, false)
		if newPart {
			out = append(out, nil)
		}
		out[k] = append(out[k], entries[i])
		rt.at(0, len(out[k])-1)
	}
	return out
}

// merge answers every entry, in the client's order, from the parts'
// responses. An entry a part left out gets that part's top-level error
// (when the response has one and it is set) or the failure code. As
// index does for partitions, a part's answers are taken by position
// while its broker answered in order, by key from the first that is not.
func (b *batch[E, RE]) merge(rt *router, entries []E, results []Result) []RE {
	failed := b.failed
	if failed == 0 {
		failed = notCoordinator
	}
	type taken struct {
		used   []bool
		byKey  map[string][]int
		missed bool
	}
	idx := make([]*taken, len(results))
	out := make([]RE, 0, len(entries))
	for i := range entries {
		sp := rt.spots[i]
		switch {
		case sp.part < 0:
			out = append(out, b.errEntry(&entries[i], sp.code, sp.msg))
			continue
		case results[sp.part].Err != nil:
			out = append(out, b.errEntry(&entries[i], failed, nil))
			continue
		}
		res := b.entries(results[sp.part].Response)
		x := idx[sp.part]
		if x == nil {
			x = &taken{used: make([]bool, len(res))}
			idx[sp.part] = x
		}
		k := b.key(&entries[i])
		at := -1
		if h := int(sp.idx); !x.missed && h < len(res) && b.rKey(&res[h]) == k {
			at = h
		} else {
			x.missed = true
			if x.byKey == nil {
				x.byKey = make(map[string][]int, len(res))
				for j := range res {
					rk := b.rKey(&res[j])
					x.byKey[rk] = append(x.byKey[rk], j)
				}
			}
			for _, j := range x.byKey[k] {
				if !x.used[j] {
					at = j
					break
				}
			}
		}
		if at < 0 {
			code := failed
			if b.top != nil {
				if c := b.top(results[sp.part].Response); c != 0 {
					code = c
				}
			}
			out = append(out, b.errEntry(&entries[i], code, nil))
			continue
		}
		x.used[at] = true
		out = append(out, res[at])
	}
	return out
}

// splitGroups splits a batched request by the coordinators of its keys.
func splitGroups[E, RE any](p *Plan, b *batch[E, RE], v View, version int16, typ int8, entries []E, part func([]E) kmsg.Request) {
	splitBatch(p, b, version, entries, byCoordinator(b, v, typ), part)
}

// keyList is the batch of a request that lists its keys as strings.
func keyList[RE any](rKey func(*RE) string, errEntry func(key string, code int16) RE, entries func(kmsg.Response) []RE, respond func(int16, []Result, []RE) kmsg.Response) batch[string, RE] {
	return batch[string, RE]{
		key:      func(e *string) string { return *e },
		rKey:     rKey,
		errEntry: func(e *string, code int16, _ *string) RE { return errEntry(*e, code) },
		entries:  entries,
		respond:  respond,
	}
}

var offsetFetchGroups = batch[kmsg.OffsetFetchRequestGroup, kmsg.OffsetFetchResponseGroup]{
	key:  func(e *kmsg.OffsetFetchRequestGroup) string { return e.Group },
	rKey: func(e *kmsg.OffsetFetchResponseGroup) string { return e.Group },
	errEntry: func(e *kmsg.OffsetFetchRequestGroup, code int16, _ *string) kmsg.OffsetFetchResponseGroup {
		return offsetFetchGroupError(e.Group, code)
	},
	entries: func(r kmsg.Response) []kmsg.OffsetFetchResponseGroup { return r.(*kmsg.OffsetFetchResponse).Groups },
	respond: func(v int16, results []Result, es []kmsg.OffsetFetchResponseGroup) kmsg.Response {
		out := kmsg.NewPtrOffsetFetchResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	},
}

var describeGroups = keyList(
	func(e *kmsg.DescribeGroupsResponseGroup) string { return e.Group },
	func(g string, code int16) kmsg.DescribeGroupsResponseGroup {
		e := kmsg.NewDescribeGroupsResponseGroup()
		e.Group, e.ErrorCode = g, code
		return e
	},
	func(r kmsg.Response) []kmsg.DescribeGroupsResponseGroup {
		return r.(*kmsg.DescribeGroupsResponse).Groups
	},
	func(v int16, results []Result, es []kmsg.DescribeGroupsResponseGroup) kmsg.Response {
		out := kmsg.NewPtrDescribeGroupsResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	})

var deleteGroups = keyList(
	func(e *kmsg.DeleteGroupsResponseGroup) string { return e.Group },
	func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
		e := kmsg.NewDeleteGroupsResponseGroup()
		e.Group, e.ErrorCode = g, code
		return e
	},
	func(r kmsg.Response) []kmsg.DeleteGroupsResponseGroup { return r.(*kmsg.DeleteGroupsResponse).Groups },
	func(v int16, results []Result, es []kmsg.DeleteGroupsResponseGroup) kmsg.Response {
		out := kmsg.NewPtrDeleteGroupsResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	})

var consumerGroupDescribe = keyList(
	func(e *kmsg.ConsumerGroupDescribeResponseGroup) string { return e.Group },
	func(g string, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
		e := kmsg.NewConsumerGroupDescribeResponseGroup()
		e.Group, e.ErrorCode = g, code
		return e
	},
	func(r kmsg.Response) []kmsg.ConsumerGroupDescribeResponseGroup {
		return r.(*kmsg.ConsumerGroupDescribeResponse).Groups
	},
	func(v int16, results []Result, es []kmsg.ConsumerGroupDescribeResponseGroup) kmsg.Response {
		out := kmsg.NewPtrConsumerGroupDescribeResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	})

var shareGroupDescribe = keyList(
	func(e *kmsg.ShareGroupDescribeResponseGroup) string { return e.GroupID },
	func(g string, code int16) kmsg.ShareGroupDescribeResponseGroup {
		e := kmsg.NewShareGroupDescribeResponseGroup()
		e.GroupID, e.ErrorCode = g, code
		return e
	},
	func(r kmsg.Response) []kmsg.ShareGroupDescribeResponseGroup {
		return r.(*kmsg.ShareGroupDescribeResponse).Groups
	},
	func(v int16, results []Result, es []kmsg.ShareGroupDescribeResponseGroup) kmsg.Response {
		out := kmsg.NewPtrShareGroupDescribeResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	})

var streamsGroupDescribe = keyList(
	func(e *kmsg.StreamsGroupDescribeResponseGroup) string { return e.Group },
	func(g string, code int16) kmsg.StreamsGroupDescribeResponseGroup {
		e := kmsg.NewStreamsGroupDescribeResponseGroup()
		e.Group, e.ErrorCode = g, code
		return e
	},
	func(r kmsg.Response) []kmsg.StreamsGroupDescribeResponseGroup {
		return r.(*kmsg.StreamsGroupDescribeResponse).Groups
	},
	func(v int16, results []Result, es []kmsg.StreamsGroupDescribeResponseGroup) kmsg.Response {
		out := kmsg.NewPtrStreamsGroupDescribeResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	})

var describeShareGroupOffsets = batch[kmsg.DescribeShareGroupOffsetsRequestGroup, kmsg.DescribeShareGroupOffsetsResponseGroup]{
	key:  func(e *kmsg.DescribeShareGroupOffsetsRequestGroup) string { return e.GroupID },
	rKey: func(e *kmsg.DescribeShareGroupOffsetsResponseGroup) string { return e.GroupID },
	errEntry: func(e *kmsg.DescribeShareGroupOffsetsRequestGroup, code int16, msg *string) kmsg.DescribeShareGroupOffsetsResponseGroup {
		return shareOffsetsGroupError(e.GroupID, code, msg)
	},
	entries: func(r kmsg.Response) []kmsg.DescribeShareGroupOffsetsResponseGroup {
		return r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups
	},
	respond: func(v int16, results []Result, es []kmsg.DescribeShareGroupOffsetsResponseGroup) kmsg.Response {
		out := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
		out.Version, out.ThrottleMillis, out.Groups = v, maxThrottle(results), es
		return out
	},
}

var describeTransactions = keyList(
	func(e *kmsg.DescribeTransactionsResponseTransactionState) string { return e.TransactionalID },
	describeTransactionError,
	func(r kmsg.Response) []kmsg.DescribeTransactionsResponseTransactionState {
		return r.(*kmsg.DescribeTransactionsResponse).TransactionStates
	},
	func(v int16, results []Result, es []kmsg.DescribeTransactionsResponseTransactionState) kmsg.Response {
		out := kmsg.NewPtrDescribeTransactionsResponse()
		out.Version, out.ThrottleMillis, out.TransactionStates = v, maxThrottle(results), es
		return out
	})

// addPartitionsTxns is AddPartitionsToTxn v4+ (batched). A part's
// top-level error (the whole part refused) answers its transactions'
// partitions, and the first one any part had is the merged response's.
var addPartitionsTxns = batch[kmsg.AddPartitionsToTxnRequestTransaction, kmsg.AddPartitionsToTxnResponseTransaction]{
	key:  func(e *kmsg.AddPartitionsToTxnRequestTransaction) string { return e.TransactionalID },
	rKey: func(e *kmsg.AddPartitionsToTxnResponseTransaction) string { return e.TransactionalID },
	errEntry: func(e *kmsg.AddPartitionsToTxnRequestTransaction, code int16, _ *string) kmsg.AddPartitionsToTxnResponseTransaction {
		return addPartitionsTxnError(e, code)
	},
	entries: func(r kmsg.Response) []kmsg.AddPartitionsToTxnResponseTransaction {
		return r.(*kmsg.AddPartitionsToTxnResponse).Transactions
	},
	top: func(r kmsg.Response) int16 { return r.(*kmsg.AddPartitionsToTxnResponse).ErrorCode },
	respond: func(v int16, results []Result, es []kmsg.AddPartitionsToTxnResponseTransaction) kmsg.Response {
		out := kmsg.NewPtrAddPartitionsToTxnResponse()
		out.Version, out.ThrottleMillis, out.Transactions = v, maxThrottle(results), es
		for _, res := range results {
			if res.Err == nil && out.ErrorCode == 0 {
				out.ErrorCode = res.Response.(*kmsg.AddPartitionsToTxnResponse).ErrorCode
			}
		}
		return out
	},
}
