package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAuthorizedOperations(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "t", Literal, "User:c", Read, Allow),
		b(Topic, "t", Literal, "User:c", AlterConfigs, Allow),
		b(Cluster, ClusterName, Literal, "User:c", All, Allow),
		b(Cluster, ClusterName, Literal, "User:c", Alter, Deny))
	want := int32(1<<Read | 1<<Describe | 1<<AlterConfigs | 1<<DescribeConfigs)
	if got := a.AuthorizedOperations(client("User:c"), Topic, "t"); got != want {
		t.Errorf("topic: %b, want %b", got, want)
	}
	// All on the cluster less the denied Alter; Delete is not among the
	// operations reported for the cluster.
	want = 1<<Create | 1<<ClusterAction | 1<<DescribeConfigs | 1<<AlterConfigs | 1<<IdempotentWrite | 1<<Describe
	if got := a.AuthorizedOperations(client("User:c"), Cluster, ClusterName); got != want {
		t.Errorf("cluster: %b, want %b", got, want)
	}
	var none *Authorizer
	if got := none.AuthorizedOperations(client("User:c"), TransactionalID, "x"); got != 1<<Describe|1<<Write|1<<TwoPhaseCommit {
		t.Errorf("no authorizer: %b", got)
	}
}

func TestFilters(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "pub-", Prefixed, "User:c", Describe, Allow),
		b(Group, "mine", Literal, "User:c", Read, Allow),
		b(TransactionalID, "tx", Literal, "User:c", Describe, Allow),
		b(Cluster, ClusterName, Literal, "User:admin", Describe, Allow))
	m := kmsg.NewPtrMetadataResponse()
	for _, n := range []string{"pub-a", "secret", "pub-b"} {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(n)
		m.Topics = append(m.Topics, mt)
	}
	a.FilterMetadata(client("User:c"), m)
	if len(m.Topics) != 2 || *m.Topics[0].Topic != "pub-a" || *m.Topics[1].Topic != "pub-b" {
		t.Errorf("metadata: %+v", m.Topics)
	}

	lg := func() *kmsg.ListGroupsResponse {
		r := kmsg.NewPtrListGroupsResponse()
		for _, g := range []string{"mine", "theirs"} {
			x := kmsg.NewListGroupsResponseGroup()
			x.Group = g
			r.Groups = append(r.Groups, x)
		}
		return r
	}
	r := lg()
	a.FilterListGroups(client("User:c"), r)
	if len(r.Groups) != 1 || r.Groups[0].Group != "mine" {
		t.Errorf("list groups: %+v", r.Groups)
	}
	r = lg()
	a.FilterListGroups(client("User:admin"), r)
	if len(r.Groups) != 2 {
		t.Errorf("list groups with Describe on the cluster: %+v", r.Groups)
	}

	lt := kmsg.NewPtrListTransactionsResponse()
	for _, id := range []string{"tx", "other"} {
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID = id
		lt.TransactionStates = append(lt.TransactionStates, s)
	}
	a.FilterListTransactions(client("User:c"), lt)
	if len(lt.TransactionStates) != 1 || lt.TransactionStates[0].TransactionalID != "tx" {
		t.Errorf("list transactions: %+v", lt.TransactionStates)
	}

	dt := kmsg.NewPtrDescribeTransactionsResponse()
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	for _, n := range []string{"secret", "pub-x"} {
		x := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		x.Topic = n
		s.Topics = append(s.Topics, x)
	}
	dt.TransactionStates = append(dt.TransactionStates, s)
	a.FilterDescribeTransactions(client("User:c"), dt)
	if ts := dt.TransactionStates[0].Topics; len(ts) != 1 || ts[0].Topic != "pub-x" {
		t.Errorf("describe transactions: %+v", ts)
	}
}

func TestCreateTopicsAnswer(t *testing.T) {
	a := authz(t, Options{},
		b(Topic, "team-", Prefixed, "User:c", Create, Allow),
		b(Topic, "team-a", Literal, "User:c", DescribeConfigs, Allow),
		b(Cluster, ClusterName, Literal, "User:admin", Create, Allow))
	if !a.MayCreateTopic(client("User:c"), "team-x") || a.MayCreateTopic(client("User:c"), "x") || !a.MayCreateTopic(client("User:admin"), "x") {
		t.Error("MayCreateTopic")
	}
	r := kmsg.NewPtrCreateTopicsResponse()
	for _, n := range []string{"team-a", "team-b"} {
		x := kmsg.NewCreateTopicsResponseTopic()
		x.Topic, x.NumPartitions, x.ReplicationFactor = n, 3, 1
		x.Configs = []kmsg.CreateTopicsResponseTopicConfig{{Name: "retention.ms"}}
		r.Topics = append(r.Topics, x)
	}
	a.FilterCreateTopics(client("User:c"), r)
	if x := r.Topics[0]; x.ConfigErrorCode != 0 || x.NumPartitions != 3 || len(x.Configs) != 1 {
		t.Errorf("describable: %+v", x)
	}
	if x := r.Topics[1]; x.ConfigErrorCode != TopicAuthorizationFailed || x.NumPartitions != -1 || x.ReplicationFactor != -1 || x.Configs != nil {
		t.Errorf("not describable: %+v", x)
	}
}

func TestFilterOffsetFetch(t *testing.T) {
	a := authz(t, Options{},
		b(Group, "app", Literal, "User:c", Describe, Allow),
		b(Topic, "pub-", Prefixed, "User:c", Describe, Allow))
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "app"
	req.Groups = append(req.Groups, g)
	if v := a.Check(client("User:c"), req); len(v.Listed) != 1 || v.Listed[0].Resource != Topic || v.Code != 0 || len(v.Denied) != 0 {
		t.Fatalf("all topics of a group: %+v", v)
	}
	resp := kmsg.NewPtrOffsetFetchResponse()
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = "app"
	for _, n := range []string{"pub-a", "secret", ""} {
		x := kmsg.NewOffsetFetchResponseGroupTopic()
		x.Topic = n
		if n == "" {
			x.TopicID = [16]byte{9}
		}
		rg.Topics = append(rg.Topics, x)
	}
	resp.Groups = append(resp.Groups, rg)
	c := client("User:c")
	c.TopicName = func(id [16]byte) (string, bool) { return "pub-by-id", id == [16]byte{9} }
	a.FilterOffsetFetch(c, resp)
	if ts := resp.Groups[0].Topics; len(ts) != 2 || ts[0].Topic != "pub-a" || ts[1].TopicID != [16]byte{9} {
		t.Errorf("%+v", ts)
	}
}
