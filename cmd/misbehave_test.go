package cmd

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// startBenchBroker runs `inorder bench broker` with args and returns the
// address it listens on and a stop that ends it as a signal would and
// returns its standard output. The test stops it at the end if it did not.
func startBenchBroker(t *testing.T, args ...string) (addr string, stop func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root, out, errOut := newCLI(append([]string{"bench", "broker"}, args...)...)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var once sync.Once
	stop = func() string {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bench broker %v: %v", args, err)
			}
		})
		return out.String()
	}
	t.Cleanup(func() { stop() })
	re := regexp.MustCompile(`listening (\S+)`)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], stop
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("bench broker %v exited: %v\n%s", args, err, errOut.String())
		default:
		}
	}
	t.Fatalf("bench broker %v printed no address; stderr:\n%s", args, errOut.String())
	return "", nil
}

// TestMisbehavingBrokerFailsTheGates runs the README's recipe for seeing
// the gates fail: `bench broker --misbehave reorder` fails `check` directly
// (exit 1), passes it through `serve`, and makes a trusting `serve
// --verify --fail-on-violation` in front of it count violations and exit 3.
func TestMisbehavingBrokerFailsTheGates(t *testing.T) {
	addr, stopBroker := startBenchBroker(t, "--misbehave", "reorder")

	code, out, errOut := runCLI(t, "check", "-b", addr, "--requests", "200", "-q")
	if code != 1 || !strings.Contains(out, "ordering violated: 5 of 5") {
		t.Fatalf("check against the reordering broker: exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	proxied, stop := start(t, "serve", "--listen", "127.0.0.1:0", "--upstream", addr, "--shutdown-grace", "1s")
	code, out, errOut = runCLI(t, "check", "-b", proxied, "--requests", "200", "-q")
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if code != 0 || !strings.Contains(out, "ordering holds: 5 properties") {
		t.Fatalf("check through serve: exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	trusting, stopVerify := start(t, "serve", "--listen", "127.0.0.1:0", "--upstream", addr, "--upstream-ordering", "connection",
		"--verify", "--fail-on-violation", "--shutdown-grace", "1s")
	code, out, errOut = runCLI(t, "check", "-b", trusting, "--requests", "200", "-q")
	if code != 1 {
		t.Fatalf("check through serve trusting the reordering broker: exit %d, want 1 (its writes land out of order); stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	err := stopVerify()
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "violations") {
		t.Fatalf("serve --verify --fail-on-violation in front of the reordering broker: %v (exit %d), want exit 3", err, exitCode(err))
	}
	if out := stopBroker(); !regexp.MustCompile(`misbehaved \(reorder\): [1-9]\d* responses`).MatchString(out) {
		t.Fatalf("the broker did not say at exit how many responses it reordered:\n%s", out)
	}
}

// TestMisbehavingBrokerSwaps runs the default check against `bench broker
// --misbehave swap`, which keeps the log in order and swaps one response
// in 200: the check sees it.
func TestMisbehavingBrokerSwaps(t *testing.T) {
	addr, _ := startBenchBroker(t, "--misbehave", "swap")
	code, out, errOut := runCLI(t, "check", "-b", addr, "-q")
	if code != 1 || !strings.Contains(out, "responses out of order") || strings.Contains(out, "appended out of send order") {
		t.Fatalf("check against the swapping broker: exit %d, want 1 with responses out of order and the log in order; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestMisbehaveRefusals checks the settings a misbehaving broker cannot
// take: each is a usage error naming the flag.
func TestMisbehaveRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--misbehave", "sometimes"}, `--misbehave: "sometimes" must be reorder or swap`},
		{[]string{"--misbehave", "reorder", "--kind", "blackhole"}, "give --kind plain"},
		{[]string{"--misbehave", "swap", "--brokers", "3"}, "leave --brokers out"},
		{[]string{"--misbehave", "reorder", "--advertise", "127.0.0.1:1"}, "leave --advertise out"},
	} {
		code, _, errOut := runCLI(t, append([]string{"bench", "broker", "--timeout", "1s"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench broker %v: exit %d, want 2 with %q; stderr:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}
