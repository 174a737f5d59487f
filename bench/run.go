package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sample is what one target did in one round.
type Sample struct {
	// Elapsed is the measured window.
	Elapsed time.Duration

	// Produced and ProducedBytes count acknowledged records and their
	// value bytes within the window; ProduceErrors counts failed ones.
	Produced      int64
	ProducedBytes int64
	ProduceErrors int64
	// P50, P99 and P999 are produce latencies, from handing the record to
	// the client to its acknowledgement.
	P50, P99, P999 time.Duration

	// Consumed and ConsumedBytes count fetched records and value bytes.
	Consumed      int64
	ConsumedBytes int64

	// CPU is the CPU time of the target's process in Options.CPUPIDs over
	// the window; zero when it has none.
	CPU time.Duration
	// PeakRSS is the highest resident memory of that process sampled
	// through the window, in bytes; zero when it has none.
	PeakRSS int64
}

// CPUPerGB is CPU seconds of the target's process per 10^9 value bytes
// produced and consumed.
func (s Sample) CPUPerGB() float64 {
	b := s.ProducedBytes + s.ConsumedBytes
	if b == 0 {
		return 0
	}
	return s.CPU.Seconds() / (float64(b) / 1e9)
}

// ProduceRate is acknowledged records per second.
func (s Sample) ProduceRate() float64 { return perSec(float64(s.Produced), s.Elapsed) }

// ProduceMBps is acknowledged value megabytes (10^6) per second.
func (s Sample) ProduceMBps() float64 { return perSec(float64(s.ProducedBytes)/1e6, s.Elapsed) }

// ConsumeRate is fetched records per second.
func (s Sample) ConsumeRate() float64 { return perSec(float64(s.Consumed), s.Elapsed) }

// ConsumeMBps is fetched value megabytes (10^6) per second.
func (s Sample) ConsumeMBps() float64 { return perSec(float64(s.ConsumedBytes)/1e6, s.Elapsed) }

func perSec(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Seconds()
}

// TargetResult holds every round of one target.
type TargetResult struct {
	Target Target
	Rounds []Sample
}

// Result is what Run measured, target by target in the order of
// Options.Targets.
type Result struct {
	Options Options
	Targets []TargetResult
}

// Run runs the workload against every target in every round and writes a
// report to w. It returns the result measured so far along with the first
// error, which includes failed produces: a benchmark that drops records
// measures nothing.
func Run(ctx context.Context, o Options, w io.Writer) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	o.fill()
	res = Result{Options: o}
	for _, t := range o.Targets {
		res.Targets = append(res.Targets, TargetResult{Target: t})
	}
	created := make([]bool, len(o.Targets))
	if !o.KeepTopic {
		defer func() {
			if derr := deleteCreated(o, created); err == nil {
				err = derr
			}
		}()
	}
	payload := newPayload(o.RecordBytes, o.Compressible)
	for round := 0; round < o.Rounds; round++ {
		if o.BeforeRound != nil {
			if err := o.BeforeRound(ctx, round+1); err != nil {
				return res, fmt.Errorf("before round %d: %w", round+1, err)
			}
		}
		// Each round starts with the next target, so that none is
		// always the one run right after a quiet moment or right
		// after the heaviest path.
		for k := range o.Targets {
			i := (round + k) % len(o.Targets)
			s, err := runOnce(ctx, o, o.Targets[i], payload, round, &created[i])
			if err != nil {
				return res, fmt.Errorf("%s, round %d: %w", o.Targets[i].label(), round+1, err)
			}
			res.Targets[i].Rounds = append(res.Targets[i].Rounds, s)
		}
	}
	if w != nil {
		if err := res.Write(w, o.Format); err != nil {
			return res, err
		}
	}
	return res, nil
}

// payload hands out record values. Values are consecutive windows of one
// random buffer larger than any batch, so no two values in a batch are alike
// and no codec finds anything to squeeze, without generating bytes per
// record.
type payload struct {
	buf  []byte
	size int
	next atomic.Int64
}

func newPayload(size int, compressible bool) *payload {
	n := max(16<<20, 4*size)
	buf := make([]byte, n)
	if compressible {
		for i := range buf {
			buf[i] = byte('a' + i%26)
		}
	} else {
		r := rand.NewChaCha8([32]byte{'i', 'n', 'o', 'r', 'd', 'e', 'r'})
		_, _ = r.Read(buf)
	}
	return &payload{buf: buf, size: size}
}

func (p *payload) value() []byte {
	slots := int64(len(p.buf) / max(p.size, 1))
	off := (p.next.Add(1) % slots) * int64(p.size)
	return p.buf[off : off+int64(p.size) : off+int64(p.size)]
}

// counters are shared between the driving goroutine, kgo's promise
// goroutines and the progress ticker.
type counters struct {
	// flowing closes when the target moves its first record, measured or
	// not; see waitFlowing.
	flowing       chan struct{}
	flowOnce      sync.Once
	measuring     atomic.Bool
	produced      atomic.Int64
	producedBytes atomic.Int64
	produceErrs   atomic.Int64
	firstErr      atomic.Pointer[error]
	consumed      atomic.Int64
	consumedBytes atomic.Int64
	lat           Hist
}

func (c *counters) flowed() {
	c.flowOnce.Do(func() { close(c.flowing) })
}

// flowWait bounds how long, past the warmup, a round waits for a target to
// move its first record before measuring anyway.
const flowWait = 30 * time.Second

// waitFlowing returns once the target has moved a record, or flowWait
// has passed, so that a slow start (a loaded machine, a consumer still
// finding its offsets) is spent warming up rather than measured as a
// target that moves nothing. It reports false if ctx ended.
func (c *counters) waitFlowing(ctx context.Context) bool {
	t := time.NewTimer(flowWait)
	defer t.Stop()
	select {
	case <-c.flowing:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

func (c *counters) fail(err error) {
	c.produceErrs.Add(1)
	c.firstErr.CompareAndSwap(nil, &err)
}

// inflight carries a record's send time through kgo: kgo truncates
// Record.Timestamp to milliseconds, too coarse for latency, so the time rides
// in the record's context, allocated with the record. It is not pooled: kgo
// may still look at a record's context after its promise ran.
type inflight struct {
	context.Context
	rec   kgo.Record
	start time.Time
}

// runOnce runs the workload once against t; it sets *created when it
// created the topic.
func runOnce(ctx context.Context, o Options, t Target, p *payload, round int, created *bool) (Sample, error) {
	opts := append(t.clientOpts(),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.ProducerLinger(o.Linger),
		kgo.ProducerBatchCompression(mustCodec(o.Compression)),
		kgo.FetchMaxBytes(o.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(o.FetchPartitionBytes),
	)
	switch o.Acks {
	case -1:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case 0:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !o.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(o.MaxInFlight))
	}
	if o.Consume {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if o.Partitioner == "round-robin" {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return Sample{}, err
	}
	defer cl.Close()

	if err := prepare(ctx, cl, o, created); err != nil {
		return Sample{}, err
	}
	if o.Consume {
		// Only now: a consumer that looked for the topic before prepare
		// created it would back off before looking again.
		cl.AddConsumeTopics(o.Topic)
	}

	c := counters{flowing: make(chan struct{})}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	promise := func(r *kgo.Record, err error) {
		f := r.Context.(*inflight)
		if err == nil {
			c.flowed()
		}
		if c.measuring.Load() {
			if err != nil {
				c.fail(err)
			} else {
				c.produced.Add(1)
				c.producedBytes.Add(int64(len(r.Value)))
				c.lat.Record(time.Since(f.start))
			}
		}
	}

	first := phaseWarmup
	if o.Records > 0 {
		first = phaseMeasure
	}
	rc := newRoundClock(first, time.Now())
	stopProgress := progress(o, t, round, &c, rc)
	defer stopProgress()

	if o.Records > 0 {
		return runCount(runCtx, cl, o, t, p, &c, promise, rc)
	}

	c.measuring.Store(o.Warmup == 0)
	var wg sync.WaitGroup
	if o.Produce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produceLoop(runCtx, cl, o, p, promise, 0)
		}()
	}
	if o.Consume {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumeLoop(runCtx, cl, &c, o.Rate)
		}()
	}
	if !sleepCtx(ctx, o.Warmup) {
		return Sample{}, ctx.Err()
	}
	rc.enter(phaseWaitFlow, time.Now())
	if !c.waitFlowing(ctx) {
		return Sample{}, ctx.Err()
	}
	pid, err := o.pidOf(t.label())
	if err != nil {
		return Sample{}, err
	}
	cpu0, err := cpuOf(pid)
	if err != nil {
		return Sample{}, err
	}
	rss := watchRSS(pid)
	c.measuring.Store(true)
	start := time.Now()
	rc.enter(phaseMeasure, start)
	if !sleepCtx(ctx, o.Duration) {
		rss()
		return Sample{}, ctx.Err()
	}
	c.measuring.Store(false)
	end := time.Now()
	rc.enter(phaseDone, end)
	elapsed := end.Sub(start)
	peak := rss()
	cpu1, err := cpuOf(pid)
	if err != nil {
		return Sample{}, err
	}
	cancel()
	wg.Wait()
	s, err := c.sample(elapsed)
	s.CPU, s.PeakRSS = cpu1-cpu0, peak
	return s, err
}

// rssEvery is how often watchRSS samples resident memory.
const rssEvery = 50 * time.Millisecond

// watchRSS samples the resident memory of process pid until the function
// it returns is called, which returns the highest sample; with pid 0 it
// samples nothing and returns 0.
func watchRSS(pid int) func() int64 {
	if pid == 0 {
		return func() int64 { return 0 }
	}
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var hi int64
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			if n, err := ProcessRSS(pid); err == nil {
				hi = max(hi, n)
			}
			select {
			case <-stop:
				peak <- hi
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-peak
	}
}

func cpuOf(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	return ProcessCPU(pid)
}

func (c *counters) sample(elapsed time.Duration) (Sample, error) {
	s := Sample{
		Elapsed:       elapsed,
		Produced:      c.produced.Load(),
		ProducedBytes: c.producedBytes.Load(),
		ProduceErrors: c.produceErrs.Load(),
		P50:           c.lat.Quantile(0.50),
		P99:           c.lat.Quantile(0.99),
		P999:          c.lat.Quantile(0.999),
		Consumed:      c.consumed.Load(),
		ConsumedBytes: c.consumedBytes.Load(),
	}
	if e := c.firstErr.Load(); e != nil {
		return s, fmt.Errorf("%d records failed, the first with: %w", s.ProduceErrors, *e)
	}
	return s, nil
}

// runCount produces exactly o.Records records and times them from the first
// send to the last acknowledgement.
func runCount(ctx context.Context, cl *kgo.Client, o Options, t Target, p *payload, c *counters, promise func(*kgo.Record, error), rc *roundClock) (Sample, error) {
	pid, err := o.pidOf(t.label())
	if err != nil {
		return Sample{}, err
	}
	cpu0, err := cpuOf(pid)
	if err != nil {
		return Sample{}, err
	}
	rss := watchRSS(pid)
	c.measuring.Store(true)
	start := time.Now()
	rc.enter(phaseMeasure, start)
	produceLoop(ctx, cl, o, p, promise, o.Records)
	if err := cl.Flush(ctx); err != nil {
		rss()
		return Sample{}, err
	}
	end := time.Now()
	rc.enter(phaseDone, end)
	elapsed := end.Sub(start)
	peak := rss()
	cpu1, err := cpuOf(pid)
	if err != nil {
		return Sample{}, err
	}
	s, err := c.sample(elapsed)
	s.CPU, s.PeakRSS = cpu1-cpu0, peak
	return s, err
}

// produceLoop sends until ctx ends or, with limit set, limit records were
// sent. With a rate it sends what is due every 100µs rather than sleeping
// per record, since timers are far coarser than a record's interval.
func produceLoop(ctx context.Context, cl *kgo.Client, o Options, p *payload, promise func(*kgo.Record, error), limit int64) {
	start := time.Now()
	var sent int64
	for ctx.Err() == nil && (limit == 0 || sent < limit) {
		if o.Rate > 0 {
			due := int64(o.Rate * time.Since(start).Seconds())
			if sent >= due {
				time.Sleep(100 * time.Microsecond)
				continue
			}
		}
		f := &inflight{Context: ctx, start: time.Now()}
		f.rec = kgo.Record{Value: p.value(), Context: f}
		cl.Produce(ctx, &f.rec, promise)
		sent++
	}
}

// consumeLoop polls until ctx ends. With a rate it polls only while fewer
// records than are due have been taken: a kgo client fetches from a broker
// again only once what it fetched before has been polled, so the fetches,
// and the bytes the path carries, follow the polls.
func consumeLoop(ctx context.Context, cl *kgo.Client, c *counters, rate float64) {
	start := time.Now()
	var taken int64
	for ctx.Err() == nil {
		if rate > 0 && taken >= int64(rate*time.Since(start).Seconds()) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		fs := cl.PollFetches(ctx)
		n := int64(fs.NumRecords())
		taken += n
		if n > 0 {
			c.flowed()
		}
		if !c.measuring.Load() {
			continue
		}
		var b int64
		fs.EachRecord(func(r *kgo.Record) {
			b += int64(len(r.Value))
		})
		c.consumed.Add(n)
		c.consumedBytes.Add(b)
	}
}

// prepare creates the topic if asked, setting *created when it did, and
// waits until the client knows its leaders, so that connection set-up falls
// outside the measurement.
func prepare(ctx context.Context, cl *kgo.Client, o Options, created *bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(o.Topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("metadata: %d topics in the answer, want 1", len(resp.Topics))
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		switch {
		case err == nil && len(resp.Topics[0].Partitions) > 0:
			return pingLeaders(ctx, cl, resp)
		case errors.Is(err, kerr.UnknownTopicOrPartition) && o.CreateTopic:
			made, err := createTopic(ctx, cl, o)
			if err != nil {
				return err
			}
			*created = *created || made
		case err != nil && !kerr.IsRetriable(err):
			return fmt.Errorf("metadata for %s: %w", o.Topic, err)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("topic %s not ready: %w", o.Topic, ctx.Err())
		}
	}
}

// createTopic creates the topic and reports whether this call created it
// (false when it already existed).
func createTopic(ctx context.Context, cl *kgo.Client, o Options) (bool, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = o.Topic
	rt.NumPartitions = int32(o.Partitions)
	rt.ReplicationFactor = -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, fmt.Errorf("create topic: %w", err)
	}
	made := false
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil:
			made = true
		case !errors.Is(err, kerr.TopicAlreadyExists):
			return false, fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	return made, nil
}

// deleteCreated deletes the topic from every target where this run
// created it, so that repeated benchmarks do not fill the broker's disk.
// It runs after the measurement, even an interrupted one, with a time
// bound of its own.
func deleteCreated(o Options, created []bool) error {
	var errs []error
	for i, t := range o.Targets {
		if !created[i] {
			continue
		}
		if err := deleteTopic(t, o.Topic); err != nil {
			errs = append(errs, fmt.Errorf("%s: deleting topic %s: %w", t.label(), o.Topic, err))
		} else if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%s: deleted topic %s, which this run created (--keep-topic keeps it)\n", t.label(), o.Topic)
		}
	}
	return errors.Join(errs...)
}

func deleteTopic(t Target, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(t.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return err
		}
	}
	return nil
}

// pingLeaders opens the connection to every partition leader with a cheap
// request, so the first measured second does not pay for dialing.
func pingLeaders(ctx context.Context, cl *kgo.Client, resp *kmsg.MetadataResponse) error {
	seen := make(map[int32]bool)
	for _, p := range resp.Topics[0].Partitions {
		if seen[p.Leader] {
			continue
		}
		seen[p.Leader] = true
		req := kmsg.NewPtrApiVersionsRequest()
		if _, err := cl.Broker(int(p.Leader)).Request(ctx, req); err != nil {
			return fmt.Errorf("reaching leader %d: %w", p.Leader, err)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func mustCodec(name string) kgo.CompressionCodec {
	c, err := codec(name)
	if err != nil {
		panic(err) // Validate has already rejected every unknown name
	}
	return c
}
