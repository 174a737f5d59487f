package cmd

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
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

// TestDevServesAdmin: dev turns the admin endpoint on by itself, prints it,
// and the endpoint reflects the proxy: ready once discovery found the
// embedded brokers, with a listener per broker in the metrics.
func TestDevServesAdmin(t *testing.T) {
	_, out, stop := startOutput(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--brokers", "2", "--shutdown-grace", "1s")
	defer stop()
	m := regexp.MustCompile(`admin endpoint at (http://\S+) `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("dev printed no admin endpoint:\n%s", out.String())
	}
	base := m[1]
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q, want 200 after discovery", code, body)
	}
	code, body := httpGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{`inorder_listeners_open{kind="node"} 2`, `inorder_build_info{`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := httpGet(t, base+"/debug/pprof/"); code != 404 {
		t.Errorf("pprof served without --admin-pprof: %d", code)
	}
}

// TestServeAdminOffByDefault: serve prints no admin endpoint unless asked.
func TestServeAdminOffByDefault(t *testing.T) {
	_, out, stop := startOutput(t, "serve", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--dial-timeout", "200ms")
	defer stop()
	if strings.Contains(out.String(), "admin endpoint") {
		t.Fatalf("serve opened an admin endpoint by default:\n%s", out.String())
	}
}

// TestBuildInfoMetric checks that inorder_build_info names the version and
// revision `inorder version` prints, not the empty link-time version of a
// source build.
func TestBuildInfoMetric(t *testing.T) {
	cfg := config.Default()
	cfg.AdminListen = "127.0.0.1:0"
	families, err := newMetrics(cfg).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := currentBuild()
	labels := map[string]string{}
	for _, f := range families {
		if f.GetName() == metrics.NameBuildInfo && len(f.GetMetric()) == 1 {
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
		}
	}
	if labels["version"] == "" || labels["version"] != want.Version || labels["revision"] != want.revisionLabel() || labels["goversion"] == "" {
		t.Fatalf("inorder_build_info labels %v; want version %q, revision %q", labels, want.Version, want.revisionLabel())
	}
	for _, tc := range []struct {
		b    buildInfo
		want string
	}{
		{buildInfo{Revision: "0123abcd"}, "0123abcd"},
		{buildInfo{Revision: "0123abcd", Modified: true}, "0123abcd+dirty"},
		{buildInfo{}, "unknown"},
	} {
		if got := tc.b.revisionLabel(); got != tc.want {
			t.Errorf("%+v: revision label %q, want %q", tc.b, got, tc.want)
		}
	}
}
