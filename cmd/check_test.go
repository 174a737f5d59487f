package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/admin"
	"github.com/inorder-proxy/inorder/check"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/junit"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/verify"
)

// runCLI runs the command line to its end and returns its exit status and
// standard output and error.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString("inorder: " + err.Error() + "\n")
	}
	return exitCode(err), out.String(), errOut.String()
}

func TestCheckExitStatus(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	r, err := hostile.NewReorderer(hostile.ReordererConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	refused, err := hostile.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		addr string
		code int
		out  string
	}{
		{"kfake holds", kc.ListenAddrs()[0], 0, "ordering holds: 5 properties"},
		{"reorderer violates", r.Addr(), 1, "ordering violated: 5 of 5"},
		{"unreachable", refused, 2, "error: check could not run (unreachable)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "check", "--bootstrap", tc.addr, "--requests", "100", "--dial-timeout", "2s")
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if code == 2 && !strings.Contains(errOut, "unreachable") {
				t.Fatalf("stderr does not give the reason:\n%s", errOut)
			}
			if code != 2 && (!strings.Contains(errOut, "inorder check:") || strings.Contains(out, "inorder check:")) {
				t.Fatalf("progress belongs on stderr only; stdout:\n%s\nstderr:\n%s", out, errOut)
			}
		})
	}
}

// TestCheckBootstrapWithoutPort: an address without a port is a usage
// error, said once (not in the report on stdout and again on stderr) and
// before any dial.
func TestCheckBootstrapWithoutPort(t *testing.T) {
	for _, format := range []string{"text", "json", "junit"} {
		code, out, errOut := runCLI(t, "check", "-b", "127.0.0.1", "--format", format)
		const want = `--bootstrap: "127.0.0.1" is not HOST:PORT (for example 127.0.0.1:9092)`
		all := out + errOut
		if code != 2 || strings.Count(all, want) != 1 || strings.Count(all, "127.0.0.1") != 2 {
			t.Fatalf("%s: exit %d, want 2 and the message %q once; stdout:\n%s\nstderr:\n%s", format, code, want, out, errOut)
		}
		if strings.Contains(all, "unreachable") || strings.Contains(all, "missing port") {
			t.Fatalf("%s: reported as a dial failure; stdout:\n%s\nstderr:\n%s", format, out, errOut)
		}
	}
	if _, err := check.Run(context.Background(), check.Options{Bootstrap: "127.0.0.1"}); !errors.Is(err, check.ErrOptions) {
		t.Fatalf("check.Run without a port: %v, want ErrOptions", err)
	}
}

// TestCheckAdminEndpoint: pointed at the admin endpoint, an HTTP port,
// check says so at once and exits 2, rather than reading "HTTP" as a
// frame length after the endpoint's header timeout.
func TestCheckAdminEndpoint(t *testing.T) {
	adm, err := admin.Listen(admin.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	go adm.Serve()
	defer adm.Shutdown(context.Background())
	start := time.Now()
	code, out, errOut := runCLI(t, "check", "-b", adm.Addr())
	const want = "the address answered HTTP: it is not a Kafka port (an HTTP endpoint, such as inorder's --admin-listen); give --bootstrap a Kafka listener"
	if code != 2 || !strings.Contains(out, "error: check could not run (not Kafka): ") || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, want 2 saying %q; stdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to say so", d)
	}
}

// TestCheckJUnitThroughDev runs the check as a CI gate would, in JUnit
// form, against `inorder dev`.
func TestCheckJUnitThroughDev(t *testing.T) {
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--shutdown-grace", "1s")
	defer stop()
	code, out, errOut := runCLI(t, "check", "--bootstrap", addr, "--requests", "200", "--format", "junit")
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	suite, err := junit.Read([]byte(out))
	if err != nil {
		t.Fatalf("stdout is not JUnit XML: %v\n%s", err, out)
	}
	if suite.Tests != 5 || suite.Failures != 0 {
		t.Fatalf("junit: %+v\n%s", suite, out)
	}
}

// TestServeVerifyFailOnViolation runs serve with --verify, --report and
// --fail-on-violation in front of the reorderer: pipelined writes make it
// reorder, and the process must exit with status 3 and a report saying so.
func TestServeVerifyFailOnViolation(t *testing.T) {
	r, err := hostile.NewReorderer(hostile.ReordererConfig{KfakeOpts: []kfake.Opt{kfake.SeedTopics(1, "t")}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	report := filepath.Join(t.TempDir(), "verify.json")
	addr, stop := start(t, "serve", "--listen", "127.0.0.1:0", "--upstream", r.Addr(), "--upstream-ordering", "connection",
		"--verify", "--report", report, "--fail-on-violation", "--shutdown-grace", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pipeprobe.ProducePipelined(ctx, addr, "t", 0, 300, pipeprobe.Options{}); err != nil {
		t.Fatal(err)
	}
	err = stop()
	if code := exitCode(err); code != 3 {
		t.Fatalf("exit status %d (%v), want 3; the reorderer reordered %d", code, err, r.Reordered())
	}
	raw, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var rep verify.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	if rep.Total() == 0 || rep.Requests["Produce"] != 300 || !strings.Contains(err.Error(), "violations") {
		t.Fatalf("report %+v, error %v", rep, err)
	}
}

// TestDevVerifyQuiet runs dev with --verify and a JUnit report: the check
// passes through it, nothing is counted, and the exit status is 0.
func TestDevVerifyQuiet(t *testing.T) {
	report := filepath.Join(t.TempDir(), "verify.xml")
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--shutdown-grace", "1s",
		"--verify", "--report", report, "--fail-on-violation")
	if code, out, errOut := runCLI(t, "check", "--bootstrap", addr, "--requests", "100"); code != 0 {
		t.Fatalf("check exit %d\n%s\n%s", code, out, errOut)
	}
	if err := stop(); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	suite, err := junit.Read(raw)
	if err != nil || suite.Tests != 4 || suite.Failures != 0 {
		t.Fatalf("report: %v %+v\n%s", err, suite, raw)
	}
}

func TestReportRequiresVerify(t *testing.T) {
	code, _, errOut := runCLI(t, "serve", "--upstream", "127.0.0.1:1", "--report", "x.json")
	if code != exitUsage || !strings.Contains(errOut, `--report: "x.json" needs --verify`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestUsageErrorsExit2 gives every command a command line it cannot run:
// each exits 2 with the reason, never 1, which check keeps for a
// violation seen and the other commands for a failure while running.
func TestUsageErrorsExit2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte("unknown-key: 1\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--format", "xml"}, `--format: "xml" must be text, json or junit`},
		{[]string{"check", "--requests", "-5"}, `--requests: "-5" must be between 3 and 1000000`},
		{[]string{"check", "--requests", "0"}, `--requests: "0" must be between 3 and 1000000`},
		{[]string{"check", "--window", "0"}, `--window: "0" must be at least 1`},
		{[]string{"check", "--timeout", "0s"}, `--timeout: "0s" must be positive`},
		{[]string{"check", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"check", "extra"}, `takes flags only`},
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"serve"}, "--upstream"},
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--max-in-flight", "0"}, `--max-in-flight: "0"`},
		{[]string{"serve", "--config", file}, `unknown key "unknown-key"`},
		{[]string{"serve", "--config", file + ".missing"}, "no such file"},
		{[]string{"dev", "--brokers", "x"}, `--brokers: "x" is not a whole number`},
		{[]string{"dev", "--brokers", "0"}, `--brokers: "0" must be at least 1`},
		{[]string{"bench", "relay"}, `--to is required`},
		{[]string{"bench", "--acks", "2"}, `--acks: "2"`},
		{[]string{"version", "--x"}, "unknown flag: --x"},
		{[]string{"bogus"}, `unknown command "bogus"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q; stderr:\n%s", tc.args, code, exitUsage, tc.want, stderr)
		}
	}
	// A failure while running is not a usage error.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if code, _, stderr := runCLI(t, "serve", "--upstream", "127.0.0.1:1", "--listen", taken.Addr().String()); code != exitFailed {
		t.Errorf("serve on a taken port: exit %d, want %d; stderr:\n%s", code, exitFailed, stderr)
	}
}

// TestJSONReportsHaveNoNull checks that the JSON reports write an empty
// list as [] rather than null: the verifier's report of a run that saw no
// violation, and check's of a run that could not check anything.
func TestJSONReportsHaveNoNull(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "kept"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	report := filepath.Join(t.TempDir(), "verify.json")
	addr, stop := start(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0], "--verify", "--report", report, "--shutdown-grace", "1s")
	produce(t, addr, "kept", "x")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Violations []struct {
			Kind     string            `json:"kind"`
			Examples []json.RawMessage `json:"examples"`
		} `json:"violations"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Violations) == 0 {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	if bytes.Contains(raw, []byte("null")) {
		t.Errorf("the verifier's report writes null:\n%s", raw)
	}

	refused, err := hostile.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "check", "--bootstrap", refused, "--dial-timeout", "1s", "--format", "json")
	if code != exitCannotRun || bytes.Contains([]byte(out), []byte("null")) || !strings.Contains(out, `"properties": []`) {
		t.Errorf("check --format json that could not run: exit %d\n%s", code, out)
	}
}
