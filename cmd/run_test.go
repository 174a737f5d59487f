package cmd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/config"
)

// TestLogDurationsAsFlagsWriteThem checks that a duration reads the way
// its flag is written in both log formats, at the top level, inside a
// group and in attributes added with With, never as nanoseconds.
func TestLogDurationsAsFlagsWriteThem(t *testing.T) {
	emit := func(format string) string {
		var buf bytes.Buffer
		cfg := config.Default()
		cfg.LogFormat = format
		log, _ := newLogger(&buf, cfg)
		log.With("grace", 15*time.Second).WithGroup("dev").Info("started",
			"took", 8*time.Millisecond,
			slog.Group("retention", "time", 7*24*time.Hour, "bytes", "256MiB"))
		return buf.String()
	}
	var got struct {
		Grace string `json:"grace"`
		Dev   struct {
			Took      string `json:"took"`
			Retention struct {
				Time string `json:"time"`
			} `json:"retention"`
		} `json:"dev"`
	}
	line := emit("json")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("json log line %s: %v", line, err)
	}
	if got.Grace != "15s" || got.Dev.Took != "8ms" || got.Dev.Retention.Time != "168h0m0s" {
		t.Errorf("json durations: grace %q, took %q, retention time %q, want 15s, 8ms, 168h0m0s:\n%s",
			got.Grace, got.Dev.Took, got.Dev.Retention.Time, line)
	}
	text := emit("text")
	for _, want := range []string{"grace=15s", "dev.took=8ms", "dev.retention.time=168h0m0s"} {
		if !strings.Contains(text, want) {
			t.Errorf("text log line lacks %s:\n%s", want, text)
		}
	}
}
