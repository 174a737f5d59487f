package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnSize is the records per transaction; every fifth transaction is
// aborted on purpose so that read_committed has something to hide.
const txnSize = 10

// txnWorkload is franz-go's transactional producer writing transactions
// of txnSize records round robin over the partitions, with two
// read_committed consumers reading the topic through the proxy meanwhile.
type txnWorkload struct {
	bootstrap, topic, txnID string
	parts                   int32
	rate                    int
	dials                   *dialLog

	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	txns      []Txn
	endErrs   int
	firstErr  error
	consumers []*viewConsumer
}

func newTxnWorkload(bootstrap, topic, txnID string, parts int32, rate int, reach map[string]bool) *txnWorkload {
	return &txnWorkload{bootstrap: bootstrap, topic: topic, txnID: txnID, parts: parts, rate: rate, dials: newDialLog(reach)}
}

func (w *txnWorkload) Name() string { return "transactional (kgo)" }

// Progress counts committed transactions.
func (w *txnWorkload) Progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, x := range w.txns {
		if x.Outcome == TxnCommitted {
			n++
		}
	}
	return n
}

func (w *txnWorkload) Start(ctx context.Context) error {
	for i := range 2 {
		c := &viewConsumer{name: fmt.Sprintf("read_committed consumer %d", i+1), dials: w.dials}
		if err := c.start(ctx, w.bootstrap, w.topic); err != nil {
			return err
		}
		w.consumers = append(w.consumers, c)
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.loop(ctx)
	return nil
}

func (w *txnWorkload) newClient() (*kgo.Client, error) {
	return kgo.NewClient(clientOpts(w.bootstrap, w.dials,
		kgo.DefaultProduceTopic(w.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(w.txnID),
		kgo.TransactionTimeout(60*time.Second),
		kgo.ProducerLinger(5*time.Millisecond),
	)...)
}

func (w *txnWorkload) failed(err error) {
	w.mu.Lock()
	w.endErrs++
	if w.firstErr == nil {
		w.firstErr = err
	}
	w.mu.Unlock()
}

// loop runs transactions until stopped. After any failure whose outcome it
// cannot know, it closes the client and starts a new one with the same
// transactional id: initialising it fences the old producer, so the
// transaction in doubt ends whole, one way or the other.
func (w *txnWorkload) loop(ctx context.Context) {
	defer close(w.done)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	pace := time.Duration(txnSize) * time.Second / time.Duration(max(w.rate, 1))
	var seq int64
	for n := 0; ; n++ {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		began := time.Now()
		if cl == nil {
			var err error
			if cl, err = w.newClient(); err != nil {
				w.failed(err)
				time.Sleep(time.Second)
				continue
			}
		}
		if err := cl.BeginTransaction(); err != nil {
			w.failed(err)
			cl.Close()
			cl = nil
			continue
		}
		x := Txn{Recs: make([]Ack, txnSize)}
		var perr error
		var pmu sync.Mutex
		for i := range txnSize {
			s := seq
			seq++
			p := int32(s % int64(w.parts))
			x.Recs[i] = Ack{Partition: p, Seq: s}
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(strconv.FormatInt(s, 10))}, func(_ *kgo.Record, err error) {
				if err != nil {
					pmu.Lock()
					perr = err
					pmu.Unlock()
				}
			})
		}
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		ferr := cl.Flush(fctx)
		pmu.Lock()
		if ferr == nil {
			ferr = perr
		}
		pmu.Unlock()
		commit := ferr == nil && n%5 != 4
		err := cl.EndTransaction(fctx, kgo.TransactionEndTry(commit))
		cancel()
		switch {
		case err != nil:
			w.failed(err)
			x.Outcome = TxnUnknown
			cl.Close()
			cl = nil
		case commit:
			x.Outcome = TxnCommitted
		default:
			x.Outcome = TxnAborted
		}
		x.EndedAt = time.Now()
		for i := range x.Recs {
			x.Recs[i].At = x.EndedAt
		}
		w.mu.Lock()
		w.txns = append(w.txns, x)
		w.mu.Unlock()
		if d := pace - time.Since(began); d > 0 {
			time.Sleep(d)
		}
	}
}

func (w *txnWorkload) committed() map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int64]bool)
	for _, x := range w.txns {
		if x.Outcome == TxnCommitted {
			for _, r := range x.Recs {
				m[r.Seq] = true
			}
		}
	}
	return m
}

// Stop ends the transactions and waits, bounded, until both consumers
// have seen every committed record.
func (w *txnWorkload) Stop(ctx context.Context) error {
	if w.stop == nil {
		return nil
	}
	close(w.stop)
	<-w.done
	w.stop = nil
	want := w.committed()
	var err error
	for _, c := range w.consumers {
		if e := c.waitFor(ctx, want, 60*time.Second); e != nil && err == nil {
			err = e
		}
		c.close()
	}
	return err
}

func (w *txnWorkload) Close() {
	if w.stop != nil {
		close(w.stop)
		<-w.done
		w.stop = nil
	}
	for _, c := range w.consumers {
		c.close()
	}
}

func (w *txnWorkload) Verify(ctx context.Context, faultAt, loadEnd time.Time) Tally {
	w.mu.Lock()
	txns := append([]Txn(nil), w.txns...)
	endErrs, firstErr := w.endErrs, w.firstErr
	w.mu.Unlock()
	want := w.committed()
	found, err := readTopic(ctx, w.topic, true, func(got []Found) bool {
		seen := 0
		for _, f := range got {
			if want[f.Seq] {
				seen++
			}
		}
		return seen >= len(want)
	})
	t := CheckTxn(txns, found)
	if err != nil {
		t.violate("reading %s back: %v", w.topic, err)
	}
	for _, c := range w.consumers {
		CheckView(c.name, txns, c.seen(), &t)
	}
	if endErrs > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d transaction steps failed (first: %v)", endErrs, firstErr))
	}
	w.dials.check(&t)
	var ends []time.Time
	for _, x := range txns {
		if x.Outcome == TxnCommitted {
			ends = append(ends, x.EndedAt)
		}
	}
	t.Recovery = Recovery(ends, faultAt, loadEnd)
	t.LastProgress = Latest(ends)
	return t
}

// viewConsumer reads a topic with read_committed through the proxy and
// keeps every record it was given.
type viewConsumer struct {
	name  string
	dials *dialLog
	cl    *kgo.Client

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	view   []Found
	bad    int
}

func (c *viewConsumer) start(ctx context.Context, bootstrap, topic string) error {
	cl, err := kgo.NewClient(clientOpts(bootstrap, c.dials,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return err
	}
	c.cl = cl
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.Lock()
				defer c.mu.Unlock()
				seq, err := strconv.ParseInt(string(r.Value), 10, 64)
				if err != nil {
					c.bad++
					return
				}
				c.view = append(c.view, Found{Partition: r.Partition, Offset: r.Offset, Seq: seq})
			})
		}
	}()
	return nil
}

func (c *viewConsumer) seen() []Found {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Found(nil), c.view...)
}

// waitFor waits until the consumer saw every sequence number in want.
func (c *viewConsumer) waitFor(ctx context.Context, want map[int64]bool, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		got := 0
		for _, f := range c.seen() {
			if want[f.Seq] {
				got++
			}
		}
		if got >= len(want) {
			// a quiet moment more, so that a late duplicate is seen too
			time.Sleep(500 * time.Millisecond)
			return nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("%s saw %d of %d committed records after %v", c.name, got, len(want), d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *viewConsumer) close() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cl.Close()
	c.cancel = nil
}
