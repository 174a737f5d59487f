package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupWorkload is a consumer group of several franz-go members reading a
// topic that an idempotent producer feeds through the proxy. Members commit
// after every poll and when partitions are revoked. Meanwhile the suite
// reads the group's committed offsets directly from the brokers, to see
// that they never move back.
type groupWorkload struct {
	bootstrap, topic, group string
	members                 int
	feeder                  *kgoProducer
	dials                   *dialLog

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	clients []*kgo.Client

	mu         sync.Mutex
	consumed   []Consumed
	resumes    []Resume
	commits    []CommitSample
	commitErrs int
	firstErr   error
	ends       map[int32]int64
	stopErr    error
}

func newGroupWorkload(bootstrap, topic, group string, parts int32, members, rate int, reach map[string]bool) *groupWorkload {
	return &groupWorkload{
		bootstrap: bootstrap, topic: topic, group: group, members: members,
		feeder: newKgoProducer("group feeder", bootstrap, topic, parts, rate, reach),
		dials:  newDialLog(reach),
	}
}

func (w *groupWorkload) Name() string {
	return fmt.Sprintf("consumer group (kgo, %d members)", w.members)
}

// Progress counts records consumed.
func (w *groupWorkload) Progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.consumed)
}

func (w *groupWorkload) Start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range w.members {
		if err := w.startMember(ctx, i); err != nil {
			return err
		}
	}
	w.wg.Add(1)
	go w.watchCommits(ctx)
	return w.feeder.Start(ctx)
}

// member is one group member's view of its assignment.
type member struct {
	id    int
	mu    sync.Mutex
	epoch map[int32]int
	next  int
	// pending holds, for partitions assigned and not yet read from, the
	// committed offset read at assignment.
	pending map[int32]int64
}

func (w *groupWorkload) startMember(ctx context.Context, id int) error {
	m := &member{id: id, epoch: map[int32]int{}, pending: map[int32]int64{}}
	cl, err := kgo.NewClient(clientOpts(w.bootstrap, w.dials,
		kgo.ConsumerGroup(w.group),
		kgo.ConsumeTopics(w.topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, a map[string][]int32) {
			offs, err := kadm.NewClient(cl).FetchOffsets(ctx, w.group)
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[w.topic] {
				m.next++
				m.epoch[p] = m.next
				delete(m.pending, p)
				if err != nil {
					continue // unknown commit: this resume goes unchecked
				}
				at := int64(-1)
				if o, ok := offs.Lookup(w.topic, p); ok {
					if o.Err != nil {
						continue
					}
					at = o.At
				}
				m.pending[p] = at
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			w.commit(ctx, cl)
			m.forget(r[w.topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.forget(l[w.topic])
		}),
	)...)
	if err != nil {
		return err
	}
	w.clients = append(w.clients, cl)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				ep := m.epoch[r.Partition]
				at, first := m.pending[r.Partition]
				delete(m.pending, r.Partition)
				m.mu.Unlock()
				w.mu.Lock()
				if first {
					w.resumes = append(w.resumes, Resume{Member: id, Partition: r.Partition, Committed: at, First: r.Offset})
				}
				w.consumed = append(w.consumed, Consumed{Member: id, Epoch: ep, Partition: r.Partition, Offset: r.Offset, At: now})
				w.mu.Unlock()
			})
			if ctx.Err() == nil {
				w.commit(ctx, cl)
			}
			cl.AllowRebalance()
		}
	}()
	return nil
}

func (m *member) forget(parts []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range parts {
		delete(m.epoch, p)
		delete(m.pending, p)
	}
}

func (w *groupWorkload) commit(ctx context.Context, cl *kgo.Client) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(cctx); err != nil {
		w.mu.Lock()
		w.commitErrs++
		if w.firstErr == nil {
			w.firstErr = err
		}
		w.mu.Unlock()
	}
}

// watchCommits samples the group's committed offsets directly from the
// brokers until the workload ends.
func (w *groupWorkload) watchCommits(ctx context.Context) {
	defer w.wg.Done()
	cl, err := kgo.NewClient(kgo.SeedBrokers(directSeeds()...))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		w.sampleCommits(ctx, adm)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *groupWorkload) sampleCommits(ctx context.Context, adm *kadm.Client) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(sctx, w.group)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == w.topic && o.Err == nil && o.At >= 0 {
			w.commits = append(w.commits, CommitSample{Partition: o.Partition, Offset: o.At, At: now})
		}
	})
}

// committedTo reports whether the last sample of every partition reached ends.
func (w *groupWorkload) committedTo(ends map[int32]int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := make(map[int32]int64)
	for _, s := range w.commits {
		last[s.Partition] = s.Offset
	}
	for p, e := range ends {
		if e > 0 && last[p] < e {
			return false
		}
	}
	return true
}

// Stop stops the feeder, waits, bounded, until the group has committed
// everything it wrote, and closes the members (they leave the group).
func (w *groupWorkload) Stop(ctx context.Context) error {
	err := w.feeder.Stop(ctx)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cl, cerr := kgo.NewClient(kgo.SeedBrokers(directSeeds()...))
	if cerr == nil {
		w.ends, cerr = endOffsets(rctx, cl, w.topic)
		cl.Close()
	}
	cancel()
	if cerr != nil && err == nil {
		err = fmt.Errorf("end offsets of %s: %w", w.topic, cerr)
	}
	if w.ends != nil {
		end := time.Now().Add(90 * time.Second)
		for !w.committedTo(w.ends) && time.Now().Before(end) {
			time.Sleep(300 * time.Millisecond)
		}
		if !w.committedTo(w.ends) && err == nil {
			err = fmt.Errorf("group %s did not commit up to the end offsets within 90 s", w.group)
		}
	}
	w.stopErr = err
	w.Close()
	return err
}

func (w *groupWorkload) Close() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
		for _, cl := range w.clients {
			cl.Close()
		}
		w.clients = nil
		w.cancel = nil
	}
	w.feeder.Close()
}

// commitLog reads the group's offset commits for its topic from the
// brokers' __consumer_offsets, in the order the coordinator appended them.
func (w *groupWorkload) commitLog(ctx context.Context) ([]CommitSample, error) {
	var out []CommitSample
	err := scanTopic(ctx, "__consumer_offsets", false, nil, func(r *kgo.Record) error {
		var k kmsg.OffsetCommitKey
		if r.Value == nil || k.ReadFrom(r.Key) != nil || k.Version > 1 || k.Group != w.group || k.Topic != w.topic {
			return nil // another group, group metadata or a tombstone
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("offset commit at %d/%d: %w", r.Partition, r.Offset, err)
		}
		out = append(out, CommitSample{Partition: k.Partition, Offset: v.Offset, At: r.Timestamp})
		return nil
	})
	return out, err
}

func (w *groupWorkload) Verify(ctx context.Context, faultAt, loadEnd time.Time) Tally {
	feed := w.feeder.Verify(ctx, faultAt, loadEnd)
	w.mu.Lock()
	consumed := append([]Consumed(nil), w.consumed...)
	resumes := append([]Resume(nil), w.resumes...)
	commits := append([]CommitSample(nil), w.commits...)
	commitErrs, firstErr := w.commitErrs, w.firstErr
	w.mu.Unlock()
	ends := w.ends
	if ends == nil {
		ends = map[int32]int64{}
	}
	logged, err := w.commitLog(ctx)
	t := CheckGroup(ends, consumed, resumes, logged)
	if err != nil {
		t.violate("reading the group's commits: %v", err)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d commits in __consumer_offsets", len(logged)))
	if n := Backwards(commits); n > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d of %d reads of the committed offsets (OffsetFetch, directly from the brokers every 300 ms) were below an earlier read", n, len(commits)))
	}
	t.Sent, t.Acked = feed.Sent, feed.Acked
	t.Lost += feed.Lost
	if feed.Duplicated > 0 || feed.Reordered > 0 {
		t.violate("the feeding producer's log has %d duplicates and %d reordered records", feed.Duplicated, feed.Reordered)
	}
	t.Violations = append(t.Violations, feed.Violations...)
	if w.stopErr != nil {
		t.violate("%v", w.stopErr)
	}
	if commitErrs > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d commits failed (first: %v)", commitErrs, firstErr))
	}
	w.dials.check(&t)
	ts := make([]time.Time, len(consumed))
	for i, c := range consumed {
		ts[i] = c.At
	}
	t.Recovery = Recovery(ts, faultAt, loadEnd)
	t.LastProgress = Latest(ts)
	return t
}
