package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/audit"
	"github.com/inorder-proxy/inorder/proxy"
)

// TestDevServesAudit: dev with --audit-file records the session into the
// file, request by request with --audit-data-path request, writes it whole
// at the stop, and serves the trail's metrics; /readyz is ready while the
// file sink writes.
func TestDevServesAudit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	addr, out, stop := startOutput(t, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--brokers", "1", "--shutdown-grace", "5s",
		"--audit-file", file, "--audit-data-path", "request")
	m := regexp.MustCompile(`admin endpoint at (http://\S+) `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("dev printed no admin endpoint:\n%s", out.String())
	}
	if code, body := httpGet(t, m[1]+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q, want 200", code, body)
	}
	if code, body := httpGet(t, m[1]+"/metrics"); code != 200 || !strings.Contains(body, `inorder_audit_sink_up{sink="file"} 1`) {
		t.Errorf("/metrics = %d, without the file sink up", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("audited"), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const produced = 3
	for range produced {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "made", 1, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			APIKey string `json:"api_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		counts[e.APIKey]++
	}
	if counts["Produce"] != produced || counts["CreateTopics"] < 1 {
		t.Fatalf("events by API: %v, want %d Produce and a CreateTopics", counts, produced)
	}
}

// failingSink fails every write.
type failingSink struct{}

func (failingSink) Name() audit.SinkName { return audit.SinkFile }
func (failingSink) Write(context.Context, []audit.Record) (int, error) {
	return 0, errors.New("disk full")
}
func (failingSink) Close() error { return nil }

// TestAuditReadiness: /readyz's answer is not ready, saying why, while an
// audit sink fails, even with the proxy ready.
func TestAuditReadiness(t *testing.T) {
	q := audit.NewQueue(audit.QueueOptions{}, failingSink{})
	trail := auditTrail{t: audit.New(audit.Options{}, q)}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		trail.t.Shutdown(ctx)
	}()
	ready := trail.ready(func() error { return nil })
	if err := ready(); err != nil {
		t.Fatalf("ready before any write: %v", err)
	}
	c := trail.t.Open(audit.ConnInfo{})
	if err := trail.t.Authentication(context.Background(), c, &audit.Authentication{Mechanism: "PLAIN", Principal: "User:a"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ready()
		if err != nil {
			if !errors.Is(err, proxy.ErrNotReady) || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("readiness with a failing sink: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("still ready with a failing sink")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
