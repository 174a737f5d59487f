package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoClient drives franz-go. Every kgo.Client it creates is kept so that the
// addresses check can read the brokers each one discovered.
type kgoClient struct {
	seeds   []string
	dialed  dialHook
	mu      sync.Mutex
	clients []*kgo.Client
	prod    *kgo.Client
	admin   *kgo.Client
	txnID   string
}

func newKgo(seeds []string) (Client, error) {
	k := &kgoClient{seeds: seeds}
	adm, err := k.newClient()
	if err != nil {
		return nil, err
	}
	k.admin = adm
	return k, nil
}

func (k *kgoClient) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(k.seeds...),
		kgo.ClientID("inorder-compat-kgo"),
		kgo.RetryTimeout(30 * time.Second),
		kgo.WithHooks(&k.dialed),
	}, append(sec.kgoOpts(), opts...)...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.clients = append(k.clients, cl)
	k.mu.Unlock()
	return cl, nil
}

func (k *kgoClient) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.clients {
		c.Close()
	}
}

func (k *kgoClient) CreateTopic(ctx context.Context, topic string, partitions, rf int) error {
	resp, err := kadm.NewClient(k.admin).CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

func (k *kgoClient) Produce(ctx context.Context, topic string, recs []Rec) error {
	if k.prod == nil {
		p, err := k.newClient(
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			// idempotent by default: kgo keeps 5 produce requests in flight per broker
			kgo.ProducerLinger(2*time.Millisecond),
			kgo.ProducerBatchMaxBytes(16<<10),
		)
		if err != nil {
			return err
		}
		k.prod = p
	}
	return produceKgo(ctx, k.prod, topic, recs)
}

func produceKgo(ctx context.Context, p *kgo.Client, topic string, recs []Rec) error {
	var mu sync.Mutex
	var first error
	for _, r := range recs {
		p.Produce(ctx, &kgo.Record{Topic: topic, Partition: r.Partition, Key: []byte(r.Key()), Value: []byte(r.Value())},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			})
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	return first
}

type kgoMember struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
}

func (k *kgoClient) GroupConsume(ctx context.Context, topic, group string, members, want int, produce func(context.Context) error) ([][]Got, error) {
	ms := make([]*kgoMember, members)
	for i := range ms {
		m := &kgoMember{assigned: map[int32]bool{}}
		upd := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range a[topic] {
					if add {
						m.assigned[p] = true
					} else {
						delete(m.assigned, p)
					}
				}
			}
		}
		cl, err := k.newClient(
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(upd(true)), kgo.OnPartitionsRevoked(upd(false)), kgo.OnPartitionsLost(upd(false)),
		)
		if err != nil {
			return nil, err
		}
		m.cl = cl
		ms[i] = m
	}
	defer func() {
		for _, m := range ms {
			m.cl.Close() // leaves the group
		}
	}()
	out := make([][]Got, members)
	var total int
	var mu sync.Mutex
	errc := make(chan error, members)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				pc, cancel := context.WithTimeout(pollCtx, 300*time.Millisecond)
				fs := m.cl.PollFetches(pc)
				cancel()
				for _, fe := range fs.Errors() {
					if fe.Err != context.DeadlineExceeded && fe.Err != context.Canceled {
						errc <- fmt.Errorf("member %d fetch %s/%d: %w", i, fe.Topic, fe.Partition, fe.Err)
						return
					}
				}
				var gs []Got
				var perr error
				fs.EachRecord(func(r *kgo.Record) {
					g, err := parseGot(r.Value, r.Partition, r.Offset)
					if err != nil && perr == nil {
						perr = err
					}
					gs = append(gs, g)
				})
				if perr != nil {
					errc <- perr
					return
				}
				mu.Lock()
				out[i] = append(out[i], gs...)
				total += len(gs)
				mu.Unlock()
			}
		}()
	}
	// Wait for a stable group covering all partitions with every member busy.
	stable := false
	for !stable {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("group never became stable: %s", kgoAssignments(ms))
		case err := <-errc:
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
		seen := map[int32]int{}
		busy := 0
		for _, m := range ms {
			m.mu.Lock()
			if len(m.assigned) > 0 {
				busy++
			}
			for p := range m.assigned {
				seen[p]++
			}
			m.mu.Unlock()
		}
		stable = busy == members && len(seen) == mainPartitions
		for _, c := range seen {
			stable = stable && c == 1
		}
	}
	fmt.Printf("INFO group stable: %s\n", kgoAssignments(ms))
	if err := produce(ctx); err != nil {
		return nil, err
	}
	for {
		mu.Lock()
		n := total
		mu.Unlock()
		if n >= want {
			break
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("received %d of %d records", n, want)
		case err := <-errc:
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopPoll()
	wg.Wait()
	for i, m := range ms {
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			return nil, fmt.Errorf("member %d commit: %w", i, err)
		}
	}
	return out, nil
}

func kgoAssignments(ms []*kgoMember) string {
	s := ""
	for i, m := range ms {
		m.mu.Lock()
		s += fmt.Sprintf("member%d=%d partitions ", i, len(m.assigned))
		m.mu.Unlock()
	}
	return s
}

func (k *kgoClient) Resume(ctx context.Context, topic, group string, want int) ([]Got, error) {
	cl, err := k.newClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return pollKgo(ctx, cl, func(gs []Got) bool { return len(gs) >= want })
}

func pollKgo(ctx context.Context, cl *kgo.Client, done func([]Got) bool) ([]Got, error) {
	var out []Got
	for !done(out) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("received %d records before the deadline", len(out))
		}
		for _, fe := range fs.Errors() {
			return out, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			g, err := parseGot(r.Value, r.Partition, r.Offset)
			if err != nil && perr == nil {
				perr = err
			}
			out = append(out, g)
		})
		if perr != nil {
			return out, perr
		}
	}
	return out, nil
}

func (k *kgoClient) Txn(ctx context.Context, topic string, commit, abort, sentinel []Rec) error {
	k.txnID = "inorder-compat-kgo-" + topic
	tp, err := k.newClient(kgo.TransactionalID(k.txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	return kgoTxn(ctx, tp, topic, commit, abort, sentinel)
}

func kgoTxn(ctx context.Context, tp *kgo.Client, topic string, commit, abort, sentinel []Rec) error {
	for _, t := range []struct {
		recs []Rec
		end  kgo.TransactionEndTry
		name string
	}{{commit, kgo.TryCommit, "commit"}, {abort, kgo.TryAbort, "abort"}, {sentinel, kgo.TryCommit, "sentinel commit"}} {
		if err := tp.BeginTransaction(); err != nil {
			return fmt.Errorf("%s: begin: %w", t.name, err)
		}
		if err := produceKgo(ctx, tp, topic, t.recs); err != nil {
			return fmt.Errorf("%s: produce: %w", t.name, err)
		}
		if err := tp.EndTransaction(ctx, t.end); err != nil {
			return fmt.Errorf("%s: end: %w", t.name, err)
		}
	}
	return nil
}

func (k *kgoClient) ReadCommitted(ctx context.Context, topic string, sentinels map[int]bool) ([]Got, error) {
	cl, err := k.newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return pollKgo(ctx, cl, sentinelsSeen(sentinels))
}

func sentinelsSeen(sentinels map[int]bool) func([]Got) bool {
	return func(gs []Got) bool {
		n := 0
		for _, g := range gs {
			if sentinels[g.Seq] {
				n++
			}
		}
		return n >= len(sentinels)
	}
}

func (k *kgoClient) Addresses(ctx context.Context, group string) ([]string, error) {
	set := map[string]bool{}
	// Every address any of our clients dialed (kgo's broker-connect hook).
	k.dialed.mu.Lock()
	for a := range k.dialed.addrs {
		set[a] = true
	}
	k.dialed.mu.Unlock()
	adm := kadm.NewClient(k.admin)
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	for _, b := range md.Brokers {
		set[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = true
	}
	gc := adm.FindGroupCoordinators(ctx, group)
	for _, c := range gc {
		if c.Err != nil {
			return nil, fmt.Errorf("find group coordinator: %w", c.Err)
		}
		set[net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))] = true
	}
	if k.txnID != "" {
		tc := adm.FindTxnCoordinators(ctx, k.txnID)
		for _, c := range tc {
			if c.Err != nil {
				return nil, fmt.Errorf("find txn coordinator: %w", c.Err)
			}
			set[net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))] = true
		}
	}
	var out []string
	for a := range set {
		out = append(out, a)
	}
	return out, nil
}

// dialHook records the address of every broker connection kgo opens.
type dialHook struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func (h *dialHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.addrs == nil {
		h.addrs = map[string]bool{}
	}
	h.addrs[net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))] = true
	// With a hosts file the socket's address is what a name resolved to,
	// not an address the client learned.
	if conn != nil && !sec.fromHostsFile(conn.RemoteAddr().String()) {
		h.addrs[conn.RemoteAddr().String()] = true
	}
}
