package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	kafkasasl "github.com/segmentio/kafka-go/sasl"
)

// kafkaGoClient drives segmentio/kafka-go. kafka-go has neither an
// idempotent nor a transactional producer: its Writer produces with
// acks=all (one batch per partition at a time), and the transactions are
// written by franz-go so that kafka-go's read_committed reader is still
// exercised. Every connection kafka-go dials goes through dial(), which
// records the address for the addresses check.
type kafkaGoClient struct {
	seeds  []string
	mu     sync.Mutex
	addrs  map[string]bool
	client *kafka.Client
	writer *kafka.Writer
	groups []string
	kgo    *kgoClient
	sasl   kafkasasl.Mechanism // nil: no SASL
}

func newKafkaGo(seeds []string) (Client, error) {
	mech, err := sec.kafkaGo()
	if err != nil {
		return nil, err
	}
	k := &kafkaGoClient{seeds: seeds, addrs: map[string]bool{}, sasl: mech}
	k.client = &kafka.Client{Addr: kafka.TCP(seeds...), Timeout: 15 * time.Second, Transport: k.transport()}
	return k, nil
}

// transport is a kafka-go Transport with the run's security settings; the
// TLS handshake runs over the connection dial() made.
func (k *kafkaGoClient) transport() *kafka.Transport {
	return &kafka.Transport{Dial: k.dial, ClientID: "inorder-compat-kafkago", TLS: sec.tlsConfig(), SASL: k.sasl}
}

func (k *kafkaGoClient) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	k.mu.Lock()
	// kafka-go's Dialer resolves a name before it calls this: an address
	// a hosts-file name resolves to is not one the client learned.
	if !sec.fromHostsFile(addr) {
		k.addrs[addr] = true
	}
	k.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (k *kafkaGoClient) dialer() *kafka.Dialer {
	return &kafka.Dialer{ClientID: "inorder-compat-kafkago", Timeout: 10 * time.Second, DialFunc: k.dial,
		TLS: sec.tlsConfig(), SASLMechanism: k.sasl}
}

func (k *kafkaGoClient) Close() {
	if k.writer != nil {
		k.writer.Close()
	}
	if k.kgo != nil {
		k.kgo.Close()
	}
}

func (k *kafkaGoClient) CreateTopic(ctx context.Context, topic string, partitions, rf int) error {
	resp, err := k.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: rf}}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

// keyBalancer sends key kN to partition N % #partitions, like the other workloads.
type keyBalancer struct{}

func (keyBalancer) Balance(msg kafka.Message, partitions ...int) int {
	n, _ := strconv.Atoi(string(msg.Key[1:]))
	want := n % len(partitions)
	for _, p := range partitions {
		if p == want {
			return p
		}
	}
	return partitions[0]
}

var kafkaGoLimitOnce sync.Once

func (k *kafkaGoClient) Produce(ctx context.Context, topic string, recs []Rec) error {
	kafkaGoLimitOnce.Do(func() {
		noteLimit("produce-idempotent", "kafka-go has no idempotent producer; Writer with acks=all instead")
	})
	if k.writer == nil {
		k.writer = &kafka.Writer{Addr: kafka.TCP(k.seeds...), Balancer: keyBalancer{},
			RequiredAcks: kafka.RequireAll, BatchSize: 200, BatchTimeout: 2 * time.Millisecond,
			MaxAttempts: 20, WriteBackoffMin: 100 * time.Millisecond,
			Transport: k.transport()}
	}
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Topic: topic, Key: []byte(r.Key()), Value: []byte(r.Value())}
	}
	return k.writer.WriteMessages(ctx, msgs...)
}

func (k *kafkaGoClient) reader(topic, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{Brokers: k.seeds, GroupID: group, Topic: topic,
		Dialer: k.dialer(), StartOffset: kafka.FirstOffset, CommitInterval: 0,
		MaxWait: 300 * time.Millisecond, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 500 * time.Millisecond})
}

func (k *kafkaGoClient) GroupConsume(ctx context.Context, topic, group string, members, want int, produce func(context.Context) error) ([][]Got, error) {
	k.groups = append(k.groups, group)
	rs := make([]*kafka.Reader, members)
	for i := range rs {
		rs[i] = k.reader(topic, group)
	}
	defer func() {
		for _, r := range rs {
			r.Close()
		}
	}()
	out := make([][]Got, members)
	last := make([]map[int]kafka.Message, members)
	var mu sync.Mutex
	total := 0
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, members)
	var wg sync.WaitGroup
	for i, r := range rs {
		last[i] = map[int]kafka.Message{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.FetchMessage(fctx)
				if err != nil {
					if fctx.Err() == nil {
						errc <- fmt.Errorf("member %d fetch: %w", i, err)
					}
					return
				}
				g, err := parseGot(m.Value, int32(m.Partition), m.Offset)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				out[i] = append(out[i], g)
				last[i][m.Partition] = m
				total++
				mu.Unlock()
			}
		}()
	}
	// kafka-go does not expose the assignment: ask the group coordinator.
	for {
		desc, ok, err := k.groupStable(ctx, group, topic, members)
		if ok {
			fmt.Printf("INFO group stable: %s\n", desc)
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("group never became stable: %s (%v)", desc, err)
		case err := <-errc:
			return nil, err
		case <-time.After(300 * time.Millisecond):
		}
	}
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
			return nil, fmt.Errorf("received %d of %d records", n, want)
		case err := <-errc:
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	wg.Wait()
	for i, r := range rs {
		var ms []kafka.Message
		for _, m := range last[i] {
			ms = append(ms, m)
		}
		if err := r.CommitMessages(ctx, ms...); err != nil {
			return nil, fmt.Errorf("member %d commit: %w", i, err)
		}
	}
	return out, nil
}

func (k *kafkaGoClient) groupStable(ctx context.Context, group, topic string, members int) (string, bool, error) {
	resp, err := k.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return "describe failed", false, err
	}
	if len(resp.Groups) != 1 {
		return "no group", false, nil
	}
	g := resp.Groups[0]
	if g.Error != nil {
		return "group error", false, g.Error
	}
	seen := map[int]int{}
	busy := 0
	desc := fmt.Sprintf("state=%s members=%d", g.GroupState, len(g.Members))
	for _, m := range g.Members {
		n := 0
		for _, t := range m.MemberAssignments.Topics {
			if t.Topic == topic {
				for _, p := range t.Partitions {
					seen[p]++
					n++
				}
			}
		}
		if n > 0 {
			busy++
		}
		desc += fmt.Sprintf(" %d partitions", n)
	}
	ok := g.GroupState == "Stable" && len(g.Members) == members && busy == members && len(seen) == mainPartitions
	for _, c := range seen {
		ok = ok && c == 1
	}
	return desc, ok, nil
}

func (k *kafkaGoClient) Resume(ctx context.Context, topic, group string, want int) ([]Got, error) {
	r := k.reader(topic, group)
	defer r.Close()
	var out []Got
	for len(out) < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return out, fmt.Errorf("after %d of %d records: %w", len(out), want, err)
		}
		g, err := parseGot(m.Value, int32(m.Partition), m.Offset)
		if err != nil {
			return out, err
		}
		out = append(out, g)
	}
	return out, nil
}

func (k *kafkaGoClient) Txn(ctx context.Context, topic string, commit, abort, sentinel []Rec) error {
	noteLimit("transactions", "kafka-go has no transactional producer; transactions written with franz-go, read back by kafka-go's read_committed reader")
	if k.kgo == nil {
		c, err := newKgo(k.seeds)
		if err != nil {
			return err
		}
		k.kgo = c.(*kgoClient)
	}
	return k.kgo.Txn(ctx, topic, commit, abort, sentinel)
}

func (k *kafkaGoClient) ReadCommitted(ctx context.Context, topic string, sentinels map[int]bool) ([]Got, error) {
	ch := make(chan Got, 64)
	errc := make(chan error, txnPartitions)
	var controls, aborted atomic.Int64
	defer func() {
		if controls.Load() > 0 || aborted.Load() > 0 {
			noteLimit("read-committed", fmt.Sprintf("kafka-go returned %d transaction control records and %d records of the aborted transaction as messages (IsolationLevel ReadCommitted not applied client-side, segmentio/kafka-go#1332); the committed records were checked after dropping them", controls.Load(), aborted.Load()))
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := 0; p < txnPartitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.seeds, Topic: topic, Partition: p,
			Dialer: k.dialer(), IsolationLevel: kafka.ReadCommitted, MaxWait: 300 * time.Millisecond})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			return nil, err
		}
		defer r.Close()
		go func() {
			for {
				m, err := r.ReadMessage(cctx)
				if err != nil {
					if cctx.Err() == nil {
						errc <- err
					}
					return
				}
				g, err := parseGot(m.Value, int32(m.Partition), m.Offset)
				if err != nil {
					if len(m.Key) >= 4 && len(m.Value) == 6 && m.Key[0] == 0 && m.Key[1] == 0 && m.Key[2] == 0 {
						// A transaction marker (control record: key version 0 +
						// type 0 abort / 1 commit; value version + coordinator
						// epoch) handed out as a message (kafka-go#1332).
						controls.Add(1)
						continue
					}
					errc <- err
					return
				}
				if g.Seq >= 200000 && g.Seq < 300000 {
					aborted.Add(1) // read_committed not applied (kafka-go#1332)
					continue
				}
				select {
				case ch <- g:
				case <-cctx.Done():
					return
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

func (k *kafkaGoClient) Addresses(ctx context.Context, group string) ([]string, error) {
	md, err := k.client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	k.mu.Lock()
	for _, b := range md.Brokers {
		k.addrs[net.JoinHostPort(b.Host, strconv.Itoa(b.Port))] = true
	}
	k.mu.Unlock()
	for _, g := range k.groups {
		fc, err := k.client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: g, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err == nil && fc.Error != nil {
			err = fc.Error
		}
		if err != nil {
			return nil, fmt.Errorf("find coordinator: %w", err)
		}
		if fc.Coordinator == nil {
			return nil, errors.New("find coordinator: no coordinator")
		}
		k.mu.Lock()
		k.addrs[net.JoinHostPort(fc.Coordinator.Host, strconv.Itoa(fc.Coordinator.Port))] = true
		k.mu.Unlock()
	}
	var out []string
	k.mu.Lock()
	for a := range k.addrs {
		out = append(out, a)
	}
	k.mu.Unlock()
	if k.kgo != nil {
		more, err := k.kgo.Addresses(ctx, group)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}
