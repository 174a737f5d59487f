package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/splitmerge"
)

// Fix completes the answer to a request forwarded with entries left out,
// or whose answer lists what the client may not see.
type Fix struct {
	g *Guard
	a *acl.Authorizer // the rules the request was decided by
	c acl.Client

	parts    []part // the denied entries, as requests of their own by code
	listed   bool   // the answer's entries are filtered (Verdict.Listed)
	reencode bool   // the request was changed beyond its denied entries
	// noCreate are the topics a Metadata asked to create on first use
	// that the client may not create.
	noCreate map[string]bool
}

// part is a request holding only entries denied with one code.
type part struct {
	code int16
	req  kmsg.Request
	// inGroup: the entries are topics of an OffsetFetch group that is
	// forwarded, refused per partition inside the group's answer.
	inGroup bool
}

// fixFor is the Fix a request's answer needs when nothing of it is denied
// outright; nil when the answer goes to the client as the upstream gave it.
func (g *Guard) fixFor(a *acl.Authorizer, c acl.Client, req kmsg.Request, v acl.Verdict) *Fix {
	f := &Fix{g: g, a: a, c: c, listed: len(v.Listed) > 0}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		// Every Metadata answer teaches the topic ids Fetch and Produce
		// name topics by.
		return f
	case *kmsg.ListGroupsRequest, *kmsg.DescribeTransactionsRequest, *kmsg.ListTransactionsRequest:
		return f
	case *kmsg.OffsetFetchRequest:
		if f.listed {
			return f
		}
	case *kmsg.CreateTopicsRequest:
		return f
	case *kmsg.DescribeClusterRequest:
		if r.IncludeClusterAuthorizedOperations {
			return f
		}
	case *kmsg.DescribeGroupsRequest:
		if r.IncludeAuthorizedOperations {
			return f
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		if r.IncludeAuthorizedOperations {
			return f
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		// Its answer always carries each topic's authorized operations.
		return f
	}
	if f.listed {
		return f
	}
	return nil
}

// autoCreate keeps a Metadata from creating topics the client may not
// create: the upstream is asked without auto-creation when any named topic
// may not be created, and such a topic the upstream does not hold is
// answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers it when it creates
// topics on first use (auto.create.topics.enable, its default). The
// others named in the same request are then not created either: one flag
// asks for them all.
func (g *Guard) autoCreate(a *acl.Authorizer, c acl.Client, r *kmsg.MetadataRequest, f *Fix) {
	if !r.AllowAutoTopicCreation || r.Version < 4 {
		return
	}
	for _, t := range r.Topics {
		if t.Topic != nil && !a.MayCreateTopic(c, *t.Topic) {
			if f.noCreate == nil {
				f.noCreate = map[string]bool{}
			}
			f.noCreate[*t.Topic] = true
		}
	}
	if f.noCreate != nil {
		r.AllowAutoTopicCreation = false
		f.reencode = true
	}
}

// Apply completes resp, the decoded answer to the forwarded request.
func (f *Fix) Apply(resp kmsg.Response) {
	a, c := f.a, f.c
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		f.g.learn(r)
		if f.listed {
			a.FilterMetadata(c, r)
		}
		if r.AuthorizedOperations != notAsked {
			r.AuthorizedOperations = clusterOperations(a, c)
		}
		for i := range r.Topics {
			t := &r.Topics[i]
			if t.Topic != nil && f.noCreate[*t.Topic] && t.ErrorCode == unknownTopicOrPartition {
				t.ErrorCode = acl.TopicAuthorizationFailed
			}
			if t.Topic != nil && t.AuthorizedOperations != notAsked {
				t.AuthorizedOperations = a.AuthorizedOperations(c, acl.Topic, *t.Topic)
			}
		}
	case *kmsg.DescribeClusterResponse:
		if r.ClusterAuthorizedOperations != notAsked {
			r.ClusterAuthorizedOperations = clusterOperations(a, c)
		}
	case *kmsg.DescribeGroupsResponse:
		for i := range r.Groups {
			g := &r.Groups[i]
			if g.AuthorizedOperations != notAsked {
				g.AuthorizedOperations = a.AuthorizedOperations(c, acl.Group, g.Group)
			}
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			if t.Topic != nil && t.AuthorizedOperations != notAsked {
				t.AuthorizedOperations = a.AuthorizedOperations(c, acl.Topic, *t.Topic)
			}
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for i := range r.Groups {
			g := &r.Groups[i]
			if g.AuthorizedOperations != notAsked {
				g.AuthorizedOperations = a.AuthorizedOperations(c, acl.Group, g.Group)
			}
		}
	case *kmsg.ListGroupsResponse:
		a.FilterListGroups(c, r)
	case *kmsg.ListTransactionsResponse:
		a.FilterListTransactions(c, r)
	case *kmsg.DescribeTransactionsResponse:
		a.FilterDescribeTransactions(c, r)
	case *kmsg.OffsetFetchResponse:
		if f.listed {
			a.FilterOffsetFetch(c, r)
		}
	case *kmsg.CreateTopicsResponse:
		a.FilterCreateTopics(c, r)
	}
	for _, p := range f.parts {
		merge(resp, partError(p))
	}
}

// stripOffsetFetch leaves the denied groups out of an OffsetFetch, and
// the denied topics out of the groups it keeps: Kafka answers a topic the
// client may not Describe inside an allowed group per partition,
// TOPIC_AUTHORIZATION_FAILED, and the group's other topics as usual. A
// group left with none of the topics it named is still forwarded, with an
// empty list (null would ask for all of them), for its own answer.
func stripOffsetFetch(r *kmsg.OffsetFetchRequest, v acl.Verdict) (bool, []part, bool) {
	var parts []part
	if r.Version < 8 {
		if !only(v, acl.Topic) {
			return false, nil, false
		}
		var by map[int16][]kmsg.OffsetFetchRequestTopic
		r.Topics, by = separate(r.Topics, v, acl.Topic, func(t *kmsg.OffsetFetchRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		if r.Topics == nil {
			r.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		for code, ts := range by {
			p := *r
			p.Topics = ts
			parts = append(parts, part{code: code, req: &p, inGroup: true})
		}
		return true, parts, true
	}
	var by map[int16][]kmsg.OffsetFetchRequestGroup
	r.Groups, by = separate(r.Groups, v, acl.Group, func(g *kmsg.OffsetFetchRequestGroup) (string, [16]byte) { return g.Group, [16]byte{} })
	for code, gs := range by {
		p := *r
		p.Groups = gs
		parts = append(parts, part{code: code, req: &p})
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.Topics == nil {
			continue
		}
		kept, tby := separate(g.Topics, v, acl.Topic, func(t *kmsg.OffsetFetchRequestGroupTopic) (string, [16]byte) { return t.Topic, t.TopicID })
		if tby == nil {
			continue
		}
		if kept == nil {
			kept = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for code, ts := range tby {
			p, pg := *r, *g
			pg.Topics = ts
			p.Groups = []kmsg.OffsetFetchRequestGroup{pg}
			parts = append(parts, part{code: code, req: &p, inGroup: true})
		}
		g.Topics = kept
	}
	return len(r.Groups) > 0, parts, true
}

// partError is the answer to a part's denied entries.
func partError(p part) kmsg.Response {
	if f, ok := p.req.(*kmsg.OffsetFetchRequest); ok && p.inGroup && f.Version >= 8 {
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.Version = f.Version
		for _, g := range f.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			for _, t := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = pt, -1, p.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	r, ok := p.req.(*kmsg.OffsetDeleteRequest)
	if !ok {
		return splitmerge.ErrorResponse(p.req, p.code, "")
	}
	// Kafka refuses a denied topic of an allowed group per partition;
	// splitmerge's OffsetDelete answer refuses the whole group.
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = r.Version
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, p.code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// merge appends the entries of e, an error answer to denied entries, to
// resp.
func merge(resp, e kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		r.Topics = append(r.Topics, e.(*kmsg.ProduceResponse).Topics...)
	case *kmsg.FetchResponse:
		r.Topics = append(r.Topics, e.(*kmsg.FetchResponse).Topics...)
	case *kmsg.ListOffsetsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.ListOffsetsResponse).Topics...)
	case *kmsg.MetadataResponse:
		r.Topics = append(r.Topics, e.(*kmsg.MetadataResponse).Topics...)
	case *kmsg.OffsetCommitResponse:
		r.Topics = append(r.Topics, e.(*kmsg.OffsetCommitResponse).Topics...)
	case *kmsg.TxnOffsetCommitResponse:
		r.Topics = append(r.Topics, e.(*kmsg.TxnOffsetCommitResponse).Topics...)
	case *kmsg.DeleteRecordsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.DeleteRecordsResponse).Topics...)
	case *kmsg.CreatePartitionsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.CreatePartitionsResponse).Topics...)
	case *kmsg.OffsetForLeaderEpochResponse:
		r.Topics = append(r.Topics, e.(*kmsg.OffsetForLeaderEpochResponse).Topics...)
	case *kmsg.DeleteTopicsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.DeleteTopicsResponse).Topics...)
	case *kmsg.CreateTopicsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.CreateTopicsResponse).Topics...)
	case *kmsg.DescribeGroupsResponse:
		r.Groups = append(r.Groups, e.(*kmsg.DescribeGroupsResponse).Groups...)
	case *kmsg.DeleteGroupsResponse:
		r.Groups = append(r.Groups, e.(*kmsg.DeleteGroupsResponse).Groups...)
	case *kmsg.FindCoordinatorResponse:
		r.Coordinators = append(r.Coordinators, e.(*kmsg.FindCoordinatorResponse).Coordinators...)
	case *kmsg.OffsetFetchResponse:
		eo := e.(*kmsg.OffsetFetchResponse)
		r.Topics = append(r.Topics, eo.Topics...)
	groups:
		for _, eg := range eo.Groups {
			if len(eg.Topics) > 0 {
				// A group's denied topics go into its own answer.
				for i := range r.Groups {
					if r.Groups[i].Group == eg.Group {
						r.Groups[i].Topics = append(r.Groups[i].Topics, eg.Topics...)
						continue groups
					}
				}
			}
			r.Groups = append(r.Groups, eg)
		}
	case *kmsg.DescribeTransactionsResponse:
		r.TransactionStates = append(r.TransactionStates, e.(*kmsg.DescribeTransactionsResponse).TransactionStates...)
	case *kmsg.DescribeConfigsResponse:
		r.Resources = append(r.Resources, e.(*kmsg.DescribeConfigsResponse).Resources...)
	case *kmsg.AlterConfigsResponse:
		r.Resources = append(r.Resources, e.(*kmsg.AlterConfigsResponse).Resources...)
	case *kmsg.IncrementalAlterConfigsResponse:
		r.Resources = append(r.Resources, e.(*kmsg.IncrementalAlterConfigsResponse).Resources...)
	case *kmsg.AddPartitionsToTxnResponse:
		r.Topics = append(r.Topics, e.(*kmsg.AddPartitionsToTxnResponse).Topics...)
	case *kmsg.OffsetDeleteResponse:
		r.Topics = append(r.Topics, e.(*kmsg.OffsetDeleteResponse).Topics...)
	case *kmsg.DescribeProducersResponse:
		r.Topics = append(r.Topics, e.(*kmsg.DescribeProducersResponse).Topics...)
	case *kmsg.DescribeTopicPartitionsResponse:
		r.Topics = append(r.Topics, e.(*kmsg.DescribeTopicPartitionsResponse).Topics...)
	}
}

// strip leaves the denied topics out of req. kept: any entry is left to
// forward; parts: the denied entries by code; ok false: req is of a kind
// whose entries are not separated here.
func strip(req kmsg.Request, v acl.Verdict) (kept bool, parts []part, ok bool) {
	switch r := req.(type) {
	case *kmsg.DescribeGroupsRequest:
		return stripNames(r, &r.Groups, v, acl.Group)
	case *kmsg.DeleteGroupsRequest:
		return stripNames(r, &r.Groups, v, acl.Group)
	case *kmsg.FindCoordinatorRequest:
		if r.Version < 4 {
			return false, nil, false
		}
		rt := acl.Group
		if r.CoordinatorType == 1 {
			rt = acl.TransactionalID
		}
		return stripNames(r, &r.CoordinatorKeys, v, rt)
	case *kmsg.OffsetFetchRequest:
		return stripOffsetFetch(r, v)
	case *kmsg.DescribeTransactionsRequest:
		return stripNames(r, &r.TransactionalIDs, v, acl.TransactionalID)
	case *kmsg.DescribeConfigsRequest:
		kept, by := separateBy(r.Resources, func(res *kmsg.DescribeConfigsRequestResource) (int16, bool) {
			return configDenial(v, int8(res.ResourceType), res.ResourceName)
		})
		parts = splitOff(r, &r.Resources, kept, by)
		return len(r.Resources) > 0, parts, true
	case *kmsg.AlterConfigsRequest:
		kept, by := separateBy(r.Resources, func(res *kmsg.AlterConfigsRequestResource) (int16, bool) {
			return configDenial(v, int8(res.ResourceType), res.ResourceName)
		})
		parts = splitOff(r, &r.Resources, kept, by)
		return len(r.Resources) > 0, parts, true
	case *kmsg.IncrementalAlterConfigsRequest:
		kept, by := separateBy(r.Resources, func(res *kmsg.IncrementalAlterConfigsRequestResource) (int16, bool) {
			return configDenial(v, int8(res.ResourceType), res.ResourceName)
		})
		parts = splitOff(r, &r.Resources, kept, by)
		return len(r.Resources) > 0, parts, true
	}
	if !only(v, acl.Topic) {
		return false, nil, false
	}
	switch r := req.(type) {
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			return false, nil, false
		}
		// Kafka adds none of a transaction's partitions when any is
		// denied: the allowed ones are answered OPERATION_NOT_ATTEMPTED
		// and nothing is forwarded.
		var by map[int16][]kmsg.AddPartitionsToTxnRequestTopic
		r.Topics, by = separate(r.Topics, v, acl.Topic, func(t *kmsg.AddPartitionsToTxnRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		if len(r.Topics) > 0 {
			if by == nil {
				by = map[int16][]kmsg.AddPartitionsToTxnRequestTopic{}
			}
			by[operationNotAttempted] = r.Topics
		}
		for code, ts := range by {
			p := *r
			p.Topics = ts
			parts = append(parts, part{code: code, req: &p})
		}
		return false, parts, true
	case *kmsg.OffsetDeleteRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.OffsetDeleteRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.DescribeProducersRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.DescribeProducersRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.DescribeTopicPartitionsRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.DescribeTopicPartitionsRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.ProduceRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.ProduceRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
		return len(r.Topics) > 0, parts, true
	case *kmsg.FetchRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.FetchRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
		// A fetch session's request is forwarded even when it is left
		// with no topic: the upstream's session moves on with it.
		return len(r.Topics) > 0 || len(r.ForgottenTopics) > 0 || r.SessionID != 0, parts, true
	case *kmsg.ListOffsetsRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.ListOffsetsRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.MetadataRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.MetadataRequestTopic) (string, [16]byte) {
			if t.Topic == nil {
				return "", t.TopicID
			}
			return *t.Topic, t.TopicID
		})
		if len(r.Topics) == 0 && r.Version >= 1 {
			// Asked for no topic (an empty list, not null, which asks
			// for all), the upstream still answers the brokers and the
			// cluster that every Metadata answer carries.
			r.Topics = []kmsg.MetadataRequestTopic{}
		}
		return len(r.Topics) > 0 || r.Topics != nil && r.Version >= 1, parts, true
	case *kmsg.OffsetCommitRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.OffsetCommitRequestTopic) (string, [16]byte) { return t.Topic, t.TopicID })
		return len(r.Topics) > 0, parts, true
	case *kmsg.TxnOffsetCommitRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.TxnOffsetCommitRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.DeleteRecordsRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.DeleteRecordsRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.CreateTopicsRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.CreateTopicsRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	case *kmsg.DeleteTopicsRequest:
		if r.Version < 6 {
			parts = stripTopics(r, &r.TopicNames, v, func(t *string) (string, [16]byte) { return *t, [16]byte{} })
			return len(r.TopicNames) > 0, parts, true
		}
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.DeleteTopicsRequestTopic) (string, [16]byte) {
			if t.Topic == nil {
				return "", t.TopicID
			}
			return *t.Topic, t.TopicID
		})
		return len(r.Topics) > 0, parts, true
	case *kmsg.CreatePartitionsRequest:
		parts = stripTopics(r, &r.Topics, v, func(t *kmsg.CreatePartitionsRequestTopic) (string, [16]byte) { return t.Topic, [16]byte{} })
		return len(r.Topics) > 0, parts, true
	}
	return false, nil, false
}

// separate splits entries into those left to forward and those denied, by
// code, each in the request's order.
func separate[T any](entries []T, v acl.Verdict, rt acl.ResourceType, name func(*T) (string, [16]byte)) ([]T, map[int16][]T) {
	var kept []T
	var by map[int16][]T
	for i := range entries {
		n, id := name(&entries[i])
		code, denied := denialOf(v, rt, n, id)
		if !denied {
			kept = append(kept, entries[i])
			continue
		}
		if by == nil {
			by = map[int16][]T{}
		}
		by[code] = append(by[code], entries[i])
	}
	return kept, by
}

// separateBy is separate for entries whose denial is found by denial.
func separateBy[T any](entries []T, denial func(*T) (int16, bool)) ([]T, map[int16][]T) {
	var kept []T
	var by map[int16][]T
	for i := range entries {
		code, denied := denial(&entries[i])
		if !denied {
			kept = append(kept, entries[i])
			continue
		}
		if by == nil {
			by = map[int16][]T{}
		}
		by[code] = append(by[code], entries[i])
	}
	return kept, by
}

// Config resource types (DescribeConfigs, IncrementalAlterConfigs).
const (
	configTopic         int8 = 2
	configBroker        int8 = 4
	configBrokerLogger  int8 = 8
	configClientMetrics int8 = 16
	configGroup         int8 = 32
)

// configDenial finds the denial of a config resource, as acl's Check
// records it: a topic or group by name, a broker, broker logger or
// client-metrics resource as the cluster's under its own name.
func configDenial(v acl.Verdict, typ int8, name string) (int16, bool) {
	switch typ {
	case configTopic:
		return denialOf(v, acl.Topic, name, [16]byte{})
	case configGroup:
		return denialOf(v, acl.Group, name, [16]byte{})
	case configBroker, configBrokerLogger, configClientMetrics:
		return denialOf(v, acl.Cluster, name, [16]byte{})
	}
	return 0, false
}

// operationNotAttempted is Kafka's OPERATION_NOT_ATTEMPTED.
const operationNotAttempted int16 = 55

// denialOf finds the denial of the resource of type rt named name, or,
// when a request names a topic by id alone, of id.
func denialOf(v acl.Verdict, rt acl.ResourceType, name string, id [16]byte) (int16, bool) {
	for _, d := range v.Denied {
		if d.Resource != rt {
			continue
		}
		if name != "" && d.Name == name || name == "" && d.TopicID == id {
			return d.Code, true
		}
	}
	return 0, false
}

// notAsked is the authorized operations field of an answer that was not
// asked for them (Kafka's Int32.MinValue). When asked, the upstream fills
// them for the proxy's own principal; the client is answered its own.
const notAsked = -2147483648

// clusterOperations is the cluster's authorized operations for c: none
// without Describe on the cluster, IdempotentWrite included, as Kafka
// answers them.
func clusterOperations(a *acl.Authorizer, c acl.Client) int32 {
	if !a.Authorize(c.Principal, c.Host, acl.Describe, acl.Cluster, acl.ClusterName) {
		return 0
	}
	return a.AuthorizedOperations(c, acl.Cluster, acl.ClusterName)
}

// unknownTopicOrPartition is Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const unknownTopicOrPartition int16 = 3

// errorResponse answers every entry of req with code.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	return splitmerge.ErrorResponse(req, code, "")
}

// only reports whether every denial of v is of a resource of type rt.
func only(v acl.Verdict, rt acl.ResourceType) bool {
	for _, d := range v.Denied {
		if d.Resource != rt {
			return false
		}
	}
	return true
}

// stripNames leaves the denied names of type rt out of *names, a field of
// req, which must be a pointer to a request struct: the denied names
// become requests of their own, copies of req holding only them.
func stripNames[R any](req *R, names *[]string, v acl.Verdict, rt acl.ResourceType) (bool, []part, bool) {
	if !only(v, rt) {
		return false, nil, false
	}
	kept, by := separate(*names, v, rt, func(n *string) (string, [16]byte) { return *n, [16]byte{} })
	return len(kept) > 0, splitOff(req, names, kept, by), true
}

// stripTopics leaves the denied topics out of *topics, a field of req,
// which must be a pointer to a request struct, and returns the requests
// holding the denied ones, one for each code.
func stripTopics[R, T any](req *R, topics *[]T, v acl.Verdict, name func(*T) (string, [16]byte)) []part {
	kept, by := separate(*topics, v, acl.Topic, name)
	return splitOff(req, topics, kept, by)
}

// splitOff sets *entries, a field of req, to kept and returns, for each
// code of by, a copy of req whose field holds only that code's entries.
func splitOff[R, T any](req *R, entries *[]T, kept []T, by map[int16][]T) []part {
	var parts []part
	for code, es := range by {
		*entries = es
		p := *req
		parts = append(parts, part{code: code, req: any(&p).(kmsg.Request)})
	}
	*entries = kept
	return parts
}
