package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/metrics"
)

func start(t *testing.T, o Options) string {
	t.Helper()
	o.Listen = "127.0.0.1:0"
	s, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	})
	return "http://" + s.Addr()
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	m := metrics.New()
	m.BuildInfo("v9.9.9", "0123abcd")
	m.RequestRead(18)
	var notReady atomic.Pointer[error]
	base := start(t, Options{Metrics: m, Ready: func() error {
		if e := notReady.Load(); e != nil {
			return *e
		}
		return nil
	}})

	if code, body := get(t, "GET", base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, "GET", base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q, want 200", code, body)
	}
	reason := errors.New("not ready: draining")
	notReady.Store(&reason)
	if code, body := get(t, "GET", base+"/readyz"); code != 503 || body != "not ready: draining\n" {
		t.Errorf("/readyz while not ready = %d %q, want 503 with the reason", code, body)
	}
	code, body := get(t, "GET", base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{`inorder_build_info{goversion="`, `revision="0123abcd",version="v9.9.9"} 1`, `inorder_requests_total{api="ApiVersions"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, "POST", base+"/metrics"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d, want 405", code)
	}
	if code, _ := get(t, "GET", base+"/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without --admin-pprof = %d, want 404", code)
	}
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	base := start(t, Options{Pprof: true})
	if code, body := get(t, "GET", base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ with pprof = %d", code)
	}
	if code, body := get(t, "GET", base+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile = %d", code)
	}
	// Without Metrics, /metrics is absent and readiness defaults to ready.
	if code, _ := get(t, "GET", base+"/metrics"); code != 404 {
		t.Errorf("/metrics without Metrics = %d, want 404", code)
	}
	if code, _ := get(t, "GET", base+"/readyz"); code != 200 {
		t.Errorf("/readyz without Ready = %d, want 200", code)
	}
}
