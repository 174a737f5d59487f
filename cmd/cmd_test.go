package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the CLI with args until the returned stop is called, and
// returns the address it prints.
func start(t *testing.T, args ...string) (addr string, stop func() error) {
	t.Helper()
	addr, _, stop = startOutput(t, args...)
	return addr, stop
}

// startOutput is start that also returns what the CLI prints on stdout.
func startOutput(t *testing.T, args ...string) (addr string, out *syncBuffer, stop func() error) {
	t.Helper()
	addr, out, _, stop = startStreams(t, args...)
	return addr, out, stop
}

// startStreams is start that also returns what the CLI prints on stdout
// and stderr.
func startStreams(t *testing.T, args ...string) (addr string, out, errOut *syncBuffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root, out, errOut := newCLI(args...)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	re := regexp.MustCompile(`clients connect to (\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("inorder %v exited: %v\n%s", args, err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("inorder %v printed no address; stderr:\n%s", args, errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr, out, errOut, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("inorder did not stop within 30s of its signal")
			return nil
		}
	}
}

// TestDevKeepsRecordsAcrossRestart runs `inorder dev`, produces a record,
// stops it as SIGTERM would, starts it again on the same data directory and
// reads the record back.
func TestDevKeepsRecordsAcrossRestart(t *testing.T) {
	data := t.TempDir()
	args := []string{"dev", "--listen", "127.0.0.1:0", "--data-dir", data, "--shutdown-grace", "2s"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	addr, stop := start(t, args...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Value: []byte("survives restarts")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := stop(); err != nil {
		t.Fatalf("dev exited with %v on shutdown", err)
	}

	addr, stop = start(t, args...)
	defer stop()
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kept"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "survives restarts" {
		t.Fatalf("after restart read %d records: %v", len(recs), recs)
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "inorder.yaml")
	os.WriteFile(file, []byte("upstream: 127.0.0.1:9092\nupstream-ordering: bogus\n"), 0o600)
	world := filepath.Join(t.TempDir(), "password")
	os.WriteFile(world, []byte("secret\n"), 0o644)
	secret := filepath.Join(t.TempDir(), "secure.yaml")
	os.WriteFile(secret, []byte("upstream: 127.0.0.1:9092\nupstream-sasl-mechanism: PLAIN\nupstream-sasl-username: u\nupstream-sasl-password-file: "+world+"\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--config", file}, []string{"upstream-ordering", "bogus"}},
		{[]string{"serve", "--listen", "127.0.0.1:0"}, []string{"upstream", "required"}},
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--max-in-flight", "0"}, []string{"max-in-flight", "0"}},
		{[]string{"serve", "--config", secret}, []string{"upstream-sasl-password-file", world, "readable by other users"}},
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--listen", "0.0.0.0:9092", "--upstream-sasl-mechanism", "PLAIN", "--upstream-sasl-username", "u"},
			[]string{"tls-client-ca", "allow-unauthenticated-clients"}},
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--upstream-sasl-password", "x"}, []string{"unknown flag"}},
		{[]string{"dev", "--upstream-tls", "--data-dir", ""}, []string{"--upstream-tls", "does not apply to dev"}},
	} {
		root := newRootCommand()
		root.SetArgs(tc.args)
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		if err == nil {
			t.Fatalf("%v accepted", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not mention %q", tc.args, err, w)
			}
		}
	}
}

func TestNodePortOutOfRange(t *testing.T) {
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--brokers", "2")
	defer stop()
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", addr, "--node-port-base", "65535", "--dial-timeout", "5s"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("serve with node ports past 65535: %v", err)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetArgs([]string{"version"})
	root.SetOut(&out)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version:", "revision:", "go:        " + runtime.Version(), "platform:  " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/inorder-proxy/inorder", Version: "v0.3.0"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}},
	}
	for _, tc := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   []string
	}{
		{"", bi, []string{"version:   v0.3.0\n", "revision:  0123abcd (modified", "go:        go1.99.1\n"}},
		{"v1.2.3", bi, []string{"version:   v1.2.3\n", "revision:  0123abcd (modified"}},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, []string{"version:   (devel), built from source\n", "revision:  unknown"}},
		{"", nil, []string{"version:   (unknown)\n", "platform:  " + runtime.GOOS + "/" + runtime.GOARCH}},
	} {
		var out bytes.Buffer
		if err := readBuildInfo(tc.linked, tc.bi, tc.bi != nil).write(&out); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("linked %q: output lacks %q:\n%s", tc.linked, w, out.String())
			}
		}
	}
	var out bytes.Buffer
	bi.Settings[1].Value = "false"
	readBuildInfo("", bi, true).write(&out)
	if strings.Contains(out.String(), "modified") {
		t.Errorf("clean tree reported as modified:\n%s", out.String())
	}
}
