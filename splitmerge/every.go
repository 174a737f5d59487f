package splitmerge

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/rewrite"
)

// splitEvery sends req to every broker: ApiVersions, ListGroups and
// ListTransactions, whose answers are the union (the lists) or the
// intersection (the versions) of what each broker says.
func splitEvery(p *Plan, req kmsg.Request, v View) error {
	brokers := v.Brokers()
	if len(brokers) == 0 {
		return ErrNoBrokers
	}
	part := req
	if r, ok := req.(*kmsg.ApiVersionsRequest); ok && r.Version >= 5 && (r.ClusterID != nil || r.NodeID != -1) {
		// The client's cluster and node ids are the proxy's, which
		// no broker is: a mismatch would be REBOOTSTRAP_REQUIRED.
		// Both are cleared, since clearing one alone is
		// INVALID_REQUEST.
		q := *r
		q.ClusterID, q.NodeID = nil, -1
		part = &q
	}
	for _, b := range brokers {
		p.addPart(b, part)
	}
	p.merge = func(results []Result, _ Self) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			return mergeApiVersions(r, results)
		case *kmsg.ListGroupsRequest:
			return mergeListGroups(r, results), nil
		case *kmsg.ListTransactionsRequest:
			return mergeListTransactions(r, results), nil
		}
		panic("splitmerge: splitEvery of " + kmsg.NameForKey(req.Key()))
	}
	return nil
}

// mergeApiVersions advertises what every broker that answered supports:
// a key all of them have, from the highest of their minimum versions to
// the lowest of their maximum, clamped to what kmsg parses and stripped
// of the refused keys. A broker that failed is left out; when none
// answered, there is nothing to advertise. A broker's error (it does not
// support this ApiVersions version) is the answer, with its own list.
func mergeApiVersions(r *kmsg.ApiVersionsRequest, results []Result) (kmsg.Response, error) {
	var answered []*kmsg.ApiVersionsResponse
	for _, res := range results {
		if res.Err == nil {
			answered = append(answered, res.Response.(*kmsg.ApiVersionsResponse))
		}
	}
	if len(answered) == 0 {
		return nil, ErrCannotAnswer
	}
	out := kmsg.NewPtrApiVersionsResponse()
	out.Version = r.Version
	out.ThrottleMillis = maxThrottle(results)
	for _, a := range answered {
		if a.ErrorCode != 0 {
			out.ErrorCode = a.ErrorCode
			out.ApiKeys = append(out.ApiKeys, a.ApiKeys...)
			rewrite.ClampVersions(out, nil)
			return out, nil
		}
	}
	first := answered[0]
	out.ApiKeys = intersect(answered, func(a *kmsg.ApiVersionsResponse) []kmsg.ApiVersionsResponseApiKey { return a.ApiKeys },
		func(k *kmsg.ApiVersionsResponseApiKey) (int16, *int16, *int16) {
			return k.ApiKey, &k.MinVersion, &k.MaxVersion
		})
	rewrite.ClampVersions(out, Advertised)
	out.SupportedFeatures = intersect(answered, func(a *kmsg.ApiVersionsResponse) []kmsg.ApiVersionsResponseSupportedFeature {
		return a.SupportedFeatures
	}, func(f *kmsg.ApiVersionsResponseSupportedFeature) (string, *int16, *int16) {
		return f.Name, &f.MinVersion, &f.MaxVersion
	})
	// Finalized features are the cluster's; the broker that has seen
	// the latest epoch speaks for it.
	latest := first
	for _, a := range answered[1:] {
		if a.FinalizedFeaturesEpoch > latest.FinalizedFeaturesEpoch {
			latest = a
		}
	}
	out.FinalizedFeaturesEpoch = latest.FinalizedFeaturesEpoch
	out.FinalizedFeatures = latest.FinalizedFeatures
	out.ZkMigrationReady = false
	return out, nil
}

// intersect keeps the entries (API keys, features) of the first answer
// that every answer has, each from the highest of their minimum versions
// to the lowest of their maximum, and drops those left with no version.
func intersect[E any, K comparable](answers []*kmsg.ApiVersionsResponse, list func(*kmsg.ApiVersionsResponse) []E, ranged func(*E) (K, *int16, *int16)) []E {
	var out []E
	for _, e := range list(answers[0]) {
		name, lo, hi := ranged(&e)
		in := true
		for _, a := range answers[1:] {
			found := false
			for _, o := range list(a) {
				if oName, oLo, oHi := ranged(&o); oName == name {
					*lo, *hi = max(*lo, *oLo), min(*hi, *oHi)
					found = true
					break
				}
			}
			if !found {
				in = false
				break
			}
		}
		if in && *lo <= *hi {
			out = append(out, e)
		}
	}
	return out
}

// everyError is the merged error of a listing: the first a broker
// answered, or COORDINATOR_NOT_AVAILABLE, retriable, when a broker failed
// and its groups or transactions are missing from the list.
func everyError(results []Result, code func(kmsg.Response) int16) int16 {
	var e int16
	for _, res := range results {
		if res.Err != nil {
			return kerr.CoordinatorNotAvailable.Code
		}
		if c := code(res.Response); c != 0 && e == 0 {
			e = c
		}
	}
	return e
}

// union lists the entries of every answered part, each key once (the
// first seen), in broker order.
func union[E any](results []Result, list func(kmsg.Response) []E, key func(*E) string) []E {
	var out []E
	seen := make(map[string]bool)
	for _, res := range results {
		if res.Err != nil {
			continue
		}
		for _, e := range list(res.Response) {
			if k := key(&e); !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// mergeListGroups lists every group the brokers list, each once (a group
// that moved between coordinators while they were asked is listed where
// it was seen first), in broker order.
func mergeListGroups(r *kmsg.ListGroupsRequest, results []Result) kmsg.Response {
	out := kmsg.NewPtrListGroupsResponse()
	out.Version = r.Version
	out.ThrottleMillis = maxThrottle(results)
	out.ErrorCode = everyError(results, func(x kmsg.Response) int16 { return x.(*kmsg.ListGroupsResponse).ErrorCode })
	out.Groups = union(results, func(x kmsg.Response) []kmsg.ListGroupsResponseGroup { return x.(*kmsg.ListGroupsResponse).Groups },
		func(g *kmsg.ListGroupsResponseGroup) string { return g.Group })
	return out
}

// mergeListTransactions lists every transaction once, and every state
// filter some broker did not know.
func mergeListTransactions(r *kmsg.ListTransactionsRequest, results []Result) kmsg.Response {
	out := kmsg.NewPtrListTransactionsResponse()
	out.Version = r.Version
	out.ThrottleMillis = maxThrottle(results)
	out.ErrorCode = everyError(results, func(x kmsg.Response) int16 { return x.(*kmsg.ListTransactionsResponse).ErrorCode })
	out.UnknownStateFilters = union(results, func(x kmsg.Response) []string { return x.(*kmsg.ListTransactionsResponse).UnknownStateFilters },
		func(s *string) string { return *s })
	out.TransactionStates = union(results, func(x kmsg.Response) []kmsg.ListTransactionsResponseTransactionState {
		return x.(*kmsg.ListTransactionsResponse).TransactionStates
	}, func(t *kmsg.ListTransactionsResponseTransactionState) string { return t.TransactionalID })
	return out
}
