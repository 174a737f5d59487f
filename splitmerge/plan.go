package splitmerge

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Plan is a client request split into the parts that go to brokers and
// what the proxy answers itself. Merge builds the one response the client
// reads from the parts' responses.
type Plan struct {
	// Key and Version are the client's; every part and the merged
	// response have them too.
	Key, Version int16
	// Parts go upstream, each to its Node. A plan with no parts is
	// answered by Merge(nil, self) at once.
	Parts []Part

	// Write: a two-phase write (Produce, OffsetCommit, TxnOffsetCommit):
	// accepted once every part is accepted.
	Write bool
	// NoResponse: the client expects no response (Produce with acks=0).
	// The proxy may still forward the parts with acks=1 to learn when
	// they are accepted, and ends the connection on a failed part, as
	// Kafka does for acks=0.
	NoResponse bool
	// Group is the group an OffsetCommit or TxnOffsetCommit commits to.
	Group string
	// TransactionalID is the transaction a Produce writes to, or an
	// EndTxn ends.
	TransactionalID string
	// EndTxn: the request ends TransactionalID's transaction; it may go
	// only once every earlier Produce part of that transaction has been
	// acknowledged.
	EndTxn bool
	// Stale: the view placed something nowhere (a partition without a
	// leader, a topic it does not know, a coordinator unknown) and the
	// proxy answered it; the view is worth refreshing.
	Stale bool

	merge func(results []Result, self Self) (kmsg.Response, error)
}

// Part is one broker's share of a request.
type Part struct {
	// Node is the broker the part goes to.
	Node int32
	// Any: any broker answers this part as well as Node (the request is
	// not bound to a leader or a coordinator). Node is then the view's
	// first broker, and the proxy may choose another, one it is
	// connected to already or, for a read, the next after a failure.
	Any bool
	// Request has the client's key and version. Its record bytes and
	// other byte fields alias the client's request.
	Request kmsg.Request
}

// Result is what became of one part: its decoded response, or the reason
// it got none. A failed part's entries are answered with the retriable
// error clients handle for that request (NOT_LEADER_OR_FOLLOWER for a
// partition, NOT_COORDINATOR for a group or transaction, ...), so the
// client retries as it would after losing a broker.
type Result struct {
	Response kmsg.Response
	Err      error
}

// Split splits req, a decoded client request, by the cluster as v sees
// it. It copies the request's structure, never record bytes. The error is
// nil except when v knows no broker for a request that needs one
// (ErrNoBrokers); a request the single endpoint cannot serve is a plan
// without parts whose Merge refuses it.
func Split(req kmsg.Request, v View) (*Plan, error) {
	p := &Plan{Key: req.Key(), Version: req.GetVersion()}
	var err error
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		splitProduce(p, r, v)
	case *kmsg.FetchRequest:
		splitFetch(p, r, v)
	case *kmsg.ListOffsetsRequest:
		splitListOffsets(p, r, v)
	case *kmsg.OffsetForLeaderEpochRequest:
		splitOffsetForLeaderEpoch(p, r, v)
	case *kmsg.DeleteRecordsRequest:
		splitDeleteRecords(p, r, v)
	case *kmsg.DescribeProducersRequest:
		splitDescribeProducers(p, r, v)
	case *kmsg.FindCoordinatorRequest:
		p.merge = func(_ []Result, self Self) (kmsg.Response, error) {
			return findCoordinator(r, self), nil
		}
	case *kmsg.ApiVersionsRequest, *kmsg.ListGroupsRequest, *kmsg.ListTransactionsRequest:
		err = splitEvery(p, req, v)
	case *kmsg.DescribeConfigsRequest:
		err = splitDescribeConfigs(p, r, v)
	case *kmsg.AlterConfigsRequest:
		err = splitAlterConfigs(p, r, v)
	case *kmsg.IncrementalAlterConfigsRequest:
		err = splitIncrementalAlterConfigs(p, r, v)
	case *kmsg.CreateTopicsRequest:
		err = splitCreateTopics(p, r, v)
	case *kmsg.CreatePartitionsRequest:
		err = splitCreatePartitions(p, r, v)
	case *kmsg.DescribeClusterRequest:
		err = splitDescribeCluster(p, r, v)
	default:
		switch ClassOf(p.Key) {
		case ByCoordinator:
			err = splitCoordinator(p, req, v)
		case ToAny:
			err = splitAny(p, req, v)
		default:
			refuse(p, req)
		}
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Merge builds the client's response from results, one per part in the
// order of Parts, at the request's version. It takes entries out of the
// parts' responses rather than copying them (record bytes stay where they
// were decoded), and may change those responses: whatever the proxy
// learns from them (leaders in a Metadata response) it reads first.
// Every leader, coordinator and broker the merged response names is self.
func (p *Plan) Merge(results []Result, self Self) (kmsg.Response, error) {
	if len(results) != len(p.Parts) {
		return nil, fmt.Errorf("%w: %d results for %d parts", ErrResults, len(results), len(p.Parts))
	}
	for i, r := range results {
		if r.Err != nil {
			continue
		}
		if r.Response == nil || r.Response.Key() != p.Key || r.Response.GetVersion() != p.Version {
			return nil, fmt.Errorf("%w: part %d answered with %s", ErrResults, i, describe(r.Response))
		}
	}
	return p.merge(results, self)
}

func describe(r kmsg.Response) string {
	if r == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s v%d", kmsg.NameForKey(r.Key()), r.GetVersion())
}

// addPart adds a part for node and returns its index.
func (p *Plan) addPart(node int32, req kmsg.Request) int {
	p.Parts = append(p.Parts, Part{Node: node, Request: req})
	return len(p.Parts) - 1
}

// refuse makes p a plan without parts that answers req with
// UNSUPPORTED_VERSION and the reason.
func refuse(p *Plan, req kmsg.Request) {
	msg := fmt.Sprintf("%s is not served by the single endpoint: %s", kmsg.NameForKey(p.Key), Refusal(p.Key))
	p.merge = func([]Result, Self) (kmsg.Response, error) {
		return ErrorResponse(req, kerr.UnsupportedVersion.Code, msg), nil
	}
}

// maxThrottle is the largest throttle of the parts that answered: the
// client waits as long as the slowest broker asked.
func maxThrottle(results []Result) int32 {
	var t int32
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		if th, ok := r.Response.(kmsg.ThrottleResponse); ok {
			if ms, _ := th.Throttle(); ms > t {
				t = ms
			}
		}
	}
	return t
}
