package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A workload drives one kind of client through the proxy while a fault
// happens, then checks what reached the log.
type workload interface {
	Name() string
	Start(ctx context.Context) error
	// Stop ends the load and waits, bounded, for what was sent.
	Stop(ctx context.Context) error
	// Progress counts acknowledgements (committed transactions, consumed
	// records) so far.
	Progress() int
	// Verify reads the log directly from the brokers and checks it.
	Verify(ctx context.Context, faultAt, loadEnd time.Time) Tally
	Close()
}

// requestTimeout is the clients' request timeout; a stalled broker is
// stopped for longer than this.
const requestTimeout = 10 * time.Second

// clientOpts are the options every franz-go client of the suite shares:
// the proxy as its only seed, a dialer that refuses anything else, and a
// 10 s request timeout (5 s produce timeout plus 5 s overhead).
func clientOpts(bootstrap string, d *dialLog, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.Dialer(d.dial),
		kgo.RequestTimeoutOverhead(requestTimeout / 2),
		kgo.ProduceRequestTimeout(requestTimeout / 2),
		kgo.MetadataMinAge(time.Second),
	}, extra...)
}

// kgoProducer is franz-go's idempotent producer (which keeps 5 produce
// requests in flight per broker against Kafka 1.0 and later), sending sequence numbers round robin over the partitions at
// a steady rate.
type kgoProducer struct {
	name, bootstrap, topic string
	parts                  int32
	rate                   int
	dials                  *dialLog

	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	sent     int64
	acks     []Ack
	errs     int64
	firstErr error
}

func newKgoProducer(name, bootstrap, topic string, parts int32, rate int, reach map[string]bool) *kgoProducer {
	return &kgoProducer{name: name, bootstrap: bootstrap, topic: topic, parts: parts, rate: rate, dials: newDialLog(reach)}
}

func (w *kgoProducer) Name() string { return w.name }

func (w *kgoProducer) Progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *kgoProducer) Start(ctx context.Context) error {
	cl, err := kgo.NewClient(clientOpts(w.bootstrap, w.dials,
		kgo.DefaultProduceTopic(w.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
	)...)
	if err != nil {
		return err
	}
	w.cl = cl
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.loop(ctx)
	return nil
}

// loop sends rate records a second in ticks of 20 ms until stopped.
func (w *kgoProducer) loop(ctx context.Context) {
	defer close(w.done)
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	per := max(w.rate*int(tick)/int(time.Second), 1)
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range per {
			w.mu.Lock()
			seq := w.sent
			w.sent++
			w.mu.Unlock()
			r := &kgo.Record{Partition: int32(seq % int64(w.parts)), Value: []byte(strconv.FormatInt(seq, 10))}
			w.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if err != nil {
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					return
				}
				w.acks = append(w.acks, Ack{Partition: r.Partition, Seq: seq, At: time.Now()})
			})
		}
	}
}

func (w *kgoProducer) Stop(ctx context.Context) error {
	if w.stop == nil {
		return nil
	}
	close(w.stop)
	<-w.done
	w.stop = nil
	fctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return w.cl.Flush(fctx)
}

func (w *kgoProducer) Close() {
	if w.stop != nil {
		close(w.stop)
		<-w.done
		w.stop = nil
	}
	if w.cl != nil {
		w.cl.Close()
		w.cl = nil
	}
}

func (w *kgoProducer) Verify(ctx context.Context, faultAt, loadEnd time.Time) Tally {
	w.mu.Lock()
	acks := append([]Ack(nil), w.acks...)
	sent, errs, firstErr := w.sent, w.errs, w.firstErr
	w.mu.Unlock()
	t := verifyProducer(ctx, w.topic, sent, acks, faultAt, loadEnd)
	if errs > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d sends failed (first: %v)", errs, firstErr))
	}
	w.dials.check(&t)
	return t
}

// verifyProducer reads a producer's topic back and checks it against what
// the producer sent and saw acknowledged.
func verifyProducer(ctx context.Context, topic string, sent int64, acks []Ack, faultAt, loadEnd time.Time) Tally {
	found, err := readTopic(ctx, topic, false, nil)
	t := CheckProducer(sent, acks, found)
	if err != nil {
		t.violate("reading %s back: %v", topic, err)
	}
	times := ackTimes(acks)
	t.Recovery = Recovery(times, faultAt, loadEnd)
	t.LastProgress = Latest(times)
	return t
}

func ackTimes(acks []Ack) []time.Time {
	ts := make([]time.Time, len(acks))
	for i, a := range acks {
		ts[i] = a.At
	}
	return ts
}

// javaProducer is Kafka's own VerifiableProducer (kafka-clients, idempotent,
// 5 requests in flight, acks=all), which prints a JSON line for every
// acknowledged or failed send.
type javaProducer struct {
	bootstrap, topic, workDir, libs string
	rate                            int
	watch                           *connWatch

	cmd        *exec.Cmd
	ended      chan struct{}
	stderr     *os.File
	stderrPath string

	mu      sync.Mutex
	sent    int64
	reports int64
	acks    []Ack
	errs    int64
	lastErr string
}

func (w *javaProducer) Name() string { return "idempotent (java)" }

func (w *javaProducer) Progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *javaProducer) Start(ctx context.Context) error {
	props := filepath.Join(w.workDir, "verifiable-producer.properties")
	conf := fmt.Sprintf("enable.idempotence=true\nacks=all\nmax.in.flight.requests.per.connection=5\nretries=2147483647\nrequest.timeout.ms=%d\ndelivery.timeout.ms=300000\nlinger.ms=5\n", requestTimeout.Milliseconds())
	if err := os.WriteFile(props, []byte(conf), 0o644); err != nil {
		return err
	}
	// the client's own log (connections, retries, metadata) goes to stderr
	logConf := filepath.Join(w.workDir, "verifiable-producer-log4j2.properties")
	if err := os.WriteFile(logConf, []byte(javaLogConfig), 0o644); err != nil {
		return err
	}
	w.stderrPath = filepath.Join(w.workDir, "verifiable-producer-"+w.topic+".stderr")
	stderr, err := os.Create(w.stderrPath)
	if err != nil {
		return err
	}
	w.stderr = stderr
	w.cmd = exec.Command("java", "-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dlog4j2.configurationFile="+logConf,
		"-cp", filepath.Join(w.libs, "*"), "org.apache.kafka.tools.VerifiableProducer",
		"--bootstrap-server", w.bootstrap, "--topic", w.topic,
		"--throughput", strconv.Itoa(w.rate), "--repeating-keys", "60", "--producer.config", props)
	w.cmd.Stderr = stderr
	// the producer dies with the suite, even a suite that is killed
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := w.cmd.Start(); err != nil {
		return err
	}
	w.watch.watch(w.cmd.Process.Pid)
	w.ended = make(chan struct{})
	go w.read(bufio.NewScanner(out))
	return nil
}

// read parses the producer's JSON lines until its stdout closes.
func (w *javaProducer) read(sc *bufio.Scanner) {
	defer close(w.ended)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Name      string `json:"name"`
			Value     string `json:"value"`
			Partition int32  `json:"partition"`
			Sent      int64  `json:"sent"`
			Exception string `json:"exception"`
			Message   string `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		now := time.Now()
		w.mu.Lock()
		switch ev.Name {
		case "producer_send_success":
			w.reports++
			if seq, err := strconv.ParseInt(ev.Value, 10, 64); err == nil {
				w.acks = append(w.acks, Ack{Partition: ev.Partition, Seq: seq, At: now})
			}
		case "producer_send_error":
			w.reports++
			w.errs++
			w.lastErr = ev.Exception + ": " + ev.Message
		case "tool_data":
			w.sent = ev.Sent
		}
		w.mu.Unlock()
	}
}

// Stop sends SIGTERM: the tool's shutdown hook closes the producer, which
// waits for what is in flight, and prints its totals.
func (w *javaProducer) Stop(ctx context.Context) error {
	if w.cmd == nil || w.cmd.Process == nil {
		return nil
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.ended:
	case <-time.After(120 * time.Second):
		w.cmd.Process.Kill()
		<-w.ended
		w.cmd.Wait()
		return errors.New("VerifiableProducer did not end within 120 s of SIGTERM; killed")
	}
	w.cmd.Wait()
	return nil
}

func (w *javaProducer) Close() {
	if w.cmd != nil && w.cmd.ProcessState == nil && w.cmd.Process != nil {
		w.cmd.Process.Kill()
		w.cmd.Wait()
	}
	if w.stderr != nil {
		w.stderr.Close()
	}
	w.cmd = nil
}

func (w *javaProducer) Verify(ctx context.Context, faultAt, loadEnd time.Time) Tally {
	w.mu.Lock()
	acks := append([]Ack(nil), w.acks...)
	sent := max(w.sent, w.reports)
	errs, lastErr := w.errs, w.lastErr
	w.mu.Unlock()
	t := verifyProducer(ctx, w.topic, sent, acks, faultAt, loadEnd)
	if errs > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d sends failed (last: %s)", errs, lastErr))
	}
	if sent == 0 {
		t.violate("VerifiableProducer reported nothing (stderr in %s)", w.stderrPath)
	}
	w.watch.check(&t)
	return t
}

// javaLogConfig logs kafka-clients at INFO (WARN for the configuration
// dumps) to stderr.
const javaLogConfig = `status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d{HH:mm:ss.SSS}] %p %m (%c{1})%n
rootLogger.level = INFO
rootLogger.appenderRef.err.ref = ERR
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
`

// readTopic reads topic directly from the brokers, from the start. With
// readCommitted it reads with read_committed until done says it has all it
// expects and then one quiet second more; otherwise it reads up to the
// high watermarks it lists first.
func readTopic(ctx context.Context, topic string, readCommitted bool, done func([]Found) bool) ([]Found, error) {
	var out []Found
	var complete func() bool
	if readCommitted {
		complete = func() bool { return done(out) }
	}
	err := scanTopic(ctx, topic, readCommitted, complete, func(r *kgo.Record) error {
		seq, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("record %d/%d of %s: value %q is not a sequence number", r.Partition, r.Offset, topic, r.Value)
		}
		out = append(out, Found{Partition: r.Partition, Offset: r.Offset, Seq: seq})
		return nil
	})
	return out, err
}

// scanTopic gives each record of topic, read directly from the brokers
// from the start, to each. With a complete function it reads until that
// says so and one quiet second more; without, up to the high watermarks
// it lists first.
func scanTopic(ctx context.Context, topic string, readCommitted bool, complete func() bool, each func(*kgo.Record) error) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(directSeeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := make(map[int32]int64)
	quiet := complete != nil
	if complete == nil {
		ends, err := endOffsets(ctx, cl, topic)
		if err != nil {
			return err
		}
		complete = func() bool {
			for p, e := range ends {
				if next[p] < e {
					return false
				}
			}
			return true
		}
	}
	n := 0
	quietUntil := time.Time{}
	for {
		if complete() {
			if !quiet {
				return nil
			}
			if quietUntil.IsZero() {
				quietUntil = time.Now().Add(time.Second)
			} else if time.Now().After(quietUntil) {
				return nil
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return fmt.Errorf("read %d records of %s before the deadline", n, topic)
		}
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			n++
			next[r.Partition] = r.Offset + 1
			if err := each(r); err != nil && perr == nil {
				perr = err
			}
		})
		if perr != nil {
			return perr
		}
	}
}

func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends := make(map[int32]int64)
	var ferr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
		}
		ends[o.Partition] = o.Offset
	})
	if len(ends) == 0 && ferr == nil {
		ferr = fmt.Errorf("no partitions listed for %s", topic)
	}
	return ends, ferr
}

// javaLibs is where testenv/kafka installed Kafka's jars.
func javaLibs() string {
	cache := os.Getenv("INORDER_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "inorder")
	}
	v := os.Getenv("KAFKA_VERSION")
	if v == "" {
		v = "4.1.1"
	}
	return filepath.Join(cache, "kafka-"+v, "libs")
}

// trimErr shortens an error for a table cell.
func trimErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
