package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// apiCounter counts, by API key, the requests a client wrote whole: what
// the client did, to hold the trail against.
type apiCounter struct{ n [100]atomic.Int64 }

func (c *apiCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && int(key) < len(c.n) {
		c.n[key].Add(1)
	}
}

// auditEvent is what the comparison reads of an event.
type auditEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Principal string `json:"principal"`
	APIKey    string `json:"api_key"`
	Decision  string `json:"decision"`
	Reason    string `json:"reason"`
	Claimed   string `json:"claimed_principal"`
	Resources []struct {
		Name       string `json:"resource_name"`
		Partitions []struct {
			Records int64 `json:"records"`
		} `json:"partitions"`
	} `json:"resources"`
}

// readTrailLines returns the events of a JSON-lines stream, skipping what
// is not an event (serve's own lines on standard output).
func readTrailLines(t *testing.T, text string) [][]byte {
	t.Helper()
	var lines [][]byte
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"specversion"`) {
			lines = append(lines, []byte(sc.Text()))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// captureStdout points os.Stdout at a pipe until the test ends; the
// returned function restores it and returns what was written.
func captureStdout(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	var buf strings.Builder
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&buf, r)
	}()
	var once sync.Once
	restore := func() string {
		once.Do(func() {
			os.Stdout = saved
			w.Close()
			<-copied
			r.Close()
		})
		return buf.String()
	}
	t.Cleanup(func() { restore() })
	return restore
}

// TestAuditKafkaSinkApacheRestart runs serve in front of an embedded
// broker with its audit trail going to a file, to standard output and to
// a topic of Apache Kafka (testenv/kafka's `audit` node), and a scripted
// session through it: SCRAM authentications, one refused, a topic
// creation, a denied one, plain and transactional writes, offset commits.
// In the middle of it the Apache Kafka node is killed and, once the
// clients are seen held back, started again on its data. The clients
// never fail; at the stop every sink holds the same events, the topic
// each exactly once (the sink's producer is idempotent: a duplicate is a
// defect), in the file's order per principal, and the events are what the
// clients did, request for request.
//
// The clients' request timeout is two minutes: a client that gives up on
// a request held back and sends it again is recorded twice, rightly, and
// a count of what it did would no longer say what the trail must hold.
func TestAuditKafkaSinkApacheRestart(t *testing.T) {
	boot, runDir := os.Getenv("INORDER_AUDIT_KAFKA_BOOTSTRAP"), os.Getenv("INORDER_AUDIT_KAFKA_RUN_DIR")
	if boot == "" || runDir == "" {
		t.Skip("no Apache Kafka to stop and restart: run KAFKA_RUN_DIR=DIR testenv/kafka/start.sh audit, " +
			"set INORDER_AUDIT_KAFKA_BOOTSTRAP to what it prints and INORDER_AUDIT_KAFKA_RUN_DIR to DIR")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	topic := "inorder-audit-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admin, err := kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("creating the audit topic on Apache Kafka: %v", err)
	}
	admin.Close()

	kc := newBroker(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "clients.yaml")
	writeCredentials(t, creds, map[string]string{"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"})
	acls := filepath.Join(dir, "acls.yaml")
	var rules strings.Builder
	rules.WriteString("acls:\n")
	for _, u := range []string{"alice", "bob", "carol"} {
		fmt.Fprintf(&rules, "  - {principal: User:%s, resourceType: TOPIC, resourceName: orders, patternType: PREFIXED, operation: ALL}\n", u)
		fmt.Fprintf(&rules, "  - {principal: User:%s, resourceType: CLUSTER, resourceName: kafka-cluster, operation: IDEMPOTENT_WRITE}\n", u)
	}
	rules.WriteString("  - {principal: User:bob, resourceType: TRANSACTIONAL_ID, resourceName: audit-txn, operation: ALL}\n")
	rules.WriteString("  - {principal: User:carol, resourceType: GROUP, resourceName: audit-group, operation: ALL}\n")
	if err := os.WriteFile(acls, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "audit.log")
	// The stdout sink writes to the process's standard output: a pipe
	// for the length of serve's run.
	stdout := captureStdout(t)
	addr, out, errOut, stop := startStreams(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--client-sasl-mechanisms", "SCRAM-SHA-256", "--client-credentials", creds, "--acl-file", acls,
		"--audit-file", file, "--audit-stdout", "--audit-kafka-topic", topic, "--audit-kafka-bootstrap", boot,
		"--audit-data-path", "request", "--audit-on-full", "block",
		// A queue of 1MiB (a sixteenth), filled within seconds of the
		// audit cluster's absence.
		"--max-memory", "16MiB", "--admin-listen", "127.0.0.1:0", "--shutdown-grace", "60s")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	m := regexp.MustCompile(`admin endpoint at (http://\S+) `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("serve printed no admin endpoint:\n%s", out.String())
	}
	adminURL := m[1]

	counters := map[string]*apiCounter{}
	client := func(user string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		c := &apiCounter{}
		counters["User:"+user] = c
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.WithHooks(c),
			kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism()),
			kgo.RequestTimeoutOverhead(2 * time.Minute), kgo.ProducerLinger(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	// A refused authentication: mallory is not in the credentials.
	mallory := client("mallory")
	if err := mallory.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("mallory: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	mallory.Close()

	alice := client("alice", kgo.DefaultProduceTopic("orders"))
	defer alice.Close()
	aliceAdmin := kadm.NewClient(alice)
	if _, err := aliceAdmin.CreateTopics(ctx, 3, 1, nil, "orders", "orders-txn"); err != nil {
		t.Fatalf("creating the topics: %v", err)
	}
	r, err := aliceAdmin.CreateTopic(ctx, 1, 1, nil, "secret")
	if err == nil {
		err = r.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("creating a topic alice may not create: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	bob := client("bob", kgo.DefaultProduceTopic("orders-txn"), kgo.TransactionalID("audit-txn"))
	defer bob.Close()
	carol := client("carol")
	defer carol.Close()
	carolAdmin := kadm.NewClient(carol)

	// The session's three loops, until done: their operations counted
	// together (progress) and apart, and the first error of any.
	var (
		progress                    atomic.Int64
		plainRecs, txnRecs, commits atomic.Int64
		txns                        atomic.Int64
		firstErr                    atomic.Value
		wg                          sync.WaitGroup
	)
	done := make(chan struct{})
	loop := func(name string, op func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := op(); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s: %w", name, err))
					return
				}
				progress.Add(1)
			}
		}()
	}
	loop("alice's writes", func() error {
		if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("order")}).FirstErr(); err != nil {
			return err
		}
		plainRecs.Add(1)
		return nil
	})
	loop("bob's transactions", func() error {
		if err := bob.BeginTransaction(); err != nil {
			return err
		}
		rs := bob.ProduceSync(ctx, &kgo.Record{Value: []byte("t1")}, &kgo.Record{Value: []byte("t2")})
		if err := rs.FirstErr(); err != nil {
			return err
		}
		if err := bob.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return err
		}
		txnRecs.Add(2)
		txns.Add(1)
		return nil
	})
	var committed int64
	loop("carol's commits", func() error {
		committed++
		var offs kadm.Offsets
		offs.AddOffset("orders", 0, committed, -1)
		rs, err := carolAdmin.CommitOffsets(ctx, "audit-group", offs)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return err
		}
		commits.Add(1)
		time.Sleep(5 * time.Millisecond)
		return nil
	})
	stopLoops := func() {
		select {
		case <-done:
		default:
			close(done)
		}
		wg.Wait()
	}
	defer stopLoops()
	failed := func() error {
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		return nil
	}

	// waitFor polls cond until it holds, a client fails, or d passes.
	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
			if err := failed(); err != nil {
				t.Fatalf("a client failed while waiting for %s: %v\n%s", what, err, errOut.String())
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v (progress %d)\n%s", what, d, progress.Load(), errOut.String())
			}
		}
	}
	metric := func(name string) float64 {
		_, body := httpGet(t, adminURL+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, name+" ") {
				v, _ := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
				return v
			}
		}
		return 0
	}
	waitFor("traffic and audit writes to Apache Kafka", time.Minute, func() bool {
		return progress.Load() >= 300 && metric(`inorder_audit_written_total{sink="kafka"}`) > 0
	})

	// Kill the node: no clean leadership hand-over, no flush beyond what
	// the page cache holds.
	pidFile := filepath.Join(runDir, "audit", "node1", "pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the audit node's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	atKill := progress.Load()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the audit node %d: %v", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the audit node %d outlived SIGKILL by 30s", pid)
		}
	}
	if c, err := net.DialTimeout("tcp", boot, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after its node was killed", boot)
	}

	// Held back: the clients' operations stop (the queue is full and
	// their connections are not read) without any of them failing.
	var last int64 = -1
	var flatSince time.Time
	waitFor("client held back", 2*time.Minute, func() bool {
		now := progress.Load()
		if now != last {
			last, flatSince = now, time.Now()
			return false
		}
		return time.Since(flatSince) >= 2*time.Second
	})
	heldAt := progress.Load()
	heldAfter := time.Since(killed)
	// By the queue: full, or as near as the next event's size allows.
	if q := metric("inorder_audit_queued_bytes"); q < 1<<20-64<<10 {
		t.Errorf("the clients held back with %v bytes queued of 1MiB", q)
	}
	// The sink is reported stalled once a write has waited 10s.
	waitFor("/readyz not ready", 30*time.Second, func() bool {
		code, _ := httpGet(t, adminURL+"/readyz")
		return code != 200
	})
	if p := progress.Load(); p != heldAt {
		t.Errorf("the clients went on with the audit cluster away: %d operations, held at %d", p, heldAt)
	}

	restartCtx, restartCancel := context.WithTimeout(ctx, 3*time.Minute)
	defer restartCancel()
	cmd := exec.CommandContext(restartCtx, "../testenv/kafka/node.sh", "audit", "1")
	cmd.Env = append(os.Environ(), "KAFKA_RUN_DIR="+runDir)
	restarted := time.Now()
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting the audit node: %v\n%s", err, o)
	}
	portOpen := time.Since(restarted)
	waitFor("progress after the restart", 3*time.Minute, func() bool { return progress.Load() >= heldAt+300 })
	resumed := time.Since(restarted)
	waitFor("the audit sink up", time.Minute, func() bool {
		code, _ := httpGet(t, adminURL+"/readyz")
		return code == 200
	})
	t.Logf("killed after %d operations; clients held back after %v at %d; node's port open %v after its restart, clients going again after %v",
		atKill, heldAfter.Round(time.Millisecond), heldAt, portOpen.Round(time.Millisecond), resumed.Round(time.Millisecond))

	stopLoops()
	if err := failed(); err != nil {
		t.Fatalf("a client failed: %v", err)
	}
	for _, cl := range []*kgo.Client{alice, bob, carol} {
		cl.Close()
	}
	waited := metric("inorder_audit_enqueue_wait_seconds_total")
	if waited <= 0 {
		t.Errorf("inorder_audit_enqueue_wait_seconds_total = %v after the clients were held back", waited)
	}
	dropped := metric(`inorder_audit_dropped_total{reason="full"}`) + metric(`inorder_audit_dropped_total{reason="cancelled"}`)
	stopped = true
	if err := stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, errOut.String())
	}
	if dropped != 0 {
		t.Errorf("%v events dropped", dropped)
	}
	t.Logf("connections held back %.1fs in total", waited)

	fileBytes, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fileLines := readTrailLines(t, string(fileBytes))
	stdoutLines := readTrailLines(t, stdout())
	if len(stdoutLines) != len(fileLines) {
		t.Errorf("standard output holds %d events, the file %d", len(stdoutLines), len(fileLines))
	}
	for i := range min(len(stdoutLines), len(fileLines)) {
		if string(stdoutLines[i]) != string(fileLines[i]) {
			t.Fatalf("event %d differs:\nstdout %s\nfile   %s", i, stdoutLines[i], fileLines[i])
		}
	}

	// The file: each event once, by its id; each principal's ids in order.
	byID := map[string][]byte{}
	order := map[string][]string{}
	var events []auditEvent
	for _, l := range fileLines {
		var e auditEvent
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if _, ok := byID[e.ID]; ok {
			t.Fatalf("the file holds %s twice", e.ID)
		}
		byID[e.ID] = l
		order[e.Principal] = append(order[e.Principal], e.ID)
		events = append(events, e)
	}

	// The topic, read whole up to its end offsets.
	reader, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ends, err := kadm.NewClient(reader).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	seen := map[string]int{}
	kafkaOrder := map[string][]string{}
	records := 0
	reached := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !reached() {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading the audit topic: %v (at %v of %v)", err, next, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading the audit topic: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			records++
			next[r.Partition] = r.Offset + 1
			var e auditEvent
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatalf("record %d/%d is not an event: %v", r.Partition, r.Offset, err)
			}
			if string(r.Key) != e.Principal {
				t.Errorf("record %d/%d: key %q, principal %q", r.Partition, r.Offset, r.Key, e.Principal)
			}
			seen[e.ID]++
			if seen[e.ID] > 1 {
				return
			}
			kafkaOrder[e.Principal] = append(kafkaOrder[e.Principal], e.ID)
			if l, ok := byID[e.ID]; !ok {
				t.Errorf("the topic holds %s, the file not", e.ID)
			} else if string(l) != string(r.Value) {
				t.Errorf("%s differs:\ntopic %s\nfile  %s", e.ID, r.Value, l)
			}
		})
	}
	dups := 0
	for id, n := range seen {
		if n > 1 {
			dups += n - 1
			t.Errorf("the topic holds %s %d times", id, n)
		}
	}
	missing := 0
	for id := range byID {
		if seen[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the file's %d events are not on the topic", missing, len(byID))
	}
	for p, ids := range order {
		if strings.Join(ids, " ") != strings.Join(kafkaOrder[p], " ") && missing == 0 {
			t.Errorf("%s's events are in another order on the topic than in the file", p)
		}
	}

	// The events against what the clients did.
	type key struct{ principal, kind string }
	got := map[key]int{}
	recs := map[string]int64{}
	var denied []auditEvent
	for _, e := range events {
		kind, principal := e.APIKey, e.Principal
		if e.Type == "io.inorder.audit.authentication" {
			kind = "authentication"
			if e.Reason != "" {
				// Refused before any principal was established: the
				// event names none, and whom the client claimed apart.
				if e.Principal != "User:ANONYMOUS" || e.Claimed != "User:mallory" {
					t.Errorf("refused login: principal %q, claimed %q; want User:ANONYMOUS, User:mallory", e.Principal, e.Claimed)
				}
				kind, principal = "authentication refused", "refused"
			}
		}
		got[key{principal, kind}]++
		if e.Decision == "deny" && e.Type == "io.inorder.audit.request" {
			denied = append(denied, e)
		}
		if e.APIKey == "Produce" {
			for _, r := range e.Resources {
				for _, p := range r.Partitions {
					recs[e.Principal] += p.Records
				}
			}
		}
	}
	check := func(principal, kind string, want int64) {
		t.Helper()
		if g := got[key{principal, kind}]; int64(g) != want {
			t.Errorf("%s: %d %s events, the client did %d", principal, g, kind, want)
		}
	}
	for p, c := range counters {
		// One SASL exchange per connection, begun by its handshake.
		if p == "User:mallory" {
			check("refused", "authentication refused", c.n[17].Load())
			check(p, "authentication", 0)
		} else {
			check(p, "authentication", c.n[17].Load())
		}
		check(p, "Produce", c.n[0].Load())
		check(p, "OffsetCommit", c.n[8].Load())
		check(p, "EndTxn", c.n[26].Load())
		check(p, "CreateTopics", c.n[19].Load())
	}
	if n := got[key{"User:bob", "EndTxn"}]; int64(n) != txns.Load() {
		t.Errorf("%d EndTxn events for %d transactions", n, txns.Load())
	}
	if n := got[key{"User:carol", "OffsetCommit"}]; int64(n) != commits.Load() {
		t.Errorf("%d OffsetCommit events for %d commits", n, commits.Load())
	}
	if recs["User:alice"] != plainRecs.Load() || recs["User:bob"] != txnRecs.Load() {
		t.Errorf("records in Produce events: alice %d, bob %d; produced %d and %d",
			recs["User:alice"], recs["User:bob"], plainRecs.Load(), txnRecs.Load())
	}
	if len(denied) != 1 || denied[0].Principal != "User:alice" || denied[0].APIKey != "CreateTopics" ||
		len(denied[0].Resources) != 1 || denied[0].Resources[0].Name != "secret" {
		t.Errorf("denied events %+v, want alice's CreateTopics of secret", denied)
	}
	t.Logf("%d events in each sink (%d on the topic, %d duplicates): %d Produce of %d plain and %d transactional records, %d EndTxn, %d OffsetCommit, %d CreateTopics, %d authentications, %d refused, %d denied",
		len(fileLines), records, dups, got[key{"User:alice", "Produce"}]+got[key{"User:bob", "Produce"}], plainRecs.Load(), txnRecs.Load(),
		got[key{"User:bob", "EndTxn"}], got[key{"User:carol", "OffsetCommit"}], got[key{"User:alice", "CreateTopics"}],
		got[key{"User:alice", "authentication"}]+got[key{"User:bob", "authentication"}]+got[key{"User:carol", "authentication"}],
		got[key{"refused", "authentication refused"}], len(denied))
}
