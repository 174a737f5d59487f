package splitmerge

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests split by partition leader. A part that fails, or an entry its
// broker leaves out, is answered NOT_LEADER_OR_FOLLOWER: every client
// handles it for these requests by refreshing metadata and retrying,
// which is what it would do had it lost the leader's connection.
var notLeader = kerr.NotLeaderForPartition.Code

type (
	produceT  = kmsg.ProduceRequestTopic
	produceP  = kmsg.ProduceRequestTopicPartition
	produceRT = kmsg.ProduceResponseTopic
	produceRP = kmsg.ProduceResponseTopicPartition
)

var produceShape = shape[produceT, produceP, produceRT, produceRP]{
	topic: func(t *produceT) (string, [16]byte) { return t.Topic, t.TopicID },
	parts: func(t *produceT) *[]produceP { return &t.Partitions },
	num:   func(p *produceP) int32 { return p.Partition },
	shell: func(t *produceT) produceT {
		return produceT{Topic: t.Topic, TopicID: t.TopicID, UnknownTags: t.UnknownTags}
	},
	rTopic: func(t *produceRT) (string, [16]byte) { return t.Topic, t.TopicID },
	rParts: func(t *produceRT) *[]produceRP { return &t.Partitions },
	rNum:   func(p *produceRP) int32 { return p.Partition },
	rShell: func(t *produceT) produceRT {
		o := kmsg.NewProduceResponseTopic()
		o.Topic, o.TopicID = t.Topic, t.TopicID
		return o
	},
	errEntry: func(num int32, code int16) produceRP { return produceError(num, code, nil) },
	rTopics:  func(r kmsg.Response) []produceRT { return r.(*kmsg.ProduceResponse).Topics },
	fix: func(e *produceRP, self Self) bool {
		if e.CurrentLeader.LeaderID < 0 {
			return false
		}
		e.CurrentLeader.LeaderID = self.NodeID
		return true
	},
	respond: func(v int16, throttle int32, topics []produceRT, moved bool, self Self) kmsg.Response {
		out := kmsg.NewPtrProduceResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		if moved && v >= 10 {
			out.Brokers = []kmsg.ProduceResponseBroker{{NodeID: self.NodeID, Host: self.Host, Port: self.Port, Rack: self.Rack}}
		}
		return out
	},
}

// splitProduce: each part carries the client's acks, timeout and
// transactional id. A part's response that names a new leader (KIP-951)
// names the proxy, with the leader's epoch, and from v10 the merged
// response carries the proxy's endpoint.
func splitProduce(p *Plan, r *kmsg.ProduceRequest, v View) {
	p.Write = true
	p.NoResponse = r.Acks == 0
	if r.TransactionID != nil {
		p.TransactionalID = *r.TransactionID
	}
	splitByLeader(p, &produceShape, v, r.Version, r.Topics, r.Version >= 13, func(ts []produceT) kmsg.Request {
		q := *r
		q.Topics = ts
		return &q
	})
}

type (
	fetchT  = kmsg.FetchRequestTopic
	fetchP  = kmsg.FetchRequestTopicPartition
	fetchRT = kmsg.FetchResponseTopic
	fetchRP = kmsg.FetchResponseTopicPartition
)

var fetchShape = shape[fetchT, fetchP, fetchRT, fetchRP]{
	topic:  func(t *fetchT) (string, [16]byte) { return t.Topic, t.TopicID },
	parts:  func(t *fetchT) *[]fetchP { return &t.Partitions },
	num:    func(p *fetchP) int32 { return p.Partition },
	shell:  func(t *fetchT) fetchT { return fetchT{Topic: t.Topic, TopicID: t.TopicID, UnknownTags: t.UnknownTags} },
	rTopic: func(t *fetchRT) (string, [16]byte) { return t.Topic, t.TopicID },
	rParts: func(t *fetchRT) *[]fetchRP { return &t.Partitions },
	rNum:   func(p *fetchRP) int32 { return p.Partition },
	rShell: func(t *fetchT) fetchRT {
		o := kmsg.NewFetchResponseTopic()
		o.Topic, o.TopicID = t.Topic, t.TopicID
		return o
	},
	errEntry: fetchError,
	rTopics:  func(r kmsg.Response) []fetchRT { return r.(*kmsg.FetchResponse).Topics },
	fix: func(e *fetchRP, self Self) bool {
		e.PreferredReadReplica = -1
		if e.CurrentLeader.LeaderID < 0 {
			return false
		}
		e.CurrentLeader.LeaderID = self.NodeID
		return true
	},
	respond: func(v int16, throttle int32, topics []fetchRT, moved bool, self Self) kmsg.Response {
		// Session id 0: no session was made.
		out := kmsg.NewPtrFetchResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		if moved && v >= 16 {
			out.Brokers = []kmsg.FetchResponseBroker{{NodeID: self.NodeID, Host: self.Host, Port: self.Port, Rack: self.Rack}}
		}
		return out
	},
}

// splitFetch answers sessionless (KIP-227): the parts are full fetches
// without a session (id 0, epoch -1), forgotten topics dropped, and the
// merged response has session id 0, which tells the client that no
// session was made, so it keeps sending full fetches. An incremental
// fetch (epoch above 0) names a session the proxy never gave out and is
// answered FETCH_SESSION_ID_NOT_FOUND, as Kafka answers a session it does
// not know. The parts carry no rack (KIP-392): the proxy fetches from
// leaders, and a leader that named a preferred read replica would send
// back no records, again and again.
//
// Each part carries the client's wait, minimum and maximum bytes; the
// proxy decides how long it waits for them (see DESIGN.md).
func splitFetch(p *Plan, r *kmsg.FetchRequest, v View) {
	if r.Version >= 7 && r.SessionEpoch > 0 {
		p.merge = func([]Result, Self) (kmsg.Response, error) {
			out := kmsg.NewPtrFetchResponse()
			out.Version = r.Version
			out.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return out, nil
		}
		return
	}
	splitByLeader(p, &fetchShape, v, r.Version, r.Topics, r.Version >= 13, func(ts []fetchT) kmsg.Request {
		q := *r
		q.Topics = ts
		q.ForgottenTopics = nil
		q.SessionID, q.SessionEpoch = 0, -1
		q.Rack = ""
		return &q
	})
}

type (
	listOffsetsT  = kmsg.ListOffsetsRequestTopic
	listOffsetsP  = kmsg.ListOffsetsRequestTopicPartition
	listOffsetsRT = kmsg.ListOffsetsResponseTopic
	listOffsetsRP = kmsg.ListOffsetsResponseTopicPartition
)

var listOffsetsShape = shape[listOffsetsT, listOffsetsP, listOffsetsRT, listOffsetsRP]{
	topic:  func(t *listOffsetsT) (string, [16]byte) { return t.Topic, [16]byte{} },
	parts:  func(t *listOffsetsT) *[]listOffsetsP { return &t.Partitions },
	num:    func(p *listOffsetsP) int32 { return p.Partition },
	shell:  func(t *listOffsetsT) listOffsetsT { return listOffsetsT{Topic: t.Topic, UnknownTags: t.UnknownTags} },
	rTopic: func(t *listOffsetsRT) (string, [16]byte) { return t.Topic, [16]byte{} },
	rParts: func(t *listOffsetsRT) *[]listOffsetsRP { return &t.Partitions },
	rNum:   func(p *listOffsetsRP) int32 { return p.Partition },
	rShell: func(t *listOffsetsT) listOffsetsRT {
		o := kmsg.NewListOffsetsResponseTopic()
		o.Topic = t.Topic
		return o
	},
	errEntry: listOffsetsError,
	rTopics:  func(r kmsg.Response) []listOffsetsRT { return r.(*kmsg.ListOffsetsResponse).Topics },
	respond: func(v int16, throttle int32, topics []listOffsetsRT, _ bool, _ Self) kmsg.Response {
		out := kmsg.NewPtrListOffsetsResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		return out
	},
}

func splitListOffsets(p *Plan, r *kmsg.ListOffsetsRequest, v View) {
	splitByLeader(p, &listOffsetsShape, v, r.Version, r.Topics, false, func(ts []listOffsetsT) kmsg.Request {
		q := *r
		q.Topics = ts
		return &q
	})
}

type (
	epochT  = kmsg.OffsetForLeaderEpochRequestTopic
	epochP  = kmsg.OffsetForLeaderEpochRequestTopicPartition
	epochRT = kmsg.OffsetForLeaderEpochResponseTopic
	epochRP = kmsg.OffsetForLeaderEpochResponseTopicPartition
)

var epochShape = shape[epochT, epochP, epochRT, epochRP]{
	topic:  func(t *epochT) (string, [16]byte) { return t.Topic, [16]byte{} },
	parts:  func(t *epochT) *[]epochP { return &t.Partitions },
	num:    func(p *epochP) int32 { return p.Partition },
	shell:  func(t *epochT) epochT { return epochT{Topic: t.Topic, UnknownTags: t.UnknownTags} },
	rTopic: func(t *epochRT) (string, [16]byte) { return t.Topic, [16]byte{} },
	rParts: func(t *epochRT) *[]epochRP { return &t.Partitions },
	rNum:   func(p *epochRP) int32 { return p.Partition },
	rShell: func(t *epochT) epochRT {
		o := kmsg.NewOffsetForLeaderEpochResponseTopic()
		o.Topic = t.Topic
		return o
	},
	errEntry: offsetForLeaderEpochError,
	rTopics:  func(r kmsg.Response) []epochRT { return r.(*kmsg.OffsetForLeaderEpochResponse).Topics },
	respond: func(v int16, throttle int32, topics []epochRT, _ bool, _ Self) kmsg.Response {
		out := kmsg.NewPtrOffsetForLeaderEpochResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		return out
	},
}

func splitOffsetForLeaderEpoch(p *Plan, r *kmsg.OffsetForLeaderEpochRequest, v View) {
	splitByLeader(p, &epochShape, v, r.Version, r.Topics, false, func(ts []epochT) kmsg.Request {
		q := *r
		q.Topics = ts
		return &q
	})
}

type (
	deleteRecordsT  = kmsg.DeleteRecordsRequestTopic
	deleteRecordsP  = kmsg.DeleteRecordsRequestTopicPartition
	deleteRecordsRT = kmsg.DeleteRecordsResponseTopic
	deleteRecordsRP = kmsg.DeleteRecordsResponseTopicPartition
)

var deleteRecordsShape = shape[deleteRecordsT, deleteRecordsP, deleteRecordsRT, deleteRecordsRP]{
	topic: func(t *deleteRecordsT) (string, [16]byte) { return t.Topic, [16]byte{} },
	parts: func(t *deleteRecordsT) *[]deleteRecordsP { return &t.Partitions },
	num:   func(p *deleteRecordsP) int32 { return p.Partition },
	shell: func(t *deleteRecordsT) deleteRecordsT {
		return deleteRecordsT{Topic: t.Topic, UnknownTags: t.UnknownTags}
	},
	rTopic: func(t *deleteRecordsRT) (string, [16]byte) { return t.Topic, [16]byte{} },
	rParts: func(t *deleteRecordsRT) *[]deleteRecordsRP { return &t.Partitions },
	rNum:   func(p *deleteRecordsRP) int32 { return p.Partition },
	rShell: func(t *deleteRecordsT) deleteRecordsRT {
		o := kmsg.NewDeleteRecordsResponseTopic()
		o.Topic = t.Topic
		return o
	},
	errEntry: deleteRecordsError,
	rTopics:  func(r kmsg.Response) []deleteRecordsRT { return r.(*kmsg.DeleteRecordsResponse).Topics },
	respond: func(v int16, throttle int32, topics []deleteRecordsRT, _ bool, _ Self) kmsg.Response {
		out := kmsg.NewPtrDeleteRecordsResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		return out
	},
}

func splitDeleteRecords(p *Plan, r *kmsg.DeleteRecordsRequest, v View) {
	splitByLeader(p, &deleteRecordsShape, v, r.Version, r.Topics, false, func(ts []deleteRecordsT) kmsg.Request {
		q := *r
		q.Topics = ts
		return &q
	})
}

type (
	producersT  = kmsg.DescribeProducersRequestTopic
	producersRT = kmsg.DescribeProducersResponseTopic
	producersRP = kmsg.DescribeProducersResponseTopicPartition
)

var producersShape = shape[producersT, int32, producersRT, producersRP]{
	topic:  func(t *producersT) (string, [16]byte) { return t.Topic, [16]byte{} },
	parts:  func(t *producersT) *[]int32 { return &t.Partitions },
	num:    func(p *int32) int32 { return *p },
	shell:  func(t *producersT) producersT { return producersT{Topic: t.Topic, UnknownTags: t.UnknownTags} },
	rTopic: func(t *producersRT) (string, [16]byte) { return t.Topic, [16]byte{} },
	rParts: func(t *producersRT) *[]producersRP { return &t.Partitions },
	rNum:   func(p *producersRP) int32 { return p.Partition },
	rShell: func(t *producersT) producersRT {
		o := kmsg.NewDescribeProducersResponseTopic()
		o.Topic = t.Topic
		return o
	},
	errEntry: func(num int32, code int16) producersRP { return describeProducersError(num, code, nil) },
	rTopics:  func(r kmsg.Response) []producersRT { return r.(*kmsg.DescribeProducersResponse).Topics },
	respond: func(v int16, throttle int32, topics []producersRT, _ bool, _ Self) kmsg.Response {
		out := kmsg.NewPtrDescribeProducersResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, throttle, topics
		return out
	},
}

func splitDescribeProducers(p *Plan, r *kmsg.DescribeProducersRequest, v View) {
	splitByLeader(p, &producersShape, v, r.Version, r.Topics, false, func(ts []producersT) kmsg.Request {
		q := *r
		q.Topics = ts
		return &q
	})
}
