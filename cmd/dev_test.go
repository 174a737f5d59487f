package cmd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/inorder-proxy/inorder/devcluster"
)

// run runs the CLI with args under ctx and returns its stdout, stderr and
// error.
func run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func produce(t *testing.T, addr, topic, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// topicExists asks addr whether topic exists, without creating it.
func topicExists(t *testing.T, addr, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
}

// TestDevStopDuringStartUp stops dev at several points of its start-up, as
// a SIGINT would: every stop is a normal one (no error, so exit 0), and
// the data directory still opens and keeps what was written before.
func TestDevStopDuringStartUp(t *testing.T) {
	data := t.TempDir()
	args := []string{"dev", "--listen", "127.0.0.1:0", "--data-dir", data, "--shutdown-grace", "2s"}
	addr, stop := start(t, args...)
	produce(t, addr, "before", "kept")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, stderr, err := run(canceled, args...)
	if err != nil || !strings.Contains(stderr, "stopped during start-up") {
		t.Fatalf("stopped before start-up: %v\n%s", err, stderr)
	}
	for _, after := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		_, stderr, err := run(ctx, args...)
		cancel()
		if err != nil {
			t.Fatalf("stopped %v into start-up: %v\n%s", after, err, stderr)
		}
		if !regexp.MustCompile(`msg="?stopped`).MatchString(stderr) {
			t.Errorf("stopped %v into start-up: no final stopped line:\n%s", after, stderr)
		}
	}
	addr, stop = start(t, args...)
	defer stop()
	if !topicExists(t, addr, "before") {
		t.Fatal("the topic written before the interrupted start-ups is gone")
	}
}

// TestDevPrintsBrokerAndLogsStop checks that dev prints the embedded
// broker's own address, which a client can use directly, and that a stop
// ends with a "stopped" line naming what was drained.
func TestDevPrintsBrokerAndLogsStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	root := newRootCommand()
	root.SetArgs([]string{"dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--brokers", "1", "--shutdown-grace", "2s"})
	root.SetOut(out)
	root.SetErr(errOut)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	proxyRe := regexp.MustCompile(`clients connect to (\S+)`)
	brokerRe := regexp.MustCompile(`embedded broker at (\S+) \(direct`)
	deadline := time.Now().Add(20 * time.Second)
	for !proxyRe.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no address printed:\n%s\n%s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	proxyAddr := proxyRe.FindStringSubmatch(out.String())[1]
	m := brokerRe.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no embedded broker address printed:\n%s", out.String())
	}
	if m[1] == proxyAddr {
		t.Fatalf("the direct address is the proxy's own: %s", m[1])
	}
	produce(t, m[1], "direct", "bypasses the proxy")
	if !topicExists(t, proxyAddr, "direct") {
		t.Fatal("a topic written directly is not seen through the proxy: the printed address is not the embedded broker")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"msg=stopped", "connections=", "drained=true", "took="} {
		if !strings.Contains(last, want) {
			t.Errorf("last log line %q lacks %q", last, want)
		}
	}
}

// TestDevReset checks that --reset starts from an empty data directory,
// and that it refuses a directory that is not the broker's.
func TestDevReset(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	args := []string{"dev", "--listen", "127.0.0.1:0", "--data-dir", data, "--shutdown-grace", "2s"}
	addr, stop := start(t, args...)
	produce(t, addr, "doomed", "x")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	addr, stop = start(t, append(args, "--reset")...)
	if topicExists(t, addr, "doomed") {
		t.Error("the topic survived --reset")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	other := t.TempDir()
	keep := filepath.Join(other, "notes.txt")
	os.WriteFile(keep, []byte("mine"), 0o600)
	_, _, err := run(context.Background(), "dev", "--listen", "127.0.0.1:0", "--data-dir", other, "--reset")
	if err == nil || !strings.Contains(err.Error(), "not an embedded cluster's data directory") {
		t.Fatalf("--reset on a foreign directory: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("--reset deleted a foreign file: %v", err)
	}
}

// TestDevAutoCreatesForOldAndNewClients names a new topic through the
// proxy with Metadata v1 (as kafka-python does) and with the newest
// version: both are created, with --default-partitions partitions.
func TestDevAutoCreatesForOldAndNewClients(t *testing.T) {
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--default-partitions", "2")
	defer stop()
	for _, tc := range []struct {
		topic string
		opts  []kgo.Opt
	}{
		{"old-client", []kgo.Opt{kgo.MaxVersions(kversion.V0_10_0())}},
		{"new-client", nil},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cl, err := kgo.NewClient(append(tc.opts, kgo.SeedBrokers(addr))...)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tc.topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = true
		resp, err := req.RequestWith(ctx, cl)
		cl.Close()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if tc.opts != nil && resp.Version != 1 {
			t.Fatalf("%s: Metadata sent at v%d, want v1", tc.topic, resp.Version)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
			t.Errorf("%s (Metadata v%d): %+v; want created with 2 partitions", tc.topic, resp.Version, resp.Topics)
		}
	}
}

// TestDevSingleCreateTopics: through `dev --topology single`, a fresh
// connection's first request, a CreateTopics, is answered by the embedded
// cluster's controller, also after an old client's Metadata v0 (whose
// answer names no controller), and the topic gets the partitions asked
// for. A raw connection, since kgo would retry a NOT_CONTROLLER answer.
func TestDevSingleCreateTopics(t *testing.T) {
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--topology", "single")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		old, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V0_9_0()))
		if err != nil {
			t.Fatal(err)
		}
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, old)
		old.Close()
		if err != nil || md.Version != 0 {
			t.Fatalf("old client's Metadata: v%d, %v; want v0", md.GetVersion(), err)
		}

		topic := "single-create-" + strconv.Itoa(i)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 3, 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 4, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		_, err = c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("fresh")).AppendRequest(nil, req, 1))
		var frame []byte
		if err == nil {
			frame, err = readFrame(c)
		}
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.Version = 3
		if err := resp.ReadFrom(frame[4:]); err != nil { // the correlation id
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %+v", topic, resp.Topics)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Topics = []kmsg.MetadataRequestTopic{mt}
		got, err := mreq.RequestWith(ctx, cl)
		cl.Close()
		if err != nil || len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 4 {
			t.Fatalf("%s: %+v, %v; want 4 partitions", topic, got, err)
		}
	}
}

// readFrame reads one length-prefixed frame from c, without its prefix.
func readFrame(c net.Conn) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(c, frame)
	return frame, err
}

// TestDevDataDirIsExclusive runs a second dev on the data directory of a
// running one: it is refused, naming the holder's process and the flag to
// change, before anything starts; --reset on that directory is refused
// and deletes nothing; a dev whose port is taken starts no broker either.
func TestDevDataDirIsExclusive(t *testing.T) {
	data := t.TempDir()
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", data, "--brokers", "1", "--shutdown-grace", "2s")
	defer stop()
	produce(t, addr, "first", "kept")

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--data-dir", data}, []string{"--data-dir " + data + ": in use by another inorder dev (pid " + strconv.Itoa(os.Getpid()) + ")", "choose another --data-dir"}},
		{[]string{"--data-dir", data, "--reset"}, []string{"--reset: --data-dir " + data + " is in use by another inorder dev (pid " + strconv.Itoa(os.Getpid()) + ")", "not touched"}},
	} {
		args := append([]string{"dev", "--listen", "127.0.0.1:0", "--brokers", "1", "--shutdown-grace", "0s"}, tc.args...)
		// A dev that wrongly starts runs until this context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, stderr, err := run(ctx, args...)
		cancel()
		if err == nil {
			t.Errorf("%v: a second dev on a data directory in use started", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.args, err, w)
			}
		}
		if !errors.Is(err, devcluster.ErrLocked) {
			t.Errorf("%v: error %q is not ErrLocked", tc.args, err)
		}
		if strings.Contains(stderr, "embedded broker started") {
			t.Errorf("%v: a refused dev started its broker:\n%s", tc.args, stderr)
		}
	}
	if !topicExists(t, addr, "first") {
		t.Fatal("a refused --reset deleted the running dev's data")
	}

	_, stderr, err := run(context.Background(), "dev", "--listen", addr, "--data-dir", "", "--brokers", "1")
	want := "--listen " + addr + ": address already in use (is inorder dev running? choose another --listen)"
	if err == nil || err.Error() != want {
		t.Fatalf("dev on a taken port: %v, want %q", err, want)
	}
	if strings.Contains(stderr, "embedded broker started") {
		t.Errorf("a dev that cannot listen started its broker:\n%s", stderr)
	}
}

// TestDevRefusesBadCounts gives dev broker and partition counts Kafka
// would never run with: each is refused with the flag and the value,
// before anything starts (a negative broker count used to panic, and 0
// started three brokers while logging 0).
func TestDevRefusesBadCounts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--brokers", "-2"}, `--brokers: "-2" must be at least 1`},
		{[]string{"--brokers", "0"}, `--brokers: "0" must be at least 1`},
		{[]string{"--default-partitions", "0"}, `--default-partitions: "0" must be at least 1`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, stderr, err := run(ctx, append([]string{"dev", "--listen", "127.0.0.1:0", "--data-dir", ""}, tc.args...)...)
		cancel()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if strings.Contains(stderr, "embedded broker started") {
			t.Errorf("%v: the broker started:\n%s", tc.args, stderr)
		}
	}
}

// TestDevRefusesPortsThatCannotWorkBeforeStarting checks that a port
// layout that cannot work is refused as asked wrongly (exit 2) before
// anything starts: nothing printed, nothing logged, the data directory
// not created.
func TestDevRefusesPortsThatCannotWorkBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	listenFile := filepath.Join(dir, "dev.yaml")
	os.WriteFile(listenFile, []byte("brokers: 2\nlisten: 127.0.0.1:65534\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:65534"},
			`--listen: "127.0.0.1:65534" puts node 1 on port 65536, past 65535 (with --brokers 3, the nodes take the 3 ports above it and the embedded brokers the next 3: choose a port up to 65529, or 0 for free ports)`},
		{[]string{"--listen", "127.0.0.1:65531"},
			`--listen: "127.0.0.1:65531" puts embedded broker 1 on port 65536, past 65535 (with --brokers 3, the nodes take the 3 ports above it and the embedded brokers the next 3: choose a port up to 65529, or 0 for free ports)`},
		{[]string{"--listen", "127.0.0.1:65533", "--topology", "single"},
			`--listen: "127.0.0.1:65533" puts embedded broker 2 on port 65536, past 65535 (with --brokers 3, the embedded brokers take the 3 ports above it: choose a port up to 65532, or 0 for free ports)`},
		{[]string{"--listen", "127.0.0.1:40000", "--node-port-base", "65531"},
			`--node-port-base: "65531" puts embedded broker 2 on port 65536, past 65535 (with --brokers 3, the nodes take the 3 ports from it and the embedded brokers the next 3: choose a base up to 65530)`},
		{[]string{"--listen", "127.0.0.1:65533", "--node-port-base", "40000"},
			`--listen: "127.0.0.1:65533" puts embedded broker 2 on port 65536, past 65535 (with --brokers 3, the embedded brokers take the 3 ports above it: choose a port up to 65532, or 0 for free ports)`},
		{[]string{"--config", listenFile},
			"config file " + listenFile + `:2: listen: "127.0.0.1:65534" puts node 1 on port 65536, past 65535 (with --brokers 2, the nodes take the 2 ports above it and the embedded brokers the next 2: choose a port up to 65531, or 0 for free ports)`},
		{[]string{"--listen", "127.0.0.1:0", "--node-port-base", "65534"},
			`--node-port-base: "65534" puts node 2 on port 65536, past 65535 (with --brokers 3, the nodes take the 3 ports from it: choose a base up to 65533)`},
		{[]string{"--listen", "127.0.0.1:40000", "--node-port-base", "39999"},
			`--node-port-base: "39999" puts node 1 on the --listen port, 40000 (node N listens on --node-port-base + N)`},
		{[]string{"--listen", "127.0.0.1:40000", "--admin-listen", "127.0.0.1:40002"},
			`--admin-listen: "127.0.0.1:40002" is on node 1's port (choose another port, or 0 for a free one)`},
		{[]string{"--listen", "127.0.0.1:40000", "--admin-listen", "127.0.0.1:40004"},
			`--admin-listen: "127.0.0.1:40004" is on embedded broker 0's port (choose another port, or 0 for a free one)`},
		{[]string{"--listen", "0.0.0.0:40000", "--admin-listen", "localhost:40000"},
			`--admin-listen: "localhost:40000" is on the --listen port (choose another port, or 0 for a free one)`},
		{[]string{"--listen", "127.0.0.1:0", "--node-port-base", "40000", "--admin-listen", ":40000"},
			`--admin-listen: ":40000" is on node 0's port (choose another port, or 0 for a free one)`},
		{[]string{"--admin-listen", "127.0.0.1:99999"},
			`--admin-listen: "127.0.0.1:99999" has no port between 0 and 65535 (0 picks a free one; empty: no admin endpoint)`},
	} {
		data := filepath.Join(dir, "data")
		code, stdout, stderr := runCLI(t, append([]string{"dev", "--data-dir", data}, tc.args...)...)
		if code != exitUsage || stderr != "inorder: "+tc.want+"\n" {
			t.Errorf("%v: exit %d, stderr\n\t%s\nwant exit %d and\n\tinorder: %s", tc.args, code, stderr, exitUsage, tc.want)
		}
		if stdout != "" {
			t.Errorf("%v: printed before refusing:\n%s", tc.args, stdout)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the data directory was touched (%v)", tc.args, err)
		}
	}
}

// freePorts returns a port p such that p to p+n-1 are free on loopback.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 20 {
		p, _ := strconv.Atoi(strings.TrimPrefix(freeAddr(t), "127.0.0.1:"))
		if p+n > 65536 {
			continue
		}
		var held []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		for _, ln := range held {
			ln.Close()
		}
		if len(held) == n {
			return p
		}
	}
	t.Fatalf("no %d free ports in a row on loopback", n)
	return 0
}

// TestDevDirectAddressesFollowListen checks that the embedded brokers'
// direct addresses are the same at every start, just above the proxy's
// node ports, so that a --compare direct=... line can be reused.
func TestDevDirectAddressesFollowListen(t *testing.T) {
	p := freePorts(t, 5)
	listen := "127.0.0.1:" + strconv.Itoa(p)
	want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", p+3, p+4)
	brokerRe := regexp.MustCompile(`embedded broker at (\S+) \(direct`)
	for i := range 2 {
		addr, out, stop := startOutput(t, "dev", "--listen", listen, "--data-dir", "", "--brokers", "2", "--shutdown-grace", "2s")
		m := brokerRe.FindStringSubmatch(out.String())
		if addr != listen || m == nil || m[1] != want {
			t.Errorf("start %d: clients at %s, direct at %v; want %s and %s:\n%s", i+1, addr, m, listen, want, out.String())
		}
		if i == 0 && m != nil {
			produce(t, strings.Split(m[1], ",")[0], "direct", "bypasses the proxy")
			if !topicExists(t, addr, "direct") {
				t.Error("a topic written to the first direct address is not seen through the proxy")
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDevDirectPortTaken checks that an embedded broker's port in use
// fails the start (exit 1) with the broker, its address and the way out,
// before any address is printed.
func TestDevDirectPortTaken(t *testing.T) {
	p := freePorts(t, 3)
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+2))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, stdout, stderr := runCLI(t, "dev", "--listen", "127.0.0.1:"+strconv.Itoa(p), "--data-dir", "", "--brokers", "1")
	want := fmt.Sprintf("inorder: embedded broker 0 at 127.0.0.1:%d: address already in use (the embedded brokers listen just above the proxy's ports: free the port, or choose another --listen; --listen port 0 picks free ports)\n", p+2)
	if code != exitFailed || !strings.HasSuffix(stderr, want) || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr\n%s\nwant exit %d, nothing printed, and\n%s", code, stdout, stderr, exitFailed, want)
	}
}
