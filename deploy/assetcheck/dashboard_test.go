package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/inorder-proxy/inorder/metrics"
)

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// exprs returns every "expr" string in a decoded dashboard.
func exprs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "expr" {
				out = append(out, s)
				continue
			}
			out = append(out, exprs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, exprs(e)...)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\binorder_[a-z_]+`)

// TestDashboardQueriesKnownMetrics: every metric a panel queries is one the
// proxy registers (histogram series by their family), and the dashboard
// shows most of what the proxy exports.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	data, err := os.ReadFile("../grafana/inorder-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	queries := exprs(dash["panels"])
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	known := metrics.Names()
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metricName.FindAllString(q, -1) {
			family := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(known, f) {
					family = f
				}
			}
			if !slices.Contains(known, family) {
				t.Errorf("query %q uses %s, which inorder does not register", q, name)
			}
			used[family] = true
		}
	}
	for _, name := range known {
		if !used[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}
