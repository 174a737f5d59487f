package splitmerge

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsIntersection: the proxy advertises what every broker
// supports, within what kmsg parses, without the refused keys, and takes
// the finalized features of the broker with the latest epoch. A v5
// request goes to the brokers without the client's cluster and node ids.
func TestApiVersionsIntersection(t *testing.T) {
	brokers := map[int32][]kmsg.ApiVersionsResponseApiKey{
		1: {{ApiKey: 0, MinVersion: 0, MaxVersion: 11}, {ApiKey: 1, MinVersion: 4, MaxVersion: 99}, {ApiKey: 3, MaxVersion: 12}, {ApiKey: 35, MaxVersion: 4}, {ApiKey: 999, MaxVersion: 3}},
		2: {{ApiKey: 0, MinVersion: 3, MaxVersion: 9}, {ApiKey: 1, MinVersion: 0, MaxVersion: 99}, {ApiKey: 3, MaxVersion: 12}, {ApiKey: 35, MaxVersion: 4}, {ApiKey: 999, MaxVersion: 3}},
		3: {{ApiKey: 0, MinVersion: 0, MaxVersion: 13}, {ApiKey: 1, MinVersion: 0, MaxVersion: 99}, {ApiKey: 35, MaxVersion: 4}, {ApiKey: 999, MaxVersion: 3}},
	}
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.ApiVersionsRequest)
		if r.ClusterID != nil || r.NodeID != -1 {
			t.Errorf("broker %d asked with cluster %v node %d", node, r.ClusterID, r.NodeID)
		}
		out := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		out.ApiKeys = brokers[node]
		out.ThrottleMillis = node
		out.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "metadata.version", MinVersion: int16(node), MaxVersion: 20 + int16(node)}}
		out.FinalizedFeaturesEpoch = int64(node % 3)
		out.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "metadata.version", MaxVersionLevel: int16(node), MinVersionLevel: int16(node)}}
		return out
	}
	for _, v := range versions(kmsg.NewPtrApiVersionsRequest()) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClusterID, req.NodeID = v, kmsg.StringPtr("proxy-cluster"), 7
		plan, got := splitAndMerge(t, req, testCluster(), nil, answer)
		if len(plan.Parts) != 3 {
			t.Fatalf("v%d: %d parts", v, len(plan.Parts))
		}
		resp := got.(*kmsg.ApiVersionsResponse)
		var keys []kmsg.ApiVersionsResponseApiKey
		for _, k := range resp.ApiKeys {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.ApiKey, MinVersion: k.MinVersion, MaxVersion: k.MaxVersion})
		}
		// Produce 3-9; Fetch 4 up to what kmsg parses; Metadata is
		// missing on broker 3; DescribeLogDirs is refused; key 999 is
		// not one kmsg parses.
		want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 9}, {ApiKey: 1, MinVersion: 4, MaxVersion: kmsg.NewPtrFetchRequest().MaxVersion()}}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("v%d: keys %+v, want %+v", v, keys, want)
		}
		if v >= 1 && resp.ThrottleMillis != 3 {
			t.Errorf("v%d: throttle %d", v, resp.ThrottleMillis)
		}
		if v >= 3 {
			if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].MinVersion != 3 || resp.SupportedFeatures[0].MaxVersion != 21 {
				t.Errorf("v%d: features %+v", v, resp.SupportedFeatures)
			}
			if resp.FinalizedFeaturesEpoch != 2 || len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].MaxVersionLevel != 2 {
				t.Errorf("v%d: finalized %d %+v", v, resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures)
			}
		}
	}
}

// TestApiVersionsBrokerFails: versions come from the brokers that
// answered; with none, there is no answer.
func TestApiVersionsBrokerFails(t *testing.T) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	plan, err := Split(req, testCluster())
	if err != nil {
		t.Fatal(err)
	}
	results := make([]Result, len(plan.Parts))
	for i := range results {
		results[i].Err = errPartFailed
	}
	if _, err := plan.Merge(results, testSelf); !errors.Is(err, ErrCannotAnswer) {
		t.Fatalf("no broker answered: %v", err)
	}
	ok := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	ok.Version = 3
	ok.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 12, MaxVersion: 4}}
	results[1] = Result{Response: ok}
	m, err := plan.Merge(results, testSelf)
	if err != nil {
		t.Fatal(err)
	}
	if keys := m.(*kmsg.ApiVersionsResponse).ApiKeys; len(keys) != 1 || keys[0].ApiKey != 12 {
		t.Fatalf("keys %+v", keys)
	}
}

// TestListGroupsEvery: every broker is asked, every group listed once;
// a broker that fails makes the answer COORDINATOR_NOT_AVAILABLE
// (retriable) with what the others listed.
func TestListGroupsEvery(t *testing.T) {
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		out := req.ResponseKind().(*kmsg.ListGroupsResponse)
		out.ThrottleMillis = node
		names := map[int32][]string{1: {"a", "b"}, 2: {"c"}, 3: {"b", "d"}}[node]
		for _, n := range names {
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType = n, "consumer"
			out.Groups = append(out.Groups, g)
		}
		return out
	}
	for _, v := range versions(kmsg.NewPtrListGroupsRequest()) {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		_, got := splitAndMerge(t, req, testCluster(), nil, answer)
		resp := got.(*kmsg.ListGroupsResponse)
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group)
		}
		if !reflect.DeepEqual(names, []string{"a", "b", "c", "d"}) || resp.ErrorCode != 0 {
			t.Errorf("v%d: groups %v error %d", v, names, resp.ErrorCode)
		}
		_, got = splitAndMerge(t, req, testCluster(), map[int32]bool{2: true}, answer)
		resp = got.(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code || len(resp.Groups) != 3 {
			t.Errorf("v%d, broker 2 failed: error %d, %d groups", v, resp.ErrorCode, len(resp.Groups))
		}
	}
}

// TestListTransactionsEvery: transactions and unknown state filters are
// the union of the brokers'.
func TestListTransactionsEvery(t *testing.T) {
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		out := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		out.UnknownStateFilters = []string{"Weird"}
		out.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{{TransactionalID: string(rune('a' + node)), ProducerID: int64(node), TransactionState: "Ongoing"}}
		return out
	}
	for _, v := range versions(kmsg.NewPtrListTransactionsRequest()) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = v
		_, got := splitAndMerge(t, req, testCluster(), nil, answer)
		resp := got.(*kmsg.ListTransactionsResponse)
		if len(resp.TransactionStates) != 3 || len(resp.UnknownStateFilters) != 1 {
			t.Errorf("v%d: %+v", v, resp)
		}
	}
}

// TestNoBrokers: a request for any or every broker has nowhere to go
// before the view knows one; requests for leaders and coordinators are
// answered by the proxy.
func TestNoBrokers(t *testing.T) {
	empty := new(Table)
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrListGroupsRequest(), kmsg.NewPtrDescribeConfigsRequest(), kmsg.NewPtrCreateTopicsRequest()} {
		if _, err := Split(req, empty); !errors.Is(err, ErrNoBrokers) {
			t.Errorf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
	}
	req := leaderCases[0].request(9, mixed)
	req.SetVersion(9)
	plan, err := Split(req, empty)
	if err != nil || len(plan.Parts) != 0 {
		t.Fatalf("produce with no view: %v, %d parts", err, len(plan.Parts))
	}
}
