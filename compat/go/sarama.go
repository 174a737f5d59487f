package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient drives IBM/sarama. Sarama's idempotent producer refuses
// Net.MaxOpenRequests > 1 (config validation), so it runs with 1 in flight.
type saramaClient struct {
	seeds   []string
	mu      sync.Mutex
	clients []sarama.Client
	prod    sarama.SyncProducer
	groups  []string
	txnID   string
}

func newSarama(seeds []string) (Client, error) { return &saramaClient{seeds: seeds}, nil }

func (s *saramaClient) config() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "inorder-compat-sarama"
	c.Version = sarama.V4_1_0_0
	c.Net.DialTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1 // sarama: "Idempotent producer requires Net.MaxOpenRequests to be 1"
	c.Producer.Retry.Max = 20
	c.Producer.Retry.Backoff = 250 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Return.Errors = true
	sec.sarama(c)
	return c
}

func (s *saramaClient) newClient(c *sarama.Config) (sarama.Client, error) {
	cl, err := sarama.NewClient(s.seeds, c)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.clients = append(s.clients, cl)
	s.mu.Unlock()
	return cl, nil
}

func (s *saramaClient) Close() {
	if s.prod != nil {
		s.prod.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		c.Close()
	}
}

func (s *saramaClient) CreateTopic(ctx context.Context, topic string, partitions, rf int) error {
	cl, err := s.newClient(s.config())
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		return err
	}
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: int16(rf)}, false)
}

func saramaMsgs(topic string, recs []Rec) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		out[i] = &sarama.ProducerMessage{Topic: topic, Partition: r.Partition,
			Key: sarama.StringEncoder(r.Key()), Value: sarama.StringEncoder(r.Value())}
	}
	return out
}

func (s *saramaClient) Produce(ctx context.Context, topic string, recs []Rec) error {
	if s.prod == nil {
		noteLimit("produce-idempotent", "sarama's idempotent producer requires Net.MaxOpenRequests=1 (1 request in flight, not 5)")
		cl, err := s.newClient(s.config())
		if err != nil {
			return err
		}
		if s.prod, err = sarama.NewSyncProducerFromClient(cl); err != nil {
			return err
		}
	}
	return withCtx(ctx, func() error { return s.prod.SendMessages(saramaMsgs(topic, recs)) })
}

// withCtx runs a blocking call that takes no context, giving up at the deadline.
func withCtx(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type saramaMember struct {
	topic    string
	mu       sync.Mutex
	assigned map[int32]bool
	got      []Got
	total    *int
	totalMu  *sync.Mutex
	done     chan struct{}
	cleaned  chan struct{}
	parseErr error
}

func (m *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = map[int32]bool{}
	for _, p := range sess.Claims()[m.topic] {
		m.assigned[p] = true
	}
	return nil
}

func (m *saramaMember) Cleanup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.assigned = map[int32]bool{}
	m.mu.Unlock()
	select {
	case <-m.done:
		sess.Commit()
		select {
		case <-m.cleaned:
		default:
			close(m.cleaned)
		}
	default:
	}
	return nil
}

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-m.done:
			return nil
		case <-sess.Context().Done():
			return nil
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			g, err := parseGot(msg.Value, msg.Partition, msg.Offset)
			m.mu.Lock()
			if err != nil && m.parseErr == nil {
				m.parseErr = err
			}
			m.got = append(m.got, g)
			m.mu.Unlock()
			sess.MarkMessage(msg, "")
			m.totalMu.Lock()
			*m.total++
			m.totalMu.Unlock()
		}
	}
}

func (s *saramaClient) GroupConsume(ctx context.Context, topic, group string, members, want int, produce func(context.Context) error) ([][]Got, error) {
	s.groups = append(s.groups, group)
	var total int
	var totalMu sync.Mutex
	done := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ms := make([]*saramaMember, members)
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for i := range ms {
		cl, err := s.newClient(s.config())
		if err != nil {
			return nil, err
		}
		cg, err := sarama.NewConsumerGroupFromClient(group, cl)
		if err != nil {
			return nil, err
		}
		m := &saramaMember{topic: topic, assigned: map[int32]bool{}, total: &total, totalMu: &totalMu, done: done, cleaned: make(chan struct{})}
		ms[i] = m
		wg.Add(2)
		go func() {
			defer wg.Done()
			for err := range cg.Errors() {
				select {
				case errc <- fmt.Errorf("member %d: %w", i, err):
				default:
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer cg.Close()
			for cctx.Err() == nil {
				if err := cg.Consume(cctx, []string{topic}, m); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && cctx.Err() == nil {
					select {
					case errc <- fmt.Errorf("member %d consume: %w", i, err):
					default:
					}
					time.Sleep(200 * time.Millisecond)
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	defer wg.Wait()
	assignments := func() (string, bool) {
		seen := map[int32]int{}
		busy, desc := 0, ""
		for i, m := range ms {
			m.mu.Lock()
			if len(m.assigned) > 0 {
				busy++
			}
			for p := range m.assigned {
				seen[p]++
			}
			desc += fmt.Sprintf("member%d=%d partitions ", i, len(m.assigned))
			m.mu.Unlock()
		}
		ok := busy == members && len(seen) == mainPartitions
		for _, c := range seen {
			ok = ok && c == 1
		}
		return desc, ok
	}
	for {
		desc, ok := assignments()
		if ok {
			fmt.Printf("INFO group stable: %s\n", desc)
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("group never became stable: %s", desc)
		case err := <-errc:
			fmt.Printf("INFO %v\n", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := produce(ctx); err != nil {
		return nil, err
	}
	for {
		totalMu.Lock()
		n := total
		totalMu.Unlock()
		if n >= want {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("received %d of %d records", n, want)
		case err := <-errc:
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(done)
	out := make([][]Got, members)
	for i, m := range ms {
		select {
		case <-m.cleaned: // session ended and marked offsets were committed
		case <-ctx.Done():
			return nil, fmt.Errorf("member %d did not commit before the deadline", i)
		}
		if m.parseErr != nil {
			return nil, m.parseErr
		}
		out[i] = m.got
	}
	return out, nil
}

func (s *saramaClient) Resume(ctx context.Context, topic, group string, want int) ([]Got, error) {
	var total int
	var totalMu sync.Mutex
	cl, err := s.newClient(s.config())
	if err != nil {
		return nil, err
	}
	cg, err := sarama.NewConsumerGroupFromClient(group, cl)
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	m := &saramaMember{topic: topic, assigned: map[int32]bool{}, total: &total, totalMu: &totalMu, done: make(chan struct{}), cleaned: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for cctx.Err() == nil {
			_ = cg.Consume(cctx, []string{topic}, m)
		}
	}()
	for {
		totalMu.Lock()
		n := total
		totalMu.Unlock()
		if n >= want {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("received %d of %d records", n, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Got(nil), m.got...), m.parseErr
}

func (s *saramaClient) Txn(ctx context.Context, topic string, commit, abort, sentinel []Rec) error {
	c := s.config()
	s.txnID = "inorder-compat-sarama-" + topic
	c.Producer.Transaction.ID = s.txnID
	cl, err := s.newClient(c)
	if err != nil {
		return err
	}
	p, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		return err
	}
	defer p.Close()
	return withCtx(ctx, func() error {
		for _, t := range []struct {
			recs   []Rec
			commit bool
			name   string
		}{{commit, true, "commit"}, {abort, false, "abort"}, {sentinel, true, "sentinel commit"}} {
			if err := p.BeginTxn(); err != nil {
				return fmt.Errorf("%s: begin: %w", t.name, err)
			}
			if err := p.SendMessages(saramaMsgs(topic, t.recs)); err != nil {
				return fmt.Errorf("%s: produce: %w", t.name, err)
			}
			end := p.AbortTxn
			if t.commit {
				end = p.CommitTxn
			}
			if err := end(); err != nil {
				return fmt.Errorf("%s: end: %w", t.name, err)
			}
		}
		return nil
	})
}

func (s *saramaClient) ReadCommitted(ctx context.Context, topic string, sentinels map[int]bool) ([]Got, error) {
	c := s.config()
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	cl, err := s.newClient(c)
	if err != nil {
		return nil, err
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	parts, err := cons.Partitions(topic)
	if err != nil {
		return nil, err
	}
	ch := make(chan Got, 64)
	errc := make(chan error, len(parts))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, p := range parts {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		go func() {
			for {
				select {
				case <-cctx.Done():
					return
				case e, ok := <-pc.Errors():
					if ok {
						errc <- e
					}
				case msg, ok := <-pc.Messages():
					if !ok {
						return
					}
					g, err := parseGot(msg.Value, msg.Partition, msg.Offset)
					if err != nil {
						errc <- err
						return
					}
					select {
					case ch <- g:
					case <-cctx.Done():
						return
					}
				}
			}
		}()
	}
	var out []Got
	done := sentinelsSeen(sentinels)
	for !done(out) {
		select {
		case g := <-ch:
			out = append(out, g)
		case err := <-errc:
			return out, err
		case <-ctx.Done():
			return out, fmt.Errorf("received %d records before the deadline", len(out))
		}
	}
	return out, nil
}

func (s *saramaClient) Addresses(ctx context.Context, group string) ([]string, error) {
	set := map[string]bool{}
	s.mu.Lock()
	clients := append([]sarama.Client(nil), s.clients...)
	s.mu.Unlock()
	for _, c := range clients {
		if c.Closed() {
			continue
		}
		for _, b := range c.Brokers() {
			set[b.Addr()] = true
		}
	}
	cl, err := s.newClient(s.config())
	if err != nil {
		return nil, err
	}
	if err := cl.RefreshMetadata(); err != nil {
		return nil, err
	}
	for _, b := range cl.Brokers() {
		set[b.Addr()] = true
	}
	for _, g := range s.groups {
		b, err := cl.Coordinator(g)
		if err != nil {
			return nil, fmt.Errorf("group coordinator: %w", err)
		}
		set[b.Addr()] = true
	}
	if s.txnID != "" {
		b, err := cl.TransactionCoordinator(s.txnID)
		if err != nil {
			return nil, fmt.Errorf("txn coordinator: %w", err)
		}
		set[b.Addr()] = true
	}
	var out []string
	for a := range set {
		out = append(out, a)
	}
	return out, nil
}
