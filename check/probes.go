package check

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/pipeprobe"
)

// property is one thing the check probes.
type property struct {
	name  string // shown in reports
	id    string // appended to ClientIDPrefix for the probe connection
	probe func(r *run, ctx context.Context, p *Property, ev *evidence) error
}

// Property names, in the order they run.
const (
	PropProduceAcksAll    = "produce acks=all"
	PropProduceAcksLeader = "produce acks=1"
	PropIdempotent        = "idempotent produce"
	PropOffsetCommit      = "offset commit"
	PropMixed             = "mixed requests"
)

var properties = []property{
	{PropProduceAcksAll, "produce-acks-all", func(r *run, ctx context.Context, p *Property, ev *evidence) error {
		return r.probeProduce(ctx, p, ev, partAcksAll, -1, false)
	}},
	{PropProduceAcksLeader, "produce-acks-1", func(r *run, ctx context.Context, p *Property, ev *evidence) error {
		return r.probeProduce(ctx, p, ev, partAcksLeader, 1, false)
	}},
	{PropIdempotent, "idempotent", func(r *run, ctx context.Context, p *Property, ev *evidence) error {
		return r.probeProduce(ctx, p, ev, partIdempotent, -1, true)
	}},
	{PropOffsetCommit, "offset-commit", (*run).probeCommit},
	{PropMixed, "mixed", (*run).probeMixed},
}

// PropertyClientID returns the client id of the probe connection of the
// property named name, or "" if there is none.
func PropertyClientID(name string) string {
	for _, p := range properties {
		if p.name == name {
			return ClientIDPrefix + "-" + p.id
		}
	}
	return ""
}

// PropertyNames returns the properties a run checks, in order.
func PropertyNames() []string {
	names := make([]string, len(properties))
	for i, p := range properties {
		names[i] = p.name
	}
	return names
}

func (r *run) probe(ctx context.Context, prop property) (Property, error) {
	p := Property{Name: prop.name, ClientID: ClientIDPrefix + "-" + prop.id, Requests: r.opts.Requests}
	r.progress("%s: %d requests", p.Name, p.Requests)
	start := time.Now()
	var ev evidence
	if err := prop.probe(r, ctx, &p, &ev); err != nil {
		return p, err
	}
	p.Seconds = time.Since(start).Seconds()
	ev.finish(&p)
	verdict := "holds"
	if !p.Holds {
		verdict = "VIOLATED"
	}
	r.progress("%s: %s (%.1fs)", p.Name, verdict, p.Seconds)
	return p, nil
}

// pipeline runs reqs on one connection to addr for the property p.
func (r *run) pipeline(ctx context.Context, p *Property, addr string, reqs []kmsg.Request, window int) (pipeprobe.PipelineResult, error) {
	n := len(reqs)
	step := 0
	res, err := pipeprobe.Pipeline(ctx, addr, reqs, pipeprobe.PipelineOptions{
		Window:   window,
		Seed:     rand.Uint64() | 1,
		ClientID: p.ClientID,
		Progress: func(done int) {
			// A line at each quarter.
			if q := 4 * done / n; q > step {
				step = q
				r.progress("%s: %d/%d responses", p.Name, done, n)
			}
		},
	})
	if err != nil {
		return res, cannotRun(fmt.Sprintf("%s: pipelining %d requests to %s (%d answered)", p.Name, n, addr, len(res.Arrived)), err)
	}
	return res, nil
}

func (r *run) produceSpec(part int32, acks int16) pipeprobe.ProduceSpec {
	return pipeprobe.ProduceSpec{
		Topic: r.topic, Partition: part, Timestamp: r.runStartMilli,
		Version: r.versions[0], Acks: acks, Timeout: 30 * time.Second,
	}
}

// probeProduce pipelines Produce requests to one partition, request i
// carrying the value i, and checks the responses' order, their base
// offsets and the log. An idempotent run numbers the batches 0, 1, ...
// with one producer id, and keeps IdempotentWindow in flight.
func (r *run) probeProduce(ctx context.Context, p *Property, ev *evidence, part int32, acks int16, idempotent bool) error {
	n := r.opts.Requests
	spec := r.produceSpec(part, acks)
	window := r.opts.Window
	if idempotent {
		spec.Producer = &r.producer
		window = IdempotentWindow
	}
	reqs := make([]kmsg.Request, n)
	for i := range n {
		spec.Value = []byte(strconv.Itoa(i))
		spec.Sequence = int32(i)
		reqs[i] = pipeprobe.NewProduce(spec)
	}
	res, err := r.pipeline(ctx, p, r.leaders[part], reqs, window)
	if err != nil {
		return err
	}
	label := func(seq int) string { return "write " + strconv.Itoa(seq) }
	ev.responseOrder(res, label)
	offsets, codes := r.produceResults(res, part, func(seq int) int { return seq })
	ev.errorCodes(codes, label)
	ev.appendOrder(offsets)
	// An idempotent producer's log must hold every batch, once: a write
	// refused for its sequence is a gap.
	return r.checkLog(ctx, p, ev, part, offsets, idempotent)
}

// produceResults returns, for each write (numbered by index), its base
// offset (-1 if it failed) and error code.
func (r *run) produceResults(res pipeprobe.PipelineResult, part int32, index func(seq int) int) ([]int64, map[int]int16) {
	var offsets []int64
	codes := make(map[int]int16)
	for seq, x := range res.Exchanges {
		resp, ok := x.Resp.(*kmsg.ProduceResponse)
		if !ok {
			continue
		}
		i := index(seq)
		for len(offsets) <= i {
			offsets = append(offsets, -1)
		}
		code := kerr.UnknownServerError.Code // a response that lacks the partition
		for _, t := range resp.Topics {
			for _, pr := range t.Partitions {
				if t.Topic == r.topic && pr.Partition == part {
					code = pr.ErrorCode
					if code == 0 {
						offsets[i] = pr.BaseOffset
					}
				}
			}
		}
		codes[i] = code
	}
	return offsets, codes
}

// checkLog reads the partition back and compares it with the writes that
// were acknowledged (offsets[i] >= 0), or with every write sent if all.
func (r *run) checkLog(ctx context.Context, p *Property, ev *evidence, part int32, offsets []int64, all bool) error {
	expected := make([]bool, len(offsets))
	want := int64(0)
	for i, off := range offsets {
		if off >= 0 || all {
			expected[i] = true
			want++
		}
	}
	start := r.startOffsets[part]
	// With acks=1 on a replicated topic the high watermark may trail the
	// acknowledged writes for a moment; wait for it, within bounds.
	end := start
	for deadline := time.Now().Add(10 * time.Second); ; {
		hwm, err := pipeprobe.HighWatermark(ctx, r.admin, r.topic, part)
		if err != nil {
			return cannotRun(fmt.Sprintf("%s: listing offsets of %s/%d", p.Name, r.topic, part), err)
		}
		end = hwm
		if hwm-start >= want || all || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	values, err := pipeprobe.ReadRange(ctx, r.opts.Bootstrap, r.topic, part, start, end,
		kgo.ClientID(ClientIDPrefix+"-read"), kgo.DialTimeout(r.opts.DialTimeout))
	if err != nil {
		return cannotRun(fmt.Sprintf("%s: reading %s/%d back", p.Name, r.topic, part), err)
	}
	ev.logOrder(values, start, expected)
	return nil
}

// probeCommit pipelines OffsetCommit requests for one partition of the
// group with increasing offsets 1..n, then fetches the committed offset on
// a new connection: the last commit sent must be the one that stands.
func (r *run) probeCommit(ctx context.Context, p *Property, ev *evidence) error {
	n := r.opts.Requests
	reqs := make([]kmsg.Request, n)
	for i := range n {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = r.versions[8]
		req.Group = r.group
		req.Generation = -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = r.topic
		pt := kmsg.NewOffsetCommitRequestTopicPartition()
		pt.Partition = partAcksAll
		pt.Offset = int64(i + 1)
		pt.LeaderEpoch = -1
		pt.Metadata = kmsg.StringPtr(ClientIDPrefix)
		t.Partitions = append(t.Partitions, pt)
		req.Topics = append(req.Topics, t)
		reqs[i] = req
	}
	res, err := r.pipeline(ctx, p, r.coordinator, reqs, r.opts.Window)
	if err != nil {
		return err
	}
	label := func(seq int) string { return "commit of offset " + strconv.Itoa(seq+1) }
	ev.responseOrder(res, label)
	codes := make(map[int]int16)
	for seq, x := range res.Exchanges {
		resp := x.Resp.(*kmsg.OffsetCommitResponse)
		codes[seq] = kerr.UnknownServerError.Code
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if t.Topic == r.topic && pt.Partition == partAcksAll {
					codes[seq] = pt.ErrorCode
				}
			}
		}
	}
	ev.errorCodes(codes, label)

	got, err := r.fetchCommitted(ctx)
	if err != nil {
		return cannotRun(p.Name+": fetching the committed offset", err)
	}
	if got != int64(n) {
		ev.violation(CountCommitLost, 1, fmt.Sprintf("offset %d stands after commits of 1..%d in order (the last, %d, was overtaken)", got, n, n))
	} else {
		ev.held(fmt.Sprintf("the last of %d commits (offset %d) stands", n, n))
	}
	return nil
}

func (r *run) fetchCommitted(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = r.versions[9]
	req.Group = r.group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = r.topic
	t.Partitions = []int32{partAcksAll}
	req.Topics = append(req.Topics, t)
	dctx, cancel := context.WithTimeout(ctx, r.opts.DialTimeout+30*time.Second)
	defer cancel()
	kresp, err := pipeprobe.Do(dctx, r.coordinator, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, pt := range t.Partitions {
			if t.Topic == r.topic && pt.Partition == partAcksAll {
				if err := kerr.ErrorForCode(pt.ErrorCode); err != nil {
					return 0, err
				}
				return pt.Offset, nil
			}
		}
	}
	return 0, fmt.Errorf("the response lacks %s/%d", r.topic, partAcksAll)
}

// mixCycle is the repeating pattern of the mixed property: a write, then
// two requests that a backend might answer from memory, out of turn.
const mixCycle = 3

// probeMixed pipelines Produce (acks=1), Metadata and ApiVersions in turn
// on one connection: every response must come back in order, and the
// writes must land in order.
func (r *run) probeMixed(ctx context.Context, p *Property, ev *evidence) error {
	n := r.opts.Requests
	spec := r.produceSpec(partMixed, 1)
	reqs := make([]kmsg.Request, n)
	for i := range n {
		switch i % mixCycle {
		case 0:
			spec.Value = []byte(strconv.Itoa(i / mixCycle))
			reqs[i] = pipeprobe.NewProduce(spec)
		case 1:
			req := kmsg.NewPtrMetadataRequest()
			req.Version = r.versions[3]
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(r.topic)
			req.Topics = append(req.Topics, mt)
			reqs[i] = req
		case 2:
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = r.versions[18]
			req.ClientSoftwareName = "inorder-check"
			req.ClientSoftwareVersion = "1"
			reqs[i] = req
		}
	}
	res, err := r.pipeline(ctx, p, r.leaders[partMixed], reqs, r.opts.Window)
	if err != nil {
		return err
	}
	label := func(seq int) string {
		return fmt.Sprintf("request %d (%s)", seq, kmsg.NameForKey(reqs[seq].Key()))
	}
	ev.responseOrder(res, label)
	offsets, codes := r.produceResults(res, partMixed, func(seq int) int { return seq / mixCycle })
	ev.errorCodes(codes, func(i int) string { return "write " + strconv.Itoa(i) })
	ev.appendOrder(offsets)
	return r.checkLog(ctx, p, ev, partMixed, offsets, false)
}
