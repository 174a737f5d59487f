package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/wire"
)

// Partitions of the check's topic, one per property that writes, so that
// each property's records are alone in their partition.
const (
	partAcksAll int32 = iota
	partAcksLeader
	partIdempotent
	partMixed
	topicPartitions
)

// The highest versions the probes send: past them a request names topics
// by id (Produce v13, OffsetCommit v10) or groups in a list (OffsetFetch
// v8), which the probes do not build.
var maxVersions = map[int16]int16{
	0:  12, // Produce
	3:  12, // Metadata
	8:  9,  // OffsetCommit
	9:  7,  // OffsetFetch
	18: 3,  // ApiVersions
}

// minVersions are the lowest the probes can use: record batches need
// Produce v3, an OffsetCommit without a group generation v1.
var minVersions = map[int16]int16{0: 3, 3: 1, 8: 2, 9: 1, 18: 0}

// run is one check in progress.
type run struct {
	opts Options
	rep  Report

	admin    *kgo.Client
	versions map[int16]int16 // key to the version the probes send

	topic, group  string
	createdTopic  bool
	freshGroup    bool
	leaders       [topicPartitions]string // partition to leader address
	coordinator   string
	producer      pipeprobe.Producer
	startOffsets  [topicPartitions]int64
	runStartMilli int64
}

func (r *run) run(ctx context.Context) error {
	if err := r.negotiate(ctx); err != nil {
		return err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(r.opts.Bootstrap),
		kgo.ClientID(ClientIDPrefix+"-admin"),
		kgo.DialTimeout(r.opts.DialTimeout),
	)
	if err != nil {
		return &CannotRunError{Reason: ReasonFailed, Step: "starting the admin client", Err: err}
	}
	r.admin = cl
	defer cl.Close()
	defer r.cleanup()
	if err := r.setup(ctx); err != nil {
		return err
	}
	r.runStartMilli = time.Now().UnixMilli()
	for _, p := range properties {
		prop, err := r.probe(ctx, p)
		if err != nil {
			return err
		}
		r.rep.Properties = append(r.rep.Properties, prop)
	}
	return nil
}

// negotiate asks the bootstrap address for its versions on a raw
// connection: the first contact, so an unreachable address fails fast.
func (r *run) negotiate(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, r.opts.DialTimeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "inorder-check"
	req.ClientSoftwareVersion = "1"
	kresp, err := pipeprobe.Do(dctx, r.opts.Bootstrap, req)
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		// Every Kafka listener answers ApiVersions first, SASL ones
		// included; a TLS server that reads plaintext closes without a
		// word (Go's crypto/tls does).
		err = fmt.Errorf("the address closed the connection without answering ApiVersions, which every Kafka listener answers (%w): a TLS listener (the check speaks plaintext only), or not a Kafka port", err)
	}
	if err != nil {
		return cannotRun("asking "+r.opts.Bootstrap+" for its API versions", err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.UnsupportedVersion) {
		return cannotRun("asking "+r.opts.Bootstrap+" for its API versions", err)
	}
	served := make(map[int16]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		served[k.ApiKey] = k.MaxVersion
	}
	if err := r.probeAuth(ctx); err != nil {
		return err
	}
	r.versions = make(map[int16]int16, len(maxVersions))
	for key, want := range maxVersions {
		have, ok := served[key]
		if !ok || have < minVersions[key] {
			return &CannotRunError{Reason: ReasonUnsupported, Step: "negotiating versions",
				Err: fmt.Errorf("%s v%d or later is not served", kmsg.NameForKey(key), minVersions[key])}
		}
		r.versions[key] = min(want, have)
	}
	return nil
}

// probeAuth sends a Metadata request without authenticating. A broker
// that requires SASL answers ApiVersions but closes the connection on
// anything else before authentication, and kgo would retry that for its
// whole retry timeout; this says why at once.
func (r *run) probeAuth(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, r.opts.DialTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1 // an empty topic list asks for none; every broker serves v1
	_, err := pipeprobe.Do(dctx, r.opts.Bootstrap, req)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &CannotRunError{Reason: ReasonUnauthorized, Step: "sending Metadata before authenticating",
			Err: fmt.Errorf("the broker closed the connection (%v): it likely requires SASL, which the check does not speak", err)}
	}
	if err != nil {
		return cannotRun("sending Metadata to "+r.opts.Bootstrap, err)
	}
	return nil
}

func (r *run) setup(ctx context.Context) error {
	r.topic, r.group = r.opts.Topic, r.opts.Group
	if r.topic == "" {
		r.topic = freshName()
	}
	if r.group == "" {
		r.group, r.freshGroup = freshName(), true
	}
	r.rep.Topic, r.rep.Group = r.topic, r.group
	r.progress("%s: topic %s, group %s, %d requests per property", r.opts.Bootstrap, r.topic, r.group, r.opts.Requests)
	if err := r.createTopic(ctx); err != nil {
		return err
	}
	if err := r.findLeaders(ctx); err != nil {
		return err
	}
	if err := r.findCoordinator(ctx); err != nil {
		return err
	}
	if err := r.initProducer(ctx); err != nil {
		return err
	}
	for p := range topicPartitions {
		off, err := pipeprobe.HighWatermark(ctx, r.admin, r.topic, p)
		if err != nil {
			return cannotRun(fmt.Sprintf("listing offsets of %s/%d", r.topic, p), err)
		}
		r.startOffsets[p] = off
	}
	return nil
}

func (r *run) createTopic(ctx context.Context) error {
	step := "creating topic " + r.topic
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = r.topic
	t.NumPartitions = topicPartitions
	t.ReplicationFactor = -1 // the backend's default
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, r.admin)
	if err != nil {
		return cannotRun(step, err)
	}
	if len(resp.Topics) != 1 {
		return cannotRun(step, fmt.Errorf("%d topics in the response", len(resp.Topics)))
	}
	err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	switch {
	case err == nil:
		r.createdTopic = true
	case errors.Is(err, kerr.TopicAlreadyExists) && r.opts.Topic != "":
		// A named topic may exist; findLeaders checks its partitions.
	default:
		return cannotRun(step, err)
	}
	return nil
}

// findLeaders waits until every partition of the topic has a leader and
// records its address: a topic just created takes a moment to elect them.
func (r *run) findLeaders(ctx context.Context) error {
	step := "looking up the leaders of " + r.topic
	return retry(ctx, step, func() (bool, error) {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(r.topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil {
			return false, err
		}
		brokers := make(map[int32]string, len(resp.Brokers))
		for _, b := range resp.Brokers {
			brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if len(resp.Topics) != 1 {
			return false, nil
		}
		t := resp.Topics[0]
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return retriable(err), err
		}
		if len(t.Partitions) < int(topicPartitions) {
			if len(t.Partitions) > 0 && !r.createdTopic {
				return false, fmt.Errorf("topic %s has %d partitions; the check needs %d", r.topic, len(t.Partitions), topicPartitions)
			}
			return true, nil
		}
		for _, p := range t.Partitions {
			if p.Partition < 0 || p.Partition >= topicPartitions {
				continue
			}
			addr, ok := brokers[p.Leader]
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil || !ok {
				return true, fmt.Errorf("partition %d has no leader yet (%v)", p.Partition, err)
			}
			r.leaders[p.Partition] = addr
		}
		return false, nil
	})
}

func (r *run) findCoordinator(ctx context.Context) error {
	step := "finding the coordinator of group " + r.group
	return retry(ctx, step, func() (bool, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = r.group
		req.CoordinatorKeys = []string{r.group}
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil {
			return false, err
		}
		code, host, port := resp.ErrorCode, resp.Host, resp.Port
		if len(resp.Coordinators) > 0 {
			c := resp.Coordinators[0]
			code, host, port = c.ErrorCode, c.Host, c.Port
		}
		if err := kerr.ErrorForCode(code); err != nil {
			// Kafka creates its offsets topic on the first lookup and
			// answers COORDINATOR_NOT_AVAILABLE until it is ready.
			return retriable(err), err
		}
		r.coordinator = net.JoinHostPort(host, strconv.Itoa(int(port)))
		return false, nil
	})
}

func (r *run) initProducer(ctx context.Context) error {
	step := "initialising an idempotent producer id"
	return retry(ctx, step, func() (bool, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60_000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil {
			return false, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return retriable(err), err
		}
		r.producer = pipeprobe.Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}
		return false, nil
	})
}

// cleanup deletes what the run created. It runs on its own short context:
// a run cut by its timeout should still not leave its topic behind.
func (r *run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if r.freshGroup && r.group != "" {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{r.group}
		if _, err := req.RequestWith(ctx, r.admin); err != nil {
			r.progress("could not delete group %s: %v", r.group, err)
		}
	}
	if r.createdTopic {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 15_000
		req.TopicNames = []string{r.topic}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(r.topic)
		req.Topics = append(req.Topics, dt)
		resp, err := req.RequestWith(ctx, r.admin)
		if err == nil && len(resp.Topics) == 1 {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err != nil {
			r.progress("could not delete topic %s: %v", r.topic, err)
		}
	}
}

// retry calls try until it reports no error or an error not worth
// retrying, waiting a little between attempts, for at most 30 seconds.
func retry(ctx context.Context, step string, try func() (again bool, err error)) error {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		again, err := try()
		if err == nil && !again {
			return nil
		}
		if !again || time.Now().After(deadline) {
			if err == nil {
				err = errors.New("no answer in time")
			}
			return cannotRun(step, err)
		}
		select {
		case <-ctx.Done():
			return cannotRun(step, fmt.Errorf("%w (last: %v)", ctx.Err(), err))
		case <-time.After(wait):
		}
	}
}

// retriable reports whether a Kafka error is one a fresh topic, group or
// producer id shows for a moment.
func retriable(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// cannotRun classifies err into the reason a check could not run.
func cannotRun(step string, err error) error {
	var cre *CannotRunError
	if errors.As(err, &cre) {
		return err
	}
	if nk, ok := errors.AsType[*wire.NotKafkaError](err); ok {
		return &CannotRunError{Reason: ReasonNotKafka, Step: step, Err: notKafka(nk)}
	}
	reason := ReasonFailed
	var (
		ke *kerr.Error
		op *net.OpError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		reason = ReasonUnauthorized
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.DelegationTokenAuthorizationFailed):
		reason = ReasonPermission
	case errors.As(err, &ke):
	case errors.As(err, &op) && op.Op == "dial":
		reason = ReasonUnreachable
	}
	return &CannotRunError{Reason: reason, Step: step, Err: err}
}

// notKafka says what answered in place of a Kafka broker and where to
// point the check instead.
func notKafka(nk *wire.NotKafkaError) error {
	switch nk.Protocol {
	case wire.HTTPResponse, wire.HTTPRequest:
		return errors.New("the address answered HTTP: it is not a Kafka port (an HTTP endpoint, such as inorder's --admin-listen); give --bootstrap a Kafka listener")
	case wire.TLSAlert, wire.TLSHandshake:
		return fmt.Errorf("the address answered with %s: the broker speaks TLS, and the check speaks plaintext only; give --bootstrap a plaintext listener, or inorder in front of the broker (with --upstream-tls)", strings.TrimSuffix(nk.Error(), ", not a Kafka frame"))
	}
	return nk
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "inorder check: "+format+"\n", args...)
	}
}
