package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestScrapeNumbers reads a goroutine count and a gauge from the kinds of
// body an admin endpoint serves, and -1 from bodies that lack them.
func TestScrapeNumbers(t *testing.T) {
	bodies := map[string]string{
		"/profile":  "goroutine profile: total 13\n2 @ 0x48bfae 0x44d617\n#\t0xa578b2\tacceptLoop\n",
		"/metrics":  "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 15\ngo_goroutines_other 99\n",
		"/no-total": "goroutine profile:\n",
		"/garbled":  "goroutine profile: total many\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, b)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		got  int64
		want int64
	}{
		{"profile", goroutineTotal(srv.URL + "/profile"), 13},
		{"gauge", scrapeGauge(srv.URL+"/metrics", "go_goroutines"), 15},
		{"profile without a total", goroutineTotal(srv.URL + "/no-total"), -1},
		{"total that is no number", goroutineTotal(srv.URL + "/garbled"), -1},
		{"gauge missing", scrapeGauge(srv.URL+"/metrics", "process_open_fds"), -1},
		{"nothing listening", goroutineTotal("http://127.0.0.1:1/debug/pprof/goroutine?debug=1"), -1},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}
