package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestQuotaJavaClientMetrics runs kafka-clients (compat/java's
// QuotaMetrics) through the built binary in front of the embedded broker
// and, when INORDER_KAFKA_BOOTSTRAP names one, Apache Kafka: a producer
// and a consumer over their quotas for 15 s, and a producer and a
// consumer of another client id with no quota. The Java client's own
// produce-throttle-time-avg/-max and fetch-throttle-time-avg/-max must
// show the throttling for the first two and be 0 for the others.
// INORDER_JAVA_CLASSPATH is the classpath of compat/java once built (mvn
// package there): target/classes and target/libs/*.
func TestQuotaJavaClientMetrics(t *testing.T) {
	cp := os.Getenv("INORDER_JAVA_CLASSPATH")
	if cp == "" {
		t.Skip("no Java client: run mvn package in compat/java and set INORDER_JAVA_CLASSPATH to target/classes:target/libs/*")
	}
	if testing.Short() {
		t.Skip("runs kafka-clients for 15 s per broker")
	}
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "quota-java-p", "quota-java-c"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		quotaJava(t, cp, kc.ListenAddrs()[0], "")
	})
	t.Run("kafka", func(t *testing.T) {
		boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
		if boot == "" {
			t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
		}
		quotaJava(t, cp, boot, fmt.Sprintf("-%d", time.Now().UnixNano()))
	})
}

func quotaJava(t *testing.T, cp, upstream, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topicP, topicC := "quota-java-p"+suffix, "quota-java-c"+suffix
	if suffix != "" {
		createQuotaTopics(t, ctx, upstream, topicP, topicC)
	}
	fillTopic(t, ctx, upstream, topicC, 16<<20)
	cfg := filepath.Join(t.TempDir(), "inorder.yaml")
	doc := fmt.Sprintf("quotas:\n  - client-id: quota-java-producer\n    producer_byte_rate: %d\n  - client-id: quota-java-consumer\n    consumer_byte_rate: %d\n", quotaRate, quotaRate)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream,
		"--config", cfg, "--admin-listen", "", "--log-level", "warn")

	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", cp, "inorder.compat.QuotaMetrics",
		addr, topicP, topicC, "15", "quota-java", "quota-java-free")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("QuotaMetrics: %v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("QuotaMetrics printed %q", line)
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("QuotaMetrics printed %q: %v", line, err)
		}
		got[f[0]+" "+f[1]] = v
		t.Logf("%s %s = %g ms", f[0], f[1], v)
	}
	for _, c := range []struct {
		client, metric string
		throttled      bool
	}{
		{"quota-java-producer", "produce-throttle-time", true},
		{"quota-java-consumer", "fetch-throttle-time", true},
		{"quota-java-free-producer", "produce-throttle-time", false},
		{"quota-java-free-consumer", "fetch-throttle-time", false},
	} {
		for _, stat := range []string{"avg", "max"} {
			key := c.client + " " + c.metric + "-" + stat
			v, ok := got[key]
			switch {
			case !ok:
				t.Errorf("QuotaMetrics printed no %s", key)
			case c.throttled && !(v > 0):
				t.Errorf("%s = %g; want > 0: the client is over its quota", key, v)
			case !c.throttled && v != 0:
				t.Errorf("%s = %g; want 0: the client has no quota", key, v)
			}
		}
	}
}
