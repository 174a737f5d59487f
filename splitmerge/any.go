package splitmerge

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests any one broker answers. Which broker matters not (the
// controller or the cluster's metadata answers them, whichever broker
// takes them), so the part is marked Any. A part that fails is answered
// REQUEST_TIMED_OUT, which says what the proxy knows: the request may or
// may not have been applied.
var anyFailed = kerr.RequestTimedOut.Code

// reads are the ToAny keys that change nothing, which the proxy may send
// again, to another broker, after a failure.
var reads = map[int16]bool{
	3:  true, // Metadata (a topic it creates is created once)
	22: true, // InitProducerID without a transactional id: a new id
	29: true, // DescribeACLs
	32: true, // DescribeConfigs
	41: true, // DescribeDelegationToken
	48: true, // DescribeClientQuotas
	50: true, // DescribeUserSCRAMCredentials
	60: true, // DescribeCluster
	71: true, // GetTelemetrySubscriptions
	74: true, // ListConfigResources
	75: true, // DescribeTopicPartitions
}

// Read reports whether requests of key change nothing upstream, so that a
// part that failed may be sent again (to another broker when the part is
// Any) instead of being answered with an error. Fetch, ListOffsets,
// OffsetForLeaderEpoch and DescribeProducers are reads too, bound to
// their leaders.
func Read(key int16) bool {
	switch key {
	case 1, 2, 23, 61:
		return true
	}
	return reads[key]
}

// splitAny sends req whole to any broker; its response is the client's,
// reshaped where it names brokers.
func splitAny(p *Plan, req kmsg.Request, v View) error {
	brokers := v.Brokers()
	if len(brokers) == 0 {
		return ErrNoBrokers
	}
	p.addPart(brokers[0], req)
	p.Parts[0].Any = true
	p.merge = func(results []Result, self Self) (kmsg.Response, error) {
		if results[0].Err != nil {
			return anyFailure(req, self)
		}
		resp := results[0].Response
		reshape(resp, self)
		return resp, nil
	}
	return nil
}

// anyFailure answers a request whose one part failed.
func anyFailure(req kmsg.Request, self Self) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		// A nil list asks for every topic, and an empty answer would
		// say there are none: no field can carry the failure.
		if r.Topics == nil {
			return nil, ErrCannotAnswer
		}
		resp := ErrorResponse(req, kerr.LeaderNotAvailable.Code, "")
		reshape(resp, self)
		return resp, nil
	case *kmsg.DescribeTopicPartitionsRequest:
		if len(r.Topics) == 0 {
			return nil, ErrCannotAnswer
		}
	}
	resp := ErrorResponse(req, anyFailed, "")
	reshape(resp, self)
	return resp, nil
}

// reshape makes a response that names brokers name the proxy alone: the
// only broker, the controller, the leader and every replica of every
// partition. Leader epochs stay the leaders', so the epochs a client
// sends back (Fetch, OffsetForLeaderEpoch) still mean what the leaders
// expect.
func reshape(resp kmsg.Response, self Self) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: self.NodeID, Host: self.Host, Port: self.Port, Rack: self.Rack}}
		r.ControllerID = selfIfNode(r.ControllerID, self)
		only := []int32{self.NodeID}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.Replicas, p.OfflineReplicas = only, nil
				p.ISR = nil
				if p.Leader >= 0 {
					p.Leader, p.ISR = self.NodeID, only
				}
			}
		}
	case *kmsg.DescribeClusterResponse:
		if r.ErrorCode != 0 {
			return
		}
		r.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: self.NodeID, Host: self.Host, Port: self.Port, Rack: self.Rack}}
		r.ControllerID = selfIfNode(r.ControllerID, self)
	case *kmsg.DescribeTopicPartitionsResponse:
		only := []int32{self.NodeID}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.Replicas, p.OfflineReplicas = only, nil
				p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR = nil, nil, nil
				if p.LeaderID >= 0 {
					p.LeaderID, p.ISR = self.NodeID, only
				}
			}
		}
	}
}

func selfIfNode(id int32, self Self) int32 {
	if id >= 0 {
		return self.NodeID
	}
	return id
}

// splitDescribeCluster: controllers (KIP-919 endpoint type 2) are not
// reachable through the single endpoint, so the proxy answers as a broker
// does when asked for them.
func splitDescribeCluster(p *Plan, r *kmsg.DescribeClusterRequest, v View) error {
	if r.EndpointType == 2 {
		p.merge = func([]Result, Self) (kmsg.Response, error) {
			return ErrorResponse(r, kerr.MismatchedEndpointType.Code,
				"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"), nil
		}
		return nil
	}
	return splitAny(p, r, v)
}

// Config resources: the types Kafka gives them.
const (
	resourceBroker       = 4
	resourceBrokerLogger = 8
)

// resourceRoute sends a broker's own resources (its configs, its loggers)
// to the broker they name, and every other resource (topics, groups,
// client metrics, the cluster's broker defaults: a broker resource with an
// empty name) to any broker. A name that is not one of the view's brokers
// is answered as Kafka answers a broker id it is not. named says the
// resource was bound to the broker it names.
func resourceRoute(typ int8, name string, brokers []int32) (node int32, named bool, a answer) {
	if (typ != resourceBroker && typ != resourceBrokerLogger) || name == "" {
		return brokers[0], false, answer{}
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err == nil {
		for _, b := range brokers {
			if int64(b) == id {
				return b, true, answer{}
			}
		}
	}
	return -1, false, answer{code: kerr.InvalidRequest.Code, msg: fmt.Sprintf(
		"broker %q is not one of the cluster's brokers %v: the single endpoint sends a broker's resources to the broker they name", name, brokers)}
}

func resourceKey(typ int8, name string) string { return string(rune(typ)) + name }

// splitResources splits a config request by resourceRoute. A part is Any
// when it holds only resources any broker answers.
func splitResources[E, RE any](p *Plan, b *batch[E, RE], v View, version int16, entries []E, typeName func(*E) (int8, string), part func([]E) kmsg.Request) error {
	brokers := v.Brokers()
	if len(brokers) == 0 {
		return ErrNoBrokers
	}
	bound := make(map[int32]bool)
	splitBatch(p, b, version, entries, func(e *E) (int32, answer) {
		typ, name := typeName(e)
		node, named, a := resourceRoute(typ, name, brokers)
		if named {
			bound[node] = true
		}
		return node, a
	}, part)
	for i := range p.Parts {
		p.Parts[i].Any = !bound[p.Parts[i].Node]
	}
	return nil
}

// configs is the batch of a config request's resources (R request
// resources, RR response resources).
func configs[R, RR any](typeName func(*R) (int8, string), rTypeName func(*RR) (int8, string),
	errEntry func(*R, int16, *string) RR, entries func(kmsg.Response) []RR, respond func(int16, []Result, []RR) kmsg.Response,
) batch[R, RR] {
	return batch[R, RR]{
		key:      func(e *R) string { return resourceKey(typeName(e)) },
		rKey:     func(e *RR) string { return resourceKey(rTypeName(e)) },
		errEntry: errEntry,
		failed:   anyFailed,
		entries:  entries,
		respond:  respond,
	}
}

type (
	describeConfigsR  = kmsg.DescribeConfigsRequestResource
	describeConfigsRR = kmsg.DescribeConfigsResponseResource
	alterConfigsR     = kmsg.AlterConfigsRequestResource
	alterConfigsRR    = kmsg.AlterConfigsResponseResource
	incrementalR      = kmsg.IncrementalAlterConfigsRequestResource
	incrementalRR     = kmsg.IncrementalAlterConfigsResponseResource
)

var (
	describeConfigs = configs(
		func(e *describeConfigsR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(e *describeConfigsRR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		describeConfigsError,
		func(r kmsg.Response) []describeConfigsRR { return r.(*kmsg.DescribeConfigsResponse).Resources },
		func(v int16, results []Result, es []describeConfigsRR) kmsg.Response {
			out := kmsg.NewPtrDescribeConfigsResponse()
			out.Version, out.ThrottleMillis, out.Resources = v, maxThrottle(results), es
			return out
		})
	alterConfigs = configs(
		func(e *alterConfigsR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(e *alterConfigsRR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		alterConfigsError,
		func(r kmsg.Response) []alterConfigsRR { return r.(*kmsg.AlterConfigsResponse).Resources },
		func(v int16, results []Result, es []alterConfigsRR) kmsg.Response {
			out := kmsg.NewPtrAlterConfigsResponse()
			out.Version, out.ThrottleMillis, out.Resources = v, maxThrottle(results), es
			return out
		})
	incrementalAlterConfigs = configs(
		func(e *incrementalR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(e *incrementalRR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		incrementalAlterConfigsError,
		func(r kmsg.Response) []incrementalRR { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources },
		func(v int16, results []Result, es []incrementalRR) kmsg.Response {
			out := kmsg.NewPtrIncrementalAlterConfigsResponse()
			out.Version, out.ThrottleMillis, out.Resources = v, maxThrottle(results), es
			return out
		})
)

func splitDescribeConfigs(p *Plan, r *kmsg.DescribeConfigsRequest, v View) error {
	return splitResources(p, &describeConfigs, v, r.Version, r.Resources,
		func(e *describeConfigsR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(es []describeConfigsR) kmsg.Request {
			q := *r
			q.Resources = es
			return &q
		})
}

func splitAlterConfigs(p *Plan, r *kmsg.AlterConfigsRequest, v View) error {
	return splitResources(p, &alterConfigs, v, r.Version, r.Resources,
		func(e *alterConfigsR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(es []alterConfigsR) kmsg.Request {
			q := *r
			q.Resources = es
			return &q
		})
}

func splitIncrementalAlterConfigs(p *Plan, r *kmsg.IncrementalAlterConfigsRequest, v View) error {
	return splitResources(p, &incrementalAlterConfigs, v, r.Version, r.Resources,
		func(e *incrementalR) (int8, string) { return int8(e.ResourceType), e.ResourceName },
		func(es []incrementalR) kmsg.Request {
			q := *r
			q.Resources = es
			return &q
		})
}

// A manual replica assignment names brokers by id, and the only id a
// client of the single endpoint knows is the proxy's: such a topic is
// refused, and the rest of the request goes on.
const whyAssignment = "a manual replica assignment names brokers, and the single endpoint shows the cluster as one broker; give a partition count and replication factor instead"

var createTopics = batch[kmsg.CreateTopicsRequestTopic, kmsg.CreateTopicsResponseTopic]{
	key:  func(e *kmsg.CreateTopicsRequestTopic) string { return e.Topic },
	rKey: func(e *kmsg.CreateTopicsResponseTopic) string { return e.Topic },
	errEntry: func(e *kmsg.CreateTopicsRequestTopic, code int16, msg *string) kmsg.CreateTopicsResponseTopic {
		return createTopicError(e.Topic, code, msg)
	},
	failed:  anyFailed,
	entries: func(r kmsg.Response) []kmsg.CreateTopicsResponseTopic { return r.(*kmsg.CreateTopicsResponse).Topics },
	respond: func(v int16, results []Result, es []kmsg.CreateTopicsResponseTopic) kmsg.Response {
		out := kmsg.NewPtrCreateTopicsResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, maxThrottle(results), es
		return out
	},
}

var createPartitions = batch[kmsg.CreatePartitionsRequestTopic, kmsg.CreatePartitionsResponseTopic]{
	key:  func(e *kmsg.CreatePartitionsRequestTopic) string { return e.Topic },
	rKey: func(e *kmsg.CreatePartitionsResponseTopic) string { return e.Topic },
	errEntry: func(e *kmsg.CreatePartitionsRequestTopic, code int16, msg *string) kmsg.CreatePartitionsResponseTopic {
		return createPartitionsError(e.Topic, code, msg)
	},
	failed: anyFailed,
	entries: func(r kmsg.Response) []kmsg.CreatePartitionsResponseTopic {
		return r.(*kmsg.CreatePartitionsResponse).Topics
	},
	respond: func(v int16, results []Result, es []kmsg.CreatePartitionsResponseTopic) kmsg.Response {
		out := kmsg.NewPtrCreatePartitionsResponse()
		out.Version, out.ThrottleMillis, out.Topics = v, maxThrottle(results), es
		return out
	},
}

// splitUnassigned sends to any broker the entries that name no brokers,
// and refuses the others (assigned) with INVALID_REPLICA_ASSIGNMENT.
func splitUnassigned[E, RE any](p *Plan, b *batch[E, RE], v View, version int16, entries []E, assigned func(*E) bool, part func([]E) kmsg.Request) error {
	brokers := v.Brokers()
	if len(brokers) == 0 {
		return ErrNoBrokers
	}
	refused := answer{code: kerr.InvalidReplicaAssignment.Code, msg: whyAssignment}
	splitBatch(p, b, version, entries, func(e *E) (int32, answer) {
		if assigned(e) {
			return -1, refused
		}
		return brokers[0], answer{}
	}, part)
	for i := range p.Parts {
		p.Parts[i].Any = true
	}
	return nil
}

func splitCreateTopics(p *Plan, r *kmsg.CreateTopicsRequest, v View) error {
	return splitUnassigned(p, &createTopics, v, r.Version, r.Topics,
		func(e *kmsg.CreateTopicsRequestTopic) bool { return len(e.ReplicaAssignment) > 0 },
		func(es []kmsg.CreateTopicsRequestTopic) kmsg.Request {
			q := *r
			q.Topics = es
			return &q
		})
}

func splitCreatePartitions(p *Plan, r *kmsg.CreatePartitionsRequest, v View) error {
	return splitUnassigned(p, &createPartitions, v, r.Version, r.Topics,
		func(e *kmsg.CreatePartitionsRequestTopic) bool { return len(e.Assignment) > 0 },
		func(es []kmsg.CreatePartitionsRequestTopic) kmsg.Request {
			q := *r
			q.Topics = es
			return &q
		})
}
