package cmd

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/hostile"
)

// freeAddr returns a loopback address nothing listens on, for a listener
// whose address a test needs before the command prints it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// acceptingAt finds the bootstrap address in the log line that says the
// proxy accepts clients, which comes before the start-up discovery.
var acceptingAt = regexp.MustCompile(`msg="accepting clients" listen=(\S+)`)

// waitMatch polls buf until re matches it and returns the first group.
func waitMatch(t *testing.T, buf *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(buf.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("never printed %v:\n%s", re, buf.String())
	return ""
}

// newCLI returns the root command set to run args, and the buffers its
// stdout and stderr go to.
func newCLI(args ...string) (root *cobra.Command, out, errOut *syncBuffer) {
	out, errOut = &syncBuffer{}, &syncBuffer{}
	root = newRootCommand()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	return root, out, errOut
}

// newBroker starts a one-broker kfake cluster that the test closes.
func newBroker(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc
}

// runCommand runs the CLI with args until stop is called; wait returns
// what it returned, failing the test if it runs on for d.
func runCommand(t *testing.T, args ...string) (out, errOut *syncBuffer, stop func(), wait func(d time.Duration) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root, out, errOut := newCLI(args...)
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = root.ExecuteContext(ctx)
	}()
	wait = func(d time.Duration) error {
		select {
		case <-done:
			return err
		case <-time.After(d):
			t.Fatalf("inorder %v did not stop within %v of its signal", args, d)
			return nil
		}
	}
	t.Cleanup(func() {
		cancel()
		wait(30 * time.Second)
	})
	return out, errOut, cancel, wait
}

// askApiVersions writes an ApiVersions v0 request on c with correlation id
// corr.
func askApiVersions(t *testing.T, c net.Conn, corr int32) {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("startup-test")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), corr)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// answered reads one response from c within d and reports whether it is
// the answer to corr.
func answered(c net.Conn, corr int32, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return &unexpectedCorr{got, corr}
	}
	_, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(head[:4]))-4)
	return err
}

type unexpectedCorr struct{ got, want int32 }

func (e *unexpectedCorr) Error() string {
	return "correlation id " + strconv.Itoa(int(e.got)) + ", want " + strconv.Itoa(int(e.want))
}

// gauge reads an unlabelled gauge from the admin endpoint's /metrics.
func gauge(t *testing.T, admin, name string) string {
	t.Helper()
	_, body := httpGet(t, admin+"/metrics")
	if m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return "absent"
}

// TestStopAtAnyStageOfStartUpDrains stops serve, as SIGTERM does, while a
// client's request waits on a stalled upstream: once with the start-up
// discovery itself stalled, once after it. Either way the client was taken
// in and gets its answer when the upstream moves again, the admin endpoint
// says "draining" throughout, and the stop is a clean one.
func TestStopAtAnyStageOfStartUpDrains(t *testing.T) {
	for _, stage := range []string{"discovering", "serving"} {
		t.Run(stage, func(t *testing.T) {
			kc := newBroker(t)
			relay, err := hostile.NewRelay("127.0.0.1:0", kc.ListenAddrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			defer relay.Close()
			var release func()
			if stage == "discovering" {
				release = relay.Hold()
			}
			out, errOut, stop, wait := runCommand(t, "serve", "--listen", "127.0.0.1:0", "--upstream", relay.Addr(),
				"--admin-listen", "127.0.0.1:0", "--dial-timeout", "60s", "--shutdown-grace", "20s")
			admin := waitMatch(t, out, regexp.MustCompile(`admin endpoint at (http://\S+) `))
			listen := waitMatch(t, errOut, acceptingAt)
			if stage == "discovering" {
				if code, body := httpGet(t, admin+"/readyz"); code != 503 {
					t.Fatalf("/readyz = %d %q while the start-up discovery waits", code, body)
				}
			} else {
				waitText(t, errOut, "proxy ready")
				release = relay.Hold()
			}
			defer release()

			c, err := net.Dial("tcp", listen)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			defer c.Close()
			askApiVersions(t, c, 7)
			for deadline := time.Now().Add(10 * time.Second); gauge(t, admin, "inorder_requests_in_flight") != "1"; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the proxy never took the client's request in:\n%s", errOut.String())
				}
			}

			stop()
			waitText(t, errOut, "shutting down")
			if code, body := httpGet(t, admin+"/readyz"); code != 503 || !strings.Contains(body, "draining") {
				t.Errorf("/readyz = %d %q during the drain, want 503 draining", code, body)
			}
			release()
			if err := answered(c, 7, 10*time.Second); err != nil {
				t.Fatalf("the request taken in before the stop was not answered: %v\n%s", err, errOut.String())
			}
			if err := wait(20 * time.Second); err != nil {
				t.Fatalf("serve returned %v", err)
			}
			if !regexp.MustCompile(`msg=stopped connections=1 drained=true`).MatchString(errOut.String()) {
				t.Errorf("the stopped line does not count the drained connection:\n%s", errOut.String())
			}
		})
	}
}

// TestReadyOnlyWhenServing holds serve's start-up discovery at the
// upstream while a readiness probe's own discovery goes through: whenever
// /readyz says 200, a client is answered, and "proxy ready" is logged once
// and not before the first 200.
func TestReadyOnlyWhenServing(t *testing.T) {
	kc := newBroker(t)
	hold := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(hold) })
	var held atomic.Bool
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if !held.Swap(true) {
			kc.SleepControl(func() { <-hold })
		}
		return nil, nil, false
	})
	out, errOut, _, _ := runCommand(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--admin-listen", "127.0.0.1:0", "--dial-timeout", "60s", "--shutdown-grace", "1s")
	admin := waitMatch(t, out, regexp.MustCompile(`admin endpoint at (http://\S+) `))
	listen := waitMatch(t, errOut, acceptingAt)
	deadline := time.Now().Add(15 * time.Second)
	for {
		logged := strings.Contains(errOut.String(), "proxy ready")
		code, body := httpGet(t, admin+"/readyz")
		if code == 200 {
			break
		}
		if logged {
			t.Fatalf("\"proxy ready\" logged while /readyz says %d %q", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(errOut.String(), "proxy ready"); n != 1 {
		t.Errorf("\"proxy ready\" logged %d times by the first 200, want once:\n%s", n, errOut.String())
	}
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	askApiVersions(t, c, 3)
	if err := answered(c, 3, 5*time.Second); err != nil {
		t.Fatalf("/readyz said 200 but a client was not served: %v", err)
	}
}

// TestProxyReadyOnlyOnceUpstreamReached starts serve in front of an
// upstream that is not there yet: it warns, serves, and does not say
// "proxy ready" until the upstream comes up, which it finds by itself.
func TestProxyReadyOnlyOnceUpstreamReached(t *testing.T) {
	up := freeAddr(t)
	out, errOut, _, _ := runCommand(t, "serve", "--listen", "127.0.0.1:0", "--upstream", up, "--dial-timeout", "1s")
	waitText(t, out, "clients connect to")
	waitText(t, errOut, "no upstream could be reached")
	if strings.Contains(errOut.String(), "proxy ready") {
		t.Fatalf("\"proxy ready\" logged while no upstream answers:\n%s", errOut.String())
	}
	_, port, _ := net.SplitHostPort(up)
	p, _ := strconv.Atoi(port)
	newBroker(t, kfake.Ports(p))
	waitText(t, errOut, "proxy ready")
}
