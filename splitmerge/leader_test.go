package splitmerge

import (
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderCase is one key split by leader: how a client asks for some
// partitions, how a broker answers one of them, and the entry of the
// response a single broker leading everything would give.
type leaderCase struct {
	key     int16
	request func(v int16, tps []tp) kmsg.Request
	// answer builds a broker's response to its part, its entries in
	// reverse order (a broker may answer in any order).
	answer func(node int32, req kmsg.Request) kmsg.Response
	// want is what the client reads for the client's partitions: the
	// broker's entry where a leader is known, Kafka's error elsewhere.
	want func(v int16, tps []tp, cluster View) kmsg.Response
}

// leaderOf is the leader of x as a request at version byID names it.
func leaderOf(cluster View, x tp, byID bool) int32 {
	if byID {
		return cluster.Leader("", x.id, x.p)
	}
	return cluster.Leader(x.topic, [16]byte{}, x.p)
}

func produceEntry(node int32, p int32) kmsg.ProduceResponseTopicPartition {
	e := kmsg.NewProduceResponseTopicPartition()
	e.Partition, e.BaseOffset, e.LogAppendTime, e.LogStartOffset = p, int64(node)*1000+int64(p), 5, 7
	return e
}

func fetchEntry(node int32, p int32) kmsg.FetchResponseTopicPartition {
	e := kmsg.NewFetchResponseTopicPartition()
	e.Partition, e.HighWatermark, e.LastStableOffset, e.LogStartOffset = p, int64(node)*1000+int64(p), 900, 3
	e.RecordBatches = []byte{byte(node), byte(p), 0xee}
	return e
}

var leaderCases = []leaderCase{
	{
		key: 0,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TimeoutMillis, r.TransactionID = v, -1, 1500, kmsg.StringPtr("t1")
			for _, run := range grouped(tps) {
				t := kmsg.NewProduceRequestTopic()
				t.Topic, t.TopicID = run[0].topic, run[0].id
				for _, x := range run {
					t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: x.p, Records: []byte{byte(x.p), 1, 2}})
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.ProduceRequest)
			out := r.ResponseKind().(*kmsg.ProduceResponse)
			out.ThrottleMillis = node * 10
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewProduceResponseTopic()
				ot.Topic, ot.TopicID = t.Topic, t.TopicID
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, produceEntry(node, p.Partition))
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrProduceResponse()
			out.Version = v
			byID := v >= 13
			for _, run := range grouped(tps) {
				ot := kmsg.NewProduceResponseTopic()
				ot.Topic, ot.TopicID = run[0].topic, run[0].id
				for _, x := range run {
					node := leaderOf(cluster, x, byID)
					e := produceError(x.p, leaderCode(node, byID), nil)
					if node >= 0 {
						e = produceEntry(node, x.p)
						out.ThrottleMillis = max(out.ThrottleMillis, node*10)
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
	{
		key: 1,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = v, 500, 1, 1<<20
			for _, run := range grouped(tps) {
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = run[0].topic, run[0].id
				for _, x := range run {
					p := kmsg.NewFetchRequestTopicPartition()
					p.Partition, p.FetchOffset, p.PartitionMaxBytes = x.p, 42, 1<<16
					t.Partitions = append(t.Partitions, p)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.FetchRequest)
			out := r.ResponseKind().(*kmsg.FetchResponse)
			out.ThrottleMillis = node * 10
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewFetchResponseTopic()
				ot.Topic, ot.TopicID = t.Topic, t.TopicID
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, fetchEntry(node, p.Partition))
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrFetchResponse()
			out.Version = v
			byID := v >= 13
			for _, run := range grouped(tps) {
				ot := kmsg.NewFetchResponseTopic()
				ot.Topic, ot.TopicID = run[0].topic, run[0].id
				for _, x := range run {
					node := leaderOf(cluster, x, byID)
					e := fetchError(x.p, leaderCode(node, byID))
					if node >= 0 {
						e = fetchEntry(node, x.p)
						out.ThrottleMillis = max(out.ThrottleMillis, node*10)
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
	{
		key: 2,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = v
			for _, run := range grouped(tps) {
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = run[0].topic
				for _, x := range run {
					p := kmsg.NewListOffsetsRequestTopicPartition()
					p.Partition, p.Timestamp = x.p, -1
					t.Partitions = append(t.Partitions, p)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.ListOffsetsRequest)
			out := r.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewListOffsetsResponseTopic()
				ot.Topic = t.Topic
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, listOffsetsEntry(node, p.Partition))
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrListOffsetsResponse()
			out.Version = v
			for _, run := range grouped(tps) {
				ot := kmsg.NewListOffsetsResponseTopic()
				ot.Topic = run[0].topic
				for _, x := range run {
					node := leaderOf(cluster, x, false)
					e := listOffsetsError(x.p, leaderCode(node, false))
					if node >= 0 {
						e = listOffsetsEntry(node, x.p)
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
	{
		key: 21,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.Version = v
			for _, run := range grouped(tps) {
				t := kmsg.NewDeleteRecordsRequestTopic()
				t.Topic = run[0].topic
				for _, x := range run {
					t.Partitions = append(t.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: x.p, Offset: 10})
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.DeleteRecordsRequest)
			out := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewDeleteRecordsResponseTopic()
				ot.Topic = t.Topic
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: p.Partition, LowWatermark: int64(node)})
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrDeleteRecordsResponse()
			out.Version = v
			for _, run := range grouped(tps) {
				ot := kmsg.NewDeleteRecordsResponseTopic()
				ot.Topic = run[0].topic
				for _, x := range run {
					node := leaderOf(cluster, x, false)
					e := deleteRecordsError(x.p, leaderCode(node, false))
					if node >= 0 {
						e = kmsg.DeleteRecordsResponseTopicPartition{Partition: x.p, LowWatermark: int64(node)}
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
	{
		key: 23,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.Version = v
			for _, run := range grouped(tps) {
				t := kmsg.NewOffsetForLeaderEpochRequestTopic()
				t.Topic = run[0].topic
				for _, x := range run {
					p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
					p.Partition, p.LeaderEpoch = x.p, 4
					t.Partitions = append(t.Partitions, p)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.OffsetForLeaderEpochRequest)
			out := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
				ot.Topic = t.Topic
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, epochEntry(node, p.Partition))
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrOffsetForLeaderEpochResponse()
			out.Version = v
			for _, run := range grouped(tps) {
				ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
				ot.Topic = run[0].topic
				for _, x := range run {
					node := leaderOf(cluster, x, false)
					e := offsetForLeaderEpochError(x.p, leaderCode(node, false))
					if node >= 0 {
						e = epochEntry(node, x.p)
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
	{
		key: 61,
		request: func(v int16, tps []tp) kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			r.Version = v
			for _, run := range grouped(tps) {
				t := kmsg.NewDescribeProducersRequestTopic()
				t.Topic = run[0].topic
				for _, x := range run {
					t.Partitions = append(t.Partitions, x.p)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		answer: func(node int32, req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.DescribeProducersRequest)
			out := r.ResponseKind().(*kmsg.DescribeProducersResponse)
			for _, t := range slices.Backward(r.Topics) {
				ot := kmsg.NewDescribeProducersResponseTopic()
				ot.Topic = t.Topic
				for _, p := range slices.Backward(t.Partitions) {
					ot.Partitions = append(ot.Partitions, producersEntry(node, p))
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
		want: func(v int16, tps []tp, cluster View) kmsg.Response {
			out := kmsg.NewPtrDescribeProducersResponse()
			out.Version = v
			for _, run := range grouped(tps) {
				ot := kmsg.NewDescribeProducersResponseTopic()
				ot.Topic = run[0].topic
				for _, x := range run {
					node := leaderOf(cluster, x, false)
					e := describeProducersError(x.p, leaderCode(node, false), nil)
					if node >= 0 {
						e = producersEntry(node, x.p)
					}
					ot.Partitions = append(ot.Partitions, e)
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		},
	},
}

func listOffsetsEntry(node, p int32) kmsg.ListOffsetsResponseTopicPartition {
	e := kmsg.NewListOffsetsResponseTopicPartition()
	e.Partition, e.Offset, e.Timestamp, e.LeaderEpoch = p, int64(node)*1000+int64(p), 77, 4
	e.OldStyleOffsets = []int64{int64(node)*1000 + int64(p)}
	return e
}

func epochEntry(node, p int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	e := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	e.Partition, e.LeaderEpoch, e.EndOffset = p, 4, int64(node)*1000+int64(p)
	return e
}

func producersEntry(node, p int32) kmsg.DescribeProducersResponseTopicPartition {
	e := kmsg.NewDescribeProducersResponseTopicPartition()
	e.Partition = p
	e.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{{ProducerID: int64(node), ProducerEpoch: 1, LastSequence: 9, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1}}
	return e
}

// TestByLeader splits a request over three brokers at every version of
// every key split by leader, has fake brokers answer their parts (in
// reverse order) through kmsg's encoding, and compares the merged answer,
// decoded by kmsg, with the answer of one broker leading everything:
// each partition the answer of its leader, in the client's order, a
// partition without a leader NOT_LEADER_OR_FOLLOWER and a topic or
// partition the cluster lacks UNKNOWN_TOPIC_OR_PARTITION
// (UNKNOWN_TOPIC_ID by id).
func TestByLeader(t *testing.T) {
	cluster := testCluster()
	for _, c := range leaderCases {
		for _, v := range versions(kmsg.RequestForKey(c.key)) {
			req := c.request(v, mixed)
			req.SetVersion(v)
			plan, got := splitAndMerge(t, req, cluster, nil, c.answer)
			want := roundTripResponse(c.want(v, mixed, cluster))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d:\n got %+v\nwant %+v", kmsg.NameForKey(c.key), v, got, want)
			}
			if len(plan.Parts) != 3 {
				t.Errorf("%s v%d: %d parts, want one per broker", kmsg.NameForKey(c.key), v, len(plan.Parts))
			}
			if !plan.Stale {
				t.Errorf("%s v%d: partitions the view could not place, not stale", kmsg.NameForKey(c.key), v)
			}
		}
	}
}

// TestByLeaderPartFails: a broker that fails leaves its partitions
// answered NOT_LEADER_OR_FOLLOWER, the others answered by theirs.
func TestByLeaderPartFails(t *testing.T) {
	cluster := testCluster()
	for _, c := range leaderCases {
		for _, v := range versions(kmsg.RequestForKey(c.key)) {
			req := c.request(v, mixed)
			req.SetVersion(v)
			_, got := splitAndMerge(t, req, cluster, map[int32]bool{2: true}, c.answer)
			without := testCluster()
			without.SetLeader("orders", ordersID, 1, NoLeader)
			without.SetLeader("orders", ordersID, 4, NoLeader)
			want := roundTripResponse(c.want(v, mixed, without))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d:\n got %+v\nwant %+v", kmsg.NameForKey(c.key), v, got, want)
			}
		}
	}
}

// TestProduceFacts: what the sequencer needs of a Produce, and that the
// parts alias the client's record bytes instead of copying them.
func TestProduceFacts(t *testing.T) {
	req := leaderCases[0].request(9, mixed).(*kmsg.ProduceRequest)
	req.Acks = 0
	plan, err := Split(req, testCluster())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Write || !plan.NoResponse || plan.TransactionalID != "t1" || plan.EndTxn || plan.Group != "" {
		t.Fatalf("facts %+v", plan)
	}
	records := make(map[tp]unsafe.Pointer)
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			records[tp{topic: req.Topics[i].Topic, p: p.Partition}] = unsafe.Pointer(unsafe.SliceData(p.Records))
		}
	}
	n := 0
	for _, part := range plan.Parts {
		q := part.Request.(*kmsg.ProduceRequest)
		if q.Acks != 0 || q.TimeoutMillis != 1500 || q.TransactionID == nil || *q.TransactionID != "t1" {
			t.Errorf("part to %d: acks %d timeout %d txn %v", part.Node, q.Acks, q.TimeoutMillis, q.TransactionID)
		}
		for _, tt := range q.Topics {
			for _, p := range tt.Partitions {
				n++
				if unsafe.Pointer(unsafe.SliceData(p.Records)) != records[tp{topic: tt.Topic, p: p.Partition}] {
					t.Errorf("%s/%d: records copied", tt.Topic, p.Partition)
				}
			}
		}
	}
	if n != 6 {
		t.Fatalf("%d partitions in the parts, want the 6 with leaders", n)
	}
}

// TestProduceNewLeader: a broker that names the new leader of a
// partition (KIP-951) is read as naming the proxy, with the leader's
// epoch, and the response carries the proxy's endpoint.
func TestProduceNewLeader(t *testing.T) {
	cluster := testCluster()
	answer := func(node int32, req kmsg.Request) kmsg.Response {
		out := leaderCases[0].answer(node, req).(*kmsg.ProduceResponse)
		for i := range out.Topics {
			for j := range out.Topics[i].Partitions {
				p := &out.Topics[i].Partitions[j]
				if node == 2 && out.Version >= 10 {
					p.ErrorCode = kerr.NotLeaderForPartition.Code
					p.CurrentLeader = kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 3, LeaderEpoch: 9}
				}
			}
		}
		if node == 2 && out.Version >= 10 {
			out.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 3, Host: "broker", Port: 9003}}
		}
		return out
	}
	for _, v := range []int16{9, 10, 11, 12} {
		req := leaderCases[0].request(v, mixed)
		req.SetVersion(v)
		_, got := splitAndMerge(t, req, cluster, nil, answer)
		resp := got.(*kmsg.ProduceResponse)
		moved := 0
		for _, tt := range resp.Topics {
			for _, p := range tt.Partitions {
				if p.BaseOffset < 2000 || p.BaseOffset >= 3000 {
					continue
				}
				moved++
				want := kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: -1, LeaderEpoch: -1}
				if v >= 10 {
					want = kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: testSelf.NodeID, LeaderEpoch: 9}
				}
				if p.CurrentLeader.LeaderID != want.LeaderID || p.CurrentLeader.LeaderEpoch != want.LeaderEpoch {
					t.Errorf("v%d: current leader %+v, want %+v", v, p.CurrentLeader, want)
				}
			}
		}
		if moved != 1 {
			t.Errorf("v%d: %d partitions answered by broker 2, want 1 (orders/1)", v, moved)
		}
		wantBrokers := 0
		if v >= 10 {
			wantBrokers = 1
		}
		if len(resp.Brokers) != wantBrokers || (wantBrokers == 1 && (resp.Brokers[0].NodeID != testSelf.NodeID || resp.Brokers[0].Host != testSelf.Host || resp.Brokers[0].Port != testSelf.Port)) {
			t.Errorf("v%d: brokers %+v, want the proxy alone", v, resp.Brokers)
		}
	}
}

// TestFetchSessionless: the parts are sessionless full fetches without a
// rack or forgotten topics; the merged response has no session and no
// preferred read replica; an incremental fetch is answered
// FETCH_SESSION_ID_NOT_FOUND without going anywhere.
func TestFetchSessionless(t *testing.T) {
	cluster := testCluster()
	req := leaderCases[1].request(12, mixed).(*kmsg.FetchRequest)
	req.SessionID, req.SessionEpoch, req.Rack = 55, 0, "rack-a"
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "logs", Partitions: []int32{1}}}
	answer := func(node int32, r kmsg.Request) kmsg.Response {
		q := r.(*kmsg.FetchRequest)
		if q.SessionID != 0 || q.SessionEpoch != -1 || q.Rack != "" || len(q.ForgottenTopics) != 0 {
			t.Errorf("part to %d: session %d/%d rack %q forgotten %d", node, q.SessionID, q.SessionEpoch, q.Rack, len(q.ForgottenTopics))
		}
		if q.MaxWaitMillis != 500 || q.MinBytes != 1 || q.MaxBytes != 1<<20 {
			t.Errorf("part to %d: wait %d min %d max %d", node, q.MaxWaitMillis, q.MinBytes, q.MaxBytes)
		}
		out := leaderCases[1].answer(node, r).(*kmsg.FetchResponse)
		out.SessionID = 1000 + node
		for i := range out.Topics {
			for j := range out.Topics[i].Partitions {
				out.Topics[i].Partitions[j].PreferredReadReplica = 2
			}
		}
		return out
	}
	_, got := splitAndMerge(t, req, cluster, nil, answer)
	resp := got.(*kmsg.FetchResponse)
	if resp.SessionID != 0 || resp.ErrorCode != 0 || resp.ThrottleMillis != 30 {
		t.Errorf("session %d error %d throttle %d", resp.SessionID, resp.ErrorCode, resp.ThrottleMillis)
	}
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			if p.PreferredReadReplica != -1 {
				t.Errorf("%s/%d: preferred read replica %d", tt.Topic, p.Partition, p.PreferredReadReplica)
			}
		}
	}

	req.SessionEpoch = 3
	plan, err := Split(roundTripRequest(req), cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Parts) != 0 {
		t.Fatalf("an incremental fetch went upstream: %d parts", len(plan.Parts))
	}
	m, _ := plan.Merge(nil, testSelf)
	if r := roundTripResponse(m).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(r.Topics) != 0 {
		t.Fatalf("incremental fetch answered %d with %d topics", r.ErrorCode, len(r.Topics))
	}
}

// TestMergeChecksResults: results that do not match the plan are the
// caller's fault, never a response.
func TestMergeChecksResults(t *testing.T) {
	req := leaderCases[0].request(9, mixed)
	req.SetVersion(9)
	plan, err := Split(req, testCluster())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Merge(nil, testSelf); err == nil {
		t.Error("no results for three parts merged")
	}
	results := make([]Result, len(plan.Parts))
	for i := range results {
		results[i].Response = kmsg.NewPtrFetchResponse()
	}
	if _, err := plan.Merge(results, testSelf); err == nil {
		t.Error("Fetch responses merged into a Produce")
	}
	for i := range results {
		r := kmsg.NewPtrProduceResponse()
		r.Version = 8
		results[i].Response = r
	}
	if _, err := plan.Merge(results, testSelf); err == nil {
		t.Error("v8 responses merged into a v9 request")
	}
}

// TestByLeaderWide: requests of more partitions than a broker's answer
// is searched through are merged through the index by key, duplicates
// included, for every key and version.
func TestByLeaderWide(t *testing.T) {
	cluster := testCluster()
	m := kmsg.NewPtrMetadataResponse()
	for _, b := range []int32{1, 2, 3} {
		m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b})
	}
	wide := kmsg.NewMetadataResponseTopic()
	wideID := [16]byte{0xd}
	wide.Topic, wide.TopicID = kmsg.StringPtr("wide"), wideID
	for p := range int32(90) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader = p, 1+p%3
		wide.Partitions = append(wide.Partitions, mp)
	}
	m.Topics = append(m.Topics, wide)
	cluster.ApplyMetadata(m, false)
	var tps []tp
	for i := range 200 {
		tps = append(tps, tp{"wide", wideID, int32((i * 37) % 97)})
	}
	tps = append(tps, mixed...)
	for _, c := range leaderCases {
		for _, v := range versions(kmsg.RequestForKey(c.key)) {
			req := c.request(v, tps)
			req.SetVersion(v)
			_, got := splitAndMerge(t, req, cluster, map[int32]bool{3: true}, c.answer)
			without := cluster.Clone()
			for p := int32(2); p < 90; p += 3 {
				without.SetLeader("wide", wideID, p, NoLeader)
			}
			without.SetLeader("orders", ordersID, 2, NoLeader)
			without.SetLeader("logs", logsID, 0, NoLeader)
			without.SetLeader("logs", logsID, 1, NoLeader)
			want := roundTripResponse(c.want(v, tps, without))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s v%d: the merged answer differs from one broker's", kmsg.NameForKey(c.key), v)
			}
		}
	}
}
