package proxy

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDialFailuresWarnOncePerInterval checks that failures to dial one
// address make one warning per interval, with the count since the last,
// that addresses are counted apart, and that a success after failures is
// logged once and forgets the address.
func TestDialFailuresWarnOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	d := dialFailures{now: func() time.Time { return now }}
	refused := errors.New("connection refused")
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}

	d.failed(log, "a:1", refused)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=WARN") || !strings.Contains(l[0], "upstream=a:1") || !strings.Contains(l[0], "failures=1 ") {
		t.Fatalf("first failure: %q", l)
	}
	for range 5 {
		now = now.Add(time.Second)
		d.failed(log, "a:1", refused)
	}
	d.failed(log, "b:2", refused)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "upstream=b:2") {
		t.Fatalf("within the interval only the other address may warn: %q", l)
	}
	now = now.Add(dialWarnInterval)
	d.failed(log, "a:1", refused)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "failures=6 ") || !strings.Contains(l[0], "failures_total=7 ") {
		t.Fatalf("after the interval: %q", l)
	}
	d.succeeded(log, "a:1")
	d.succeeded(log, "a:1")
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "reachable again") || !strings.Contains(l[0], "failures_total=7") {
		t.Fatalf("back: %q", l)
	}
	if _, kept := d.byAddr["a:1"]; kept || len(d.byAddr) != 1 {
		t.Fatalf("addresses held: %v", d.byAddr)
	}
	d.failed(log, "a:1", refused)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "failures=1 ") {
		t.Fatalf("failing again after a success warns at once: %q", l)
	}
}

// TestOneLine: errors from several addresses render on one line, the
// same message once, and still match what they wrap.
func TestOneLine(t *testing.T) {
	refused := errors.New("dial tcp a:1: connect: connection refused")
	multi := errors.New("first\nsecond\r\n")
	err := oneLine(refused, nil, multi, ErrUpstreamAuth, multi, ErrUpstreamAuth)
	if got, want := err.Error(), "dial tcp a:1: connect: connection refused; first; second; upstream authentication failed"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrUpstreamAuth) || !errors.Is(err, refused) {
		t.Errorf("%v does not match what it joins", err)
	}
	if err := oneLine(nil, nil); err != nil {
		t.Errorf("oneLine of nils = %v", err)
	}
}
