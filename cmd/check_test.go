package cmd

import (
	"bytes"
	"context"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/internal/hostile"
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

// TestCheckJUnitThroughDev runs the check as a CI gate would, in JUnit
// form, against `inorder dev`.
func TestCheckJUnitThroughDev(t *testing.T) {
	addr, stop := start(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--shutdown-grace", "1s")
	defer stop()
	code, out, errOut := runCLI(t, "check", "--bootstrap", addr, "--requests", "200", "--format", "junit")
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &suites); err != nil {
		t.Fatalf("stdout is not JUnit XML: %v\n%s", err, out)
	}
	if len(suites.Suites) != 1 || suites.Suites[0].Tests != 5 || suites.Suites[0].Failures != 0 {
		t.Fatalf("junit: %+v\n%s", suites, out)
	}
}
